package kafkadlq

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// KafkaExtras is the Kafka section of `stats` (dlqctl.stats/v1 backend).
type KafkaExtras struct {
	Topic      string `json:"topic"`
	StateTopic string `json:"state_topic"`
	// Partitions: per DLQ partition, log start, high watermark, last
	// stable offset and the entries remaining (not redriven or resolved).
	Partitions []PartitionExtras `json:"partitions"`
	// RetentionMs is the DLQ topic's retention.ms (-1: forever).
	RetentionMs int64 `json:"retention_ms"`
	// OldestRemaining is the timestamp of the oldest entry still in the DLQ.
	OldestRemaining string `json:"oldest_remaining,omitempty"`
	// Warnings say what needs doing soon (retention about to delete
	// remaining entries).
	Warnings []string `json:"warnings,omitempty"`
	// Groups are the consumer groups that commit offsets on the origin
	// topics, with their lag there.
	Groups []GroupLag `json:"groups,omitempty"`
}

// PartitionExtras is one DLQ partition.
type PartitionExtras struct {
	Partition       int32 `json:"partition"`
	LogStart        int64 `json:"log_start"`
	HighWatermark   int64 `json:"high_watermark"`
	LastStable      int64 `json:"last_stable"`
	Remaining       int64 `json:"remaining"`
	OldestRemaining int64 `json:"oldest_remaining_offset"`
}

// GroupLag is a consumer group's lag on one origin topic.
type GroupLag struct {
	Group string `json:"group"`
	Topic string `json:"topic"`
	State string `json:"state"`
	Lag   int64  `json:"lag"`
}

// retentionWarnWithin is how far ahead stats warns of retention.
const retentionWarnWithin = 24 * time.Hour

// Extras reports the DLQ's partitions, its retention and the origin
// topics' consumer-group lag.
func (t *Topic) Extras(ctx context.Context, origins []string) (backend.ExtraStats, error) {
	spans, ok, err := t.spans(ctx, t.src.topic)
	if err != nil {
		return backend.ExtraStats{}, err
	}
	if !ok {
		return backend.ExtraStats{}, fmt.Errorf("%s: topic %q does not exist", t, t.src.topic)
	}
	st, err := t.loadState(ctx, true)
	if err != nil {
		return backend.ExtraStats{}, err
	}
	x := KafkaExtras{Topic: t.src.topic, StateTopic: t.src.stateTopic, RetentionMs: -1}
	for _, w := range []string{t.mismatchWarning(), t.ignoredWarning()} {
		if w != "" {
			x.Warnings = append(x.Warnings, w)
		}
	}
	var oldest time.Time
	if x.Partitions, oldest, err = t.partitionExtras(ctx, spans, st.done); err != nil {
		return backend.ExtraStats{}, err
	}
	if !oldest.IsZero() {
		x.OldestRemaining = oldest.UTC().Format(time.RFC3339)
	}
	if err := t.readRetention(ctx, &x); err != nil {
		return backend.ExtraStats{}, err
	}
	if x.RetentionMs >= 0 && !oldest.IsZero() {
		deleteAt := oldest.Add(time.Duration(x.RetentionMs) * time.Millisecond)
		if deleteAt.Before(t.now().Add(retentionWarnWithin)) {
			x.Warnings = append(x.Warnings, fmt.Sprintf("retention (retention.ms=%d) deletes the oldest remaining entry (%s) by %s: export or redrive it first",
				x.RetentionMs, x.OldestRemaining, deleteAt.UTC().Format(time.RFC3339)))
		}
	}
	if x.Groups, err = t.groupLag(ctx, origins); err != nil {
		return backend.ExtraStats{}, err
	}
	return backend.ExtraStats{JSON: x, Title: "Kafka DLQ topic", Rows: x.rows()}, nil
}

