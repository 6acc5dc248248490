package redisstream

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backend"
)

// DefaultPendingLimit bounds how many pending entries are read per group:
// a group's pending entries list can be far longer than anyone reads.
const DefaultPendingLimit = 10000

// xpendingPage is the COUNT of one XPENDING call.
const xpendingPage = 1000

// The report types live in backend so that commands need no Redis types.
type (
	Histogram         = backend.Histogram
	PendingReport     = backend.PendingReport
	ConsumerPending   = backend.ConsumerPending
	PendingEntry      = backend.PendingEntry
	QuarantineOptions = backend.QuarantineOptions
	QuarantineReport  = backend.QuarantineReport
	QuarantinedEntry  = backend.QuarantinedEntry
)

// Pending reports group's pending entries on stream: per consumer count
// and idle time, and, from the first limit entries of the pending list
// (0 means DefaultPendingLimit), the oldest idle time, the delivery-count
// histogram and the entries idle for minIdle or longer (all of them when
// minIdle is 0). An unknown stream or group is an error wrapping
// backend.ErrNotFound.
func (s *Stream) Pending(ctx context.Context, stream, group string, minIdle time.Duration, limit int) (PendingReport, error) {
	if limit <= 0 {
		limit = DefaultPendingLimit
	}
	groups, err := s.groupInfos(ctx, stream)
	if errors.Is(err, errNoStream) {
		return PendingReport{}, fmt.Errorf("no group %q on stream %q (the stream does not exist): %w", group, stream, backend.ErrNotFound)
	}
	if err != nil {
		return PendingReport{}, err
	}
	var gi *groupInfo
	for i := range groups {
		if groups[i].name == group {
			gi = &groups[i]
		}
	}
	if gi == nil {
		return PendingReport{}, fmt.Errorf("no group %q on stream %q (groups: %s): %w", group, stream, groupNames(groups), backend.ErrNotFound)
	}
	r := PendingReport{
		Stream: stream, Group: group, Lag: gi.lag, EntriesRead: gi.entriesRead,
		LastDeliveredID: gi.lastDeliveredID, MinIdleSeconds: seconds(minIdle),
		Consumers: []ConsumerPending{}, DeliveryHistogram: backend.NewHistogram(), OverMinIdle: []PendingEntry{},
	}

	summary, err := s.rdb.XPending(ctx, stream, group).Result()
	if err != nil {
		return r, s.groupErr(ctx, stream, group, "xpending", err)
	}
	r.Pending = summary.Count
	consumers, err := s.rdb.XInfoConsumers(ctx, stream, group).Result()
	if err != nil {
		return r, s.groupErr(ctx, stream, group, "xinfo consumers", err)
	}
	for _, c := range consumers {
		r.Consumers = append(r.Consumers, ConsumerPending{Name: c.Name, Pending: c.Pending, IdleSeconds: seconds(c.Idle)})
	}
	sort.Slice(r.Consumers, func(i, j int) bool { return r.Consumers[i].Name < r.Consumers[j].Name })

	sampled, err := s.pendingEntries(ctx, stream, group, limit, func(p redis.XPendingExt) {
		r.DeliveryHistogram.Add(p.RetryCount)
		idle := seconds(p.Idle)
		r.OldestIdleSeconds = max(r.OldestIdleSeconds, idle)
		if p.Idle >= minIdle {
			r.OverMinIdle = append(r.OverMinIdle, PendingEntry{ID: p.ID, Consumer: p.Consumer, IdleSeconds: idle, Deliveries: p.RetryCount})
		}
	})
	if err != nil {
		return r, err
	}
	r.Sampled = sampled
	return r, nil
}

// pendingEntries calls fn for the first limit entries of the group's
// pending list, a page at a time, and reports whether there were more.
func (s *Stream) pendingEntries(ctx context.Context, stream, group string, limit int, fn func(redis.XPendingExt)) (bool, error) {
	start, seen := "-", 0
	for seen < limit {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		count := min(xpendingPage, limit-seen)
		page, err := s.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: stream, Group: group, Start: start, End: "+", Count: int64(count),
		}).Result()
		if err != nil {
			return false, s.groupErr(ctx, stream, group, "xpending", err)
		}
		for _, p := range page {
			fn(p)
		}
		seen += len(page)
		if len(page) < count {
			return false, nil
		}
		start = "(" + page[len(page)-1].ID
	}
	more, err := s.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: stream, Group: group, Start: start, End: "+", Count: 1,
	}).Result()
	if err != nil {
		return false, s.groupErr(ctx, stream, group, "xpending", err)
	}
	return len(more) > 0, nil
}

// RedisExtras is the Redis section of dlqctl.stats/v1 (under "backend").
type RedisExtras struct {
	Groups []GroupStats `json:"groups"`
}

// GroupStats is one consumer group of an origin stream.
type GroupStats struct {
	Stream            string    `json:"stream"`
	Group             string    `json:"group"`
	Consumers         int64     `json:"consumers"`
	Pending           int64     `json:"pending"`
	Lag               *int64    `json:"lag,omitempty"`
	EntriesRead       *int64    `json:"entries_read,omitempty"`
	LastDeliveredID   string    `json:"last_delivered_id"`
	OldestIdleSeconds int64     `json:"oldest_idle_seconds"`
	DeliveryHistogram Histogram `json:"delivery_histogram"`
	// Sampled: the group has more than DefaultPendingLimit pending
	// entries and only the first ones were read for the oldest idle time
	// and the histogram.
	Sampled bool `json:"sampled"`
}

