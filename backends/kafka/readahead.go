package kafkadlq

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A fetch from Kafka returns whole record batches, up to a megabyte of
// them per partition, whatever range was asked for: reading the 64
// records of one partition that a redrive chunk needs decompresses and
// decodes a thousand or more. So the point reads (a chunk's records, Get,
// a cursor) keep, per partition, everything the last read of it returned
// — a window of offsets whose data records are all known — and a later
// read inside the window needs no broker. A redrive takes its entries in
// dead-letter order, so its chunks walk each partition forward and most
// are served from the window of the one before.
//
// A record at an offset never changes; what can change is whether it is
// still there (retention) or still in the DLQ (the state topic), and
// fetchMany checks both as before: against the log start it asks the
// broker for on every call, and against the state read by its caller.

// window is what one read of a partition returned: every data record with
// an offset in [from, to), in offset order.
type window struct {
	from, to int64
	recs     []*kgo.Record
}

// serve puts the window's records at offs into out, by locator.
func (w *window) serve(p int32, offs []int64, out map[string]*kgo.Record) {
	for _, o := range offs {
		i := sort.Search(len(w.recs), func(i int) bool { return w.recs[i].Offset >= o })
		if i < len(w.recs) && w.recs[i].Offset == o {
			out[KafkaID(p, o)] = w.recs[i]
		}
	}
}

// cachedWindow is partition p's window when it covers [lo, hi).
func (t *Topic) cachedWindow(p int32, lo, hi int64) *window {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w := t.windows[p]; w != nil && w.from <= lo && hi <= w.to {
		return w
	}
	return nil
}

// readWindows reads, for each partition p, from r[0] until it has seen
// offset r[1]-1, keeping every record the fetches returned before r[2]
// (the last stable offset), and stores the windows read (of a read that
// went idle, only the offsets its fetches covered).
func (t *Topic) readWindows(ctx context.Context, ranges map[int32][3]int64) (map[int32]*window, error) {
	from := make(map[int32]int64, len(ranges))
	windows := make(map[int32]*window, len(ranges))
	for p, r := range ranges {
		from[p] = r[0]
		windows[p] = &window{from: r[0], to: r[0]}
	}
	cl, err := t.reader(t.src.topic, from)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	// done: the poll after which a partition had what was asked for; the
	// rest of that poll's records are kept, later polls' are not.
	done := map[int32]int{}
	// seen: for a partition that an idle poll ended, what came before it.
	seen := map[int32]*window{}
	for poll := 1; len(done) < len(ranges); poll++ {
		fs, idle, err := t.pollDLQ(ctx, cl)
		if err != nil {
			return nil, err
		}
		if idle {
			// Nothing came although the range said there was more: for
			// this read, what is left of it was removed (compaction,
			// retention). Only what the fetches returned is kept for later
			// reads: an idle read may be a broker that was restarting, and
			// a window it extended would serve "removed" to every read
			// after it (recheckMissing looks again for this one).
			for p, r := range ranges {
				if _, ok := done[p]; !ok {
					w := windows[p]
					seen[p] = &window{from: w.from, to: w.to, recs: w.recs}
					w.to = max(w.to, r[1])
					done[p] = poll
				}
			}
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			rg, ok := ranges[r.Partition]
			if !ok || r.Offset < rg[0] || r.Offset >= rg[2] {
				return
			}
			if at, ok := done[r.Partition]; ok && at != poll {
				return
			}
			w := windows[r.Partition]
			if r.Offset < w.to {
				return // seen already
			}
			if !r.Attrs.IsControl() {
				w.recs = append(w.recs, r)
			}
			w.to = r.Offset + 1
			if _, ok := done[r.Partition]; !ok && r.Offset >= rg[1]-1 {
				done[r.Partition] = poll
			}
		})
	}
	t.mu.Lock()
	if t.windows == nil {
		t.windows = map[int32]*window{}
	}
	for p, w := range windows {
		if s, ok := seen[p]; ok {
			w = s
		}
		t.windows[p] = w
	}
	t.mu.Unlock()
	return windows, nil
}

// pollDLQ is one poll of a reader of the DLQ topic; idle is a poll that
// gave nothing within the idle timeout.
func (t *Topic) pollDLQ(ctx context.Context, cl *kgo.Client) (fs kgo.Fetches, idle bool, err error) {
	pctx, cancel := context.WithTimeout(ctx, stateIdleTimeout+t.timeout)
	defer cancel()
	fs = cl.PollFetches(pctx)
	idle = pctx.Err() != nil && fs.NumRecords() == 0
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if err := fetchErr(fs); err != nil {
		return nil, false, t.connErr(ctx, "read "+t.src.topic, err)
	}
	return fs, idle, nil
}