// partitionExtras is each partition's offsets and remaining entries, and
// the timestamp of the oldest remaining entry of them all.
func (t *Topic) partitionExtras(ctx context.Context, spans []span, done *doneSet) ([]PartitionExtras, time.Time, error) {
	var parts []PartitionExtras
	var oldest time.Time
	want := map[int32][]int64{}
	for _, s := range spans {
		pe := PartitionExtras{Partition: s.partition, LogStart: s.start, HighWatermark: s.hwm, LastStable: s.end,
			Remaining: s.end - s.start - done.countIn(s.partition, s.start, s.end), OldestRemaining: -1}
		if o := done.firstRemaining(s.partition, s.start, s.end); o >= 0 {
			pe.OldestRemaining = o
			// stats scanned just before: no need to fetch it again.
			if ts, ok := t.seenAt(s.partition, o); ok {
				if oldest.IsZero() || ts.Before(oldest) {
					oldest = ts
				}
			} else {
				want[s.partition] = append(want[s.partition], o)
			}
		}
		parts = append(parts, pe)
	}
	if len(want) > 0 {
		recs, err := t.fetchMany(ctx, want)
		if err != nil {
			return nil, time.Time{}, err
		}
		for _, r := range recs {
			if oldest.IsZero() || r.Timestamp.Before(oldest) {
				oldest = r.Timestamp
			}
		}
	}
	return parts, oldest, nil
}

// readRetention sets x.RetentionMs from the DLQ topic's retention.ms.
func (t *Topic) readRetention(ctx context.Context, x *KafkaExtras) error {
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	cfgs, err := t.adm.DescribeTopicConfigs(rctx, t.src.topic)
	if err != nil {
		return t.connErr(ctx, "topic configs", err)
	}
	if rc, err := cfgs.On(t.src.topic, nil); err == nil {
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" && c.Value != nil {
				if n, err := strconv.ParseInt(*c.Value, 10, 64); err == nil {
					x.RetentionMs = n
				}
			}
		}
	}
	return nil
}

// rows is x as stats shows it.
func (x KafkaExtras) rows() [][2]string {
	rows := [][2]string{{"topic", x.Topic + " (state in " + x.StateTopic + ")"}}
	for _, p := range x.Partitions {
		rows = append(rows, [2]string{fmt.Sprintf("partition %d", p.Partition),
			fmt.Sprintf("log start %d, high watermark %d, %d remaining", p.LogStart, p.HighWatermark, p.Remaining)})
	}
	ret := "forever"
	if x.RetentionMs >= 0 {
		ret = (time.Duration(x.RetentionMs) * time.Millisecond).String()
	}
	rows = append(rows, [2]string{"retention", ret})
	for _, w := range x.Warnings {
		rows = append(rows, [2]string{"warning", w})
	}
	for _, g := range x.Groups {
		rows = append(rows, [2]string{"group " + g.Group, fmt.Sprintf("lag %d on %s (%s)", g.Lag, g.Topic, g.State)})
	}
	return rows
}

// groupLag is the lag, on each origin topic, of every group that has
// committed offsets there.
func (t *Topic) groupLag(ctx context.Context, origins []string) ([]GroupLag, error) {
	want := map[string]bool{}
	for _, o := range origins {
		if o != "" {
			want[o] = true
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	listed, err := t.adm.ListGroups(rctx)
	if err != nil {
		return nil, t.connErr(ctx, "list consumer groups", err)
	}
	groups := listed.Groups()
	if len(groups) == 0 {
		return nil, nil
	}
	lags, err := t.adm.Lag(rctx, groups...)
	if err != nil {
		return nil, t.connErr(ctx, "consumer group lag", err)
	}
	var out []GroupLag
	for _, l := range lags {
		if l.Error() != nil {
			continue
		}
		for topic, tl := range l.Lag.TotalByTopic() {
			if want[topic] {
				out = append(out, GroupLag{Group: l.Group, Topic: topic, State: l.State, Lag: tl.Lag})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.Compare(out[i].Group+"\x00"+out[i].Topic, out[j].Group+"\x00"+out[j].Topic) < 0
	})
	return out, nil
}
