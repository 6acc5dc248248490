package kafkadlq

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
)

// sourcePartition is a partition of a share group's source topic.
type sourcePartition struct {
	topic     string
	partition int32
}

// heldRecord is the oldest source record of a partition that a header-only
// dead letter was rebuilt from.
type heldRecord struct {
	offset int64
	ts     time.Time
}

// noteHeld takes note of src, the source record a header-only share-group
// dead letter was rebuilt from: the oldest of them per partition is the
// one the source's retention deletes first (SourceRetention).
func (t *Topic) noteHeld(src *kgo.Record) {
	k := sourcePartition{src.Topic, src.Partition}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shareHeld == nil {
		t.shareHeld = map[sourcePartition]heldRecord{}
	}
	if h, ok := t.shareHeld[k]; !ok || src.Offset < h.offset {
		t.shareHeld[k] = heldRecord{src.Offset, src.Timestamp}
	}
}

// SourceRetention says, per source partition that header-only share-group
// dead letters read so far were rebuilt from, how long it still holds the
// oldest of their records: the topic deletes a record by time once its
// segment's newest timestamp is retention.ms old, so at the soonest at the
// record's timestamp plus retention.ms. retention.bytes and compaction
// can delete it sooner, and the basis says so where they apply. Soonest
// first.
func (t *Topic) SourceRetention(ctx context.Context, now time.Time) ([]backend.SourceRetention, error) {
	t.mu.Lock()
	held := make(map[sourcePartition]heldRecord, len(t.shareHeld))
	topics := map[string]bool{}
	for k, h := range t.shareHeld {
		held[k] = h
		topics[k.topic] = true
	}
	t.mu.Unlock()
	if len(held) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(topics))
	for tp := range topics {
		names = append(names, tp)
	}
	sort.Strings(names)
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	tc, err := t.adm.DescribeTopicConfigs(rctx, names...)
	if err != nil {
		return nil, t.connErr(ctx, "read the retention of the share groups' source topics", err)
	}
	var out []backend.SourceRetention
	for k, h := range held {
		cfg := map[string]string{}
		if rc, err := tc.On(k.topic, nil); err == nil {
			for _, kv := range rc.Configs {
				if kv.Value != nil {
					cfg[kv.Key] = *kv.Value
				}
			}
		}
		out = append(out, retentionOf(k, h, cfg, now))
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Limited != b.Limited {
			return a.Limited
		}
		if a.Left != b.Left {
			return a.Left < b.Left
		}
		return a.Source < b.Source
	})
	return out, nil
}

// retentionOf is how long partition k still holds its record h under the
// topic configs cfg.
func retentionOf(k sourcePartition, h heldRecord, cfg map[string]string, now time.Time) backend.SourceRetention {
	part := k.topic + "/" + strconv.Itoa(int(k.partition))
	r := backend.SourceRetention{Source: part, Oldest: part + ":" + strconv.FormatInt(h.offset, 10)}
	ts := h.ts
	ms, err := strconv.ParseInt(cfg["retention.ms"], 10, 64)
	var basis []string
	switch {
	case err != nil:
		basis = append(basis, "retention.ms unknown")
	case ms < 0:
		basis = append(basis, "retention.ms -1: kept for ever by time")
	default:
		keep := time.Duration(ms) * time.Millisecond
		r.Limited, r.Until = true, ts.Add(keep).UTC()
		r.Left = r.Until.Sub(now)
		basis = append(basis, fmt.Sprintf("retention.ms %s from the record's timestamp %s", keep, ts.UTC().Format(time.RFC3339)))
	}
	if b := cfg["retention.bytes"]; b != "" && b != "-1" {
		basis = append(basis, "retention.bytes "+b+" can delete it sooner")
	}
	if strings.Contains(cfg["cleanup.policy"], "compact") {
		basis = append(basis, "compaction deletes it once a newer record has its key")
	}
	r.Basis = strings.Join(basis, "; ")
	return r
}
