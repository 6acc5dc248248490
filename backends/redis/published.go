package redisstream

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

var _ backend.PublishedChecker = (*Stream)(nil)

// clockSlack covers the difference between this host's clock, which gave
// a query's Since, and the server's, which gave the stream IDs.
const clockSlack = 5 * time.Minute

// CheckPublished looks for each entry on its destination stream by this
// run's markers: by the stream ID the journal recorded when there is one,
// else among the entries added since the batch began (one read per
// destination). A stream trimmed past the time looked for, or deleted,
// cannot tell: the answer is then PresenceUnknown.
func (s *Stream) CheckPublished(ctx context.Context, queries []backend.PublishedQuery, m backend.Markers) ([]backend.Presence, error) {
	out := make([]backend.Presence, len(queries))
	byDest := map[string][]int{} // queries without a recorded ID
	for i, q := range queries {
		if q.Item.Dest == "" {
			continue
		}
		if q.DestID == "" {
			byDest[q.Item.Dest] = append(byDest[q.Item.Dest], i)
			continue
		}
		p, err := s.presenceByID(ctx, q, m)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	for dest, idx := range byDest {
		if err := s.presenceSince(ctx, dest, queries, idx, m, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func hasMarkers(values map[string]any, seq int64, m backend.Markers) bool {
	return values[backend.MarkerRunID] == m.RunID && values[backend.MarkerSeq] == strconv.FormatInt(seq, 10)
}

// keptSince says whether stream key still holds every entry ever added
// with an ID from `from` on. Redis 7 counts what was ever added: when that
// is the length, nothing was ever deleted or trimmed. Otherwise XDEL shows
// in max-deleted-entry-id, and trimming (MAXLEN, XTRIM), which takes the
// oldest entries first, left everything from `from` on when the oldest
// entry left is no newer than it. Before Redis 7 only the last rule
// applies. A stream that does not exist lost nothing a move put there.
func (s *Stream) keptSince(ctx context.Context, key, from string) (bool, error) {
	info, err := s.rdb.XInfoStream(ctx, key).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return true, nil
		}
		return false, s.cmdErr(ctx, "xinfo stream "+key, err)
	}
	if info.MaxDeletedEntryID != "" {
		if info.EntriesAdded == info.Length {
			return true, nil
		}
		if !streamIDLess(info.MaxDeletedEntryID, from) {
			return false, nil
		}
	}
	return info.Length > 0 && !streamIDLess(from, info.FirstEntry.ID), nil
}

func (s *Stream) presenceByID(ctx context.Context, q backend.PublishedQuery, m backend.Markers) (backend.Presence, error) {
	msgs, err := s.rdb.XRange(ctx, q.Item.Dest, q.DestID, q.DestID).Result()
	if err != nil {
		return backend.PresenceUnknown, s.cmdErr(ctx, "xrange "+q.Item.Dest, err)
	}
	if len(msgs) == 1 {
		if hasMarkers(msgs[0].Values, q.Item.Seq, m) {
			return backend.PresenceFound, nil
		}
		return backend.PresenceAbsent, nil
	}
	kept, err := s.keptSince(ctx, q.Item.Dest, q.DestID)
	if err != nil || !kept {
		return backend.PresenceUnknown, err // trimmed or deleted: cannot tell
	}
	return backend.PresenceAbsent, nil
}

// presenceSince reads dest from a little before the earliest Since of the
// queries idx and marks each one found or absent.
func (s *Stream) presenceSince(ctx context.Context, dest string, queries []backend.PublishedQuery, idx []int, m backend.Markers, out []backend.Presence) error {
	since := queries[idx[0]].Since
	want := map[string]int{} // seq → query index
	for _, i := range idx {
		if queries[i].Since.Before(since) {
			since = queries[i].Since
		}
		want[strconv.FormatInt(queries[i].Item.Seq, 10)] = i
	}
	start := strconv.FormatInt(since.Add(-clockSlack).UnixMilli(), 10)
	kept, err := s.keptSince(ctx, dest, start+"-0")
	if err != nil || !kept {
		return err // trimmed since: cannot tell
	}
	for _, i := range idx {
		out[i] = backend.PresenceAbsent
	}
	const page = 1000
	from := start
	for {
		msgs, err := s.rdb.XRangeN(ctx, dest, from, "+", page).Result()
		if err != nil {
			return s.cmdErr(ctx, "xrange "+dest, err)
		}
		for _, msg := range msgs {
			if msg.Values[backend.MarkerRunID] != m.RunID {
				continue
			}
			if seq, ok := msg.Values[backend.MarkerSeq].(string); ok {
				if i, ok := want[seq]; ok {
					out[i] = backend.PresenceFound
				}
			}
		}
		if len(msgs) < page {
			return nil
		}
		from = "(" + msgs[len(msgs)-1].ID
	}
}

// streamIDLess compares two stream IDs "ms-seq" as numbers.
func streamIDLess(a, b string) bool {
	am, as := splitStreamID(a)
	bm, bs := splitStreamID(b)
	if am != bm {
		return am < bm
	}
	return as < bs
}

func splitStreamID(id string) (uint64, uint64) {
	ms, seq, _ := strings.Cut(id, "-")
	m, _ := strconv.ParseUint(ms, 10, 64)
	n, _ := strconv.ParseUint(seq, 10, 64)
	return m, n
}
