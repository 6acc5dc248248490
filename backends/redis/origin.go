package redisstream

import (
	"context"
	"fmt"
	"strings"

	"github.com/dlqctl/dlqctl/backend"
)

// CheckOrigin: the stream must exist and have every consumer group the
// envelopes name, or a redrive would publish to a stream nobody reads
// (backend.OriginChecker).
func (s *Stream) CheckOrigin(ctx context.Context, stream string, groups []string) backend.OriginStatus {
	n, err := s.rdb.Exists(ctx, stream).Result()
	if err != nil {
		return backend.OriginStatus{Detail: scrub(err, s.password).Error(), Fix: "check the server"}
	}
	if n == 0 {
		return backend.OriginStatus{Detail: fmt.Sprintf("stream %q does not exist", stream),
			Fix: fmt.Sprintf("start the consumer that reads %q (it creates the stream and its group), or redrive with --to", stream)}
	}
	infos, err := s.rdb.XInfoGroups(ctx, stream).Result()
	if err != nil {
		return backend.OriginStatus{Detail: scrub(err, s.password).Error(), Fix: "check the server"}
	}
	have := map[string]bool{}
	for _, g := range infos {
		have[g.Name] = true
	}
	var missing []string
	for _, g := range groups {
		if !have[g] {
			missing = append(missing, g)
		}
	}
	if len(missing) > 0 {
		return backend.OriginStatus{Detail: "consumer group " + strings.Join(missing, ", ") + " missing",
			Fix: fmt.Sprintf("start the consumer, or: redis-cli XGROUP CREATE %s %s $ MKSTREAM", stream, missing[0])}
	}
	word := "consumer groups"
	if len(infos) == 1 {
		word = "consumer group"
	}
	return backend.OriginStatus{OK: true, Detail: fmt.Sprintf("exists with %d %s", len(infos), word)}
}