// Extras reports the consumer groups of the origin streams: pending count,
// lag, entries read, and from the first DefaultPendingLimit pending entries
// the oldest idle time and the delivery-count histogram. Origins that are
// not streams (or no longer exist) are left out.
func (s *Stream) Extras(ctx context.Context, origins []string) (backend.ExtraStats, error) {
	streams := dedupSorted(origins)
	out := RedisExtras{Groups: []GroupStats{}}
	for _, stream := range streams {
		groups, err := s.groupInfos(ctx, stream)
		if errors.Is(err, errNoStream) || errors.Is(err, errNotAStream) {
			continue
		}
		if err != nil {
			return backend.ExtraStats{}, err
		}
		for _, g := range groups {
			gs := GroupStats{
				Stream: stream, Group: g.name, Consumers: g.consumers, Pending: g.pending,
				Lag: g.lag, EntriesRead: g.entriesRead, LastDeliveredID: g.lastDeliveredID,
				DeliveryHistogram: backend.NewHistogram(),
			}
			sampled, err := s.pendingEntries(ctx, stream, g.name, DefaultPendingLimit, func(p redis.XPendingExt) {
				gs.DeliveryHistogram.Add(p.RetryCount)
				gs.OldestIdleSeconds = max(gs.OldestIdleSeconds, seconds(p.Idle))
			})
			if err != nil {
				return backend.ExtraStats{}, err
			}
			gs.Sampled = sampled
			out.Groups = append(out.Groups, gs)
		}
	}
	return backend.ExtraStats{JSON: out, Title: "Redis consumer groups", Rows: extraRows(out, streams)}, nil
}

func extraRows(x RedisExtras, streams []string) [][2]string {
	if len(x.Groups) == 0 {
		what := "no origin streams"
		if len(streams) > 0 {
			what = "none on " + strings.Join(streams, ", ")
		}
		return [][2]string{{"groups", what}}
	}
	rows := make([][2]string, 0, len(x.Groups))
	for _, g := range x.Groups {
		var b strings.Builder
		fmt.Fprintf(&b, "pending %d", g.Pending)
		if g.Pending > 0 {
			fmt.Fprintf(&b, ", oldest idle %s", time.Duration(g.OldestIdleSeconds)*time.Second)
		}
		if g.Lag != nil {
			fmt.Fprintf(&b, ", lag %d", *g.Lag)
		} else {
			b.WriteString(", lag unknown")
		}
		fmt.Fprintf(&b, ", deliveries %s", g.DeliveryHistogram)
		if g.Sampled {
			fmt.Fprintf(&b, " (first %d pending entries)", DefaultPendingLimit)
		}
		rows = append(rows, [2]string{g.Stream + " / " + g.Group, b.String()})
	}
	return rows
}

// groupInfo is one reply of XINFO GROUPS. It is parsed here rather than by
// go-redis, which reports an absent lag (Redis < 7) as 0.
type groupInfo struct {
	name            string
	consumers       int64
	pending         int64
	lastDeliveredID string
	entriesRead     *int64
	lag             *int64
}

var (
	errNoStream   = errors.New("no such stream")
	errNotAStream = errors.New("not a stream")
)

func (s *Stream) groupInfos(ctx context.Context, stream string) ([]groupInfo, error) {
	reply, err := s.rdb.Do(ctx, "XINFO", "GROUPS", stream).Result()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case strings.Contains(err.Error(), "no such key"):
			return nil, fmt.Errorf("stream %q: %w", stream, errNoStream)
		case isWrongType(err):
			return nil, fmt.Errorf("%s: key %q is not a stream: %w", s, stream, errNotAStream)
		}
		return nil, fmt.Errorf("%s: xinfo groups %s: %w", s, stream, err)
	}
	items, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: xinfo groups %s: unexpected reply %T", s, stream, reply)
	}
	groups := make([]groupInfo, 0, len(items))
	for _, item := range items {
		m, err := replyMap(item)
		if err != nil {
			return nil, fmt.Errorf("%s: xinfo groups %s: %w", s, stream, err)
		}
		g := groupInfo{
			name:            replyString(m["name"]),
			lastDeliveredID: replyString(m["last-delivered-id"]),
			entriesRead:     replyInt(m["entries-read"]),
			lag:             replyInt(m["lag"]),
		}
		if n := replyInt(m["consumers"]); n != nil {
			g.consumers = *n
		}
		if n := replyInt(m["pending"]); n != nil {
			g.pending = *n
		}
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].name < groups[j].name })
	return groups, nil
}

// replyMap reads a RESP3 map or a RESP2 flat list of names and values.
func replyMap(v any) (map[string]any, error) {
	out := map[string]any{}
	switch v := v.(type) {
	case map[any]any:
		for k, val := range v {
			out[fmt.Sprint(k)] = val
		}
	case []any:
		if len(v)%2 != 0 {
			return nil, fmt.Errorf("odd-length reply")
		}
		for i := 0; i < len(v); i += 2 {
			out[fmt.Sprint(v[i])] = v[i+1]
		}
	default:
		return nil, fmt.Errorf("unexpected reply %T", v)
	}
	return out, nil
}

func replyString(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func replyInt(v any) *int64 {
	if n, ok := v.(int64); ok {
		return &n
	}
	return nil
}

func (s *Stream) groupErr(ctx context.Context, stream, group, cmd string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if strings.HasPrefix(err.Error(), "NOGROUP") {
		return fmt.Errorf("no group %q on stream %q: %w", group, stream, backend.ErrNotFound)
	}
	return fmt.Errorf("%s: %s %s %s: %w", s, cmd, stream, group, err)
}

func groupNames(groups []groupInfo) string {
	if len(groups) == 0 {
		return "none"
	}
	names := make([]string, len(groups))
	for i, g := range groups {
		names[i] = g.name
	}
	return strings.Join(names, ", ")
}

func dedupSorted(list []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, s := range list {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func seconds(d time.Duration) int64 { return int64(d / time.Second) }
