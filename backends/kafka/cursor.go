package kafkadlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dlqctl/dlqctl/backend"
)

// cursor is where a Scan starts: after one entry in merged order
// ("partition:offset", what list pages with), or from per-partition
// offsets (a Tail watermark, "@p=offset,p=offset").
type cursor struct {
	after   *mergeKey
	minNext map[int32]int64
}

const watermarkPrefix = "@"

func (t *Topic) parseCursor(ctx context.Context, s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	if strings.HasPrefix(s, watermarkPrefix) {
		c := cursor{minNext: map[int32]int64{}}
		body := strings.TrimPrefix(s, watermarkPrefix)
		if body == "" {
			return c, nil
		}
		for _, part := range strings.Split(body, ",") {
			ps, os, ok := strings.Cut(part, "=")
			p, err1 := strconv.ParseInt(ps, 10, 32)
			o, err2 := strconv.ParseInt(os, 10, 64)
			if !ok || err1 != nil || err2 != nil || p < 0 || o < 0 {
				return c, backend.Configf("%s: cursor %q is not a watermark (@partition=offset,…)", t, s)
			}
			c.minNext[int32(p)] = o
		}
		return c, nil
	}
	p, o, ok := ParseKafkaID(s)
	if !ok {
		return cursor{}, backend.Configf("%s: cursor %q is not a Kafka entry id (partition:offset)", t, s)
	}
	k := mergeKey{partition: p, offset: o}
	r, err := t.fetch(ctx, p, o)
	switch {
	case err == nil:
		k.ts = r.Timestamp.UnixMilli()
	case errors.Is(err, backend.ErrNotFound):
		return cursor{}, backend.Configf("%s: cursor %q: no such entry (expired by retention?)", t, s)
	default:
		return cursor{}, err
	}
	return cursor{after: &k}, nil
}

// Tail is a watermark of every partition's end ("@p=offset,…"): a Scan
// after it reads only records dead-lettered since, whatever their
// timestamps.
func (t *Topic) Tail(ctx context.Context) (string, error) {
	spans, ok, err := t.spans(ctx, t.src.topic)
	if err != nil {
		return "", err
	}
	if !ok {
		if t.missing {
			return "", nil
		}
		return "", fmt.Errorf("%s: topic %q does not exist", t, t.src.topic)
	}
	parts := make([]string, 0, len(spans))
	for _, s := range spans {
		parts = append(parts, fmt.Sprintf("%d=%d", s.partition, s.end))
	}
	return watermarkPrefix + strings.Join(parts, ","), nil
}
