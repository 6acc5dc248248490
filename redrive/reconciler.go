package redrive

import (
	"context"
	"fmt"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/envelope"
)

// reconcile waits up to the plan's settle time for every moved event of the
// batch to settle and gives each its verdict.
func (e *Engine) reconcile(ctx context.Context, st *State, seqs []int64, watermark string, rep *BatchReport) error {
	// The moved entries by plan index: a batch can hold a million, and a
	// copy of each Entry would cost more than the plan itself.
	moved := PlanSubset{Entries: &st.Plan.Entries}
	for _, s := range seqs {
		if st.Step(s) == RecRemoved {
			if i, ok := st.Plan.Entries.Index(s); ok {
				moved.Index = append(moved.Index, i)
			}
		}
	}
	if e.named == nil || e.named.plan != st.Plan {
		e.named = &namedIDs{plan: st.Plan, seen: map[string]bool{}}
	}
	c := Reconciler{Source: e.Source, Probe: e.Probe, Now: e.Now, Sleep: e.Sleep, PollEvery: e.PollEvery, Named: e.named.named}
	settle := time.Duration(st.Plan.Params.Settle)
	if e.Probe == nil && !st.workLeft() {
		// Without effects no event ever settles, so the wait only watches
		// for re-dead-letters to gate the next batch; after the last one
		// it would wait the whole settle time for nothing.
		settle = 0
	}
	if err := c.Batch(ctx, moved, watermark, settle, rep); err != nil {
		return err
	}
	rep.ApplyGates(st.Plan.Params.MaxFailedRatio)
	return nil
}

// Moved is the moved entries of a batch, as Reconciler.Batch reads them:
// each one's event ID and fingerprint, by position.
type Moved interface {
	Len() int
	EventID(i int) string
	Fingerprint(i int) string
}

// EntryList is a Moved held as a slice of entries.
type EntryList []Entry

func (l EntryList) Len() int                 { return len(l) }
func (l EntryList) EventID(i int) string     { return l[i].EventID }
func (l EntryList) Fingerprint(i int) string { return l[i].Fingerprint }

// PlanSubset is a Moved of some of a plan's entries, by plan index.
type PlanSubset struct {
	Entries *Entries
	Index   []int
}

func (s PlanSubset) Len() int                 { return len(s.Index) }
func (s PlanSubset) EventID(i int) string     { return s.Entries.EventID(s.Index[i]) }
func (s PlanSubset) Fingerprint(i int) string { return s.Entries.Fingerprint(s.Index[i]) }

// Reconciler gives the events of a batch their verdicts: one probe round
// trip and one read of the DLQ's new entries per poll.
type Reconciler struct {
	Source    backend.Source // nil: re-dead-letters are not looked for
	Probe     effects.Probe  // nil: unverified
	Now       func() time.Time
	Sleep     func(ctx context.Context, d time.Duration) error
	PollEvery time.Duration
	// Named, when set, says which of these DLQ entry IDs the plan names
	// (taken or left out). Each of those was in the DLQ when the plan
	// was made, so it is not back, whatever its event: a copy of the
	// event still waiting for its own batch, one a move gave back, or
	// one a broker crash brought back. A re-dead-letter is a new entry.
	Named func(ids []string) map[string]bool
}

// Batch polls until every event settled or settle ran out, and fills rep.
func (c Reconciler) Batch(ctx context.Context, moved Moved, watermark string, settle time.Duration, rep *BatchReport) error {
	rep.Moved = moved.Len()
	// ids are the unique event IDs in batch order; first is, for each,
	// the moved entry it came from first (whose fingerprint counts), and
	// index finds an ID's place: one map for every lookup of the batch.
	ids := make([]string, 0, moved.Len())
	first := make([]int, 0, moved.Len())
	index := make(map[string]int, moved.Len())
	for i := range moved.Len() {
		id := moved.EventID(i)
		if _, ok := index[id]; !ok {
			index[id] = len(ids)
			ids = append(ids, id)
			first = append(first, i)
		}
	}
	deadline := c.Now().Add(settle)
	poll := c.PollEvery
	if poll == 0 {
		poll = 250 * time.Millisecond
	}
	for {
		back, err := backInDLQ(ctx, c.Source, watermark, index, c.Named)
		if err != nil {
			return err
		}
		var recs map[string]effects.Record
		if c.Probe != nil && len(ids) > 0 {
			if recs, err = c.Probe.Records(ctx, ids); err != nil {
				return fmt.Errorf("effects %s: %w", c.Probe, err)
			}
		}
		rep.Events = rep.Events[:0]
		settled := true
		for k, id := range ids {
			ev := EventVerdict{EventID: id}
			if c.Probe == nil {
				ev.Verdict = VerdictUnverified
				if back[id] {
					ev.Verdict = VerdictReDeadLettered
				}
			} else {
				rec, found := recs[id]
				ev.Attempts, ev.Effects = rec.Attempts, rec.Effects
				ev.Verdict = Judge(moved.Fingerprint(first[k]), rec, found, back[id])
			}
			if ev.Verdict == VerdictPending || ev.Verdict == VerdictUnverified {
				settled = false
			}
			rep.Events = append(rep.Events, ev)
		}
		if settled || !c.Now().Before(deadline) {
			break
		}
		if err := c.sleep(ctx, min(poll, deadline.Sub(c.Now()))); err != nil {
			return stopped(ctx, err)
		}
	}
	rep.tally()
	return nil
}

func (c Reconciler) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// backInDLQ reads the DLQ entries that arrived after the batch started and
// says which of the event IDs in want are among them. Without a Tailer (no
// arrival order to go by) it reads the whole DLQ. An entry whose ID named
// reports (the plan's own) does not count: it was there before the move.
func backInDLQ(ctx context.Context, src backend.Source, watermark string, want map[string]int, named func([]string) map[string]bool) (map[string]bool, error) {
	back := map[string]bool{}
	if src == nil || len(want) == 0 {
		return back, nil
	}
	if _, ok := src.(backend.Tailer); !ok {
		watermark = ""
	}
	// The entries of the batch's events, by event: few (an event's
	// identical copies, or its re-dead-letters), so the plan is asked
	// about them once the scan is over.
	found := map[string][]string{}
	var ids []string
	err := src.Scan(ctx, watermark, func(env envelope.Envelope) error {
		if _, ok := want[env.EventID]; ok {
			found[env.EventID] = append(found[env.EventID], env.ID)
			ids = append(ids, env.ID)
		}
		return nil
	})
	if err != nil || len(ids) == 0 {
		return back, err
	}
	var planned map[string]bool
	if named != nil {
		planned = named(ids)
	}
	for ev, list := range found {
		for _, id := range list {
			if !planned[id] {
				back[ev] = true
				break
			}
		}
	}
	return back, nil
}

// namedIDs answers which DLQ entry IDs a plan names, among its entries
// and its exclusions, and remembers each answer. It is asked only about
// the entries of a batch's events found in the DLQ, which are few: a
// walk of the plan for those costs less than a map of every ID of a
// million-entry plan.
type namedIDs struct {
	plan *Plan
	seen map[string]bool
}

func (n *namedIDs) named(ids []string) map[string]bool {
	out := make(map[string]bool, len(ids))
	ask := map[string]bool{}
	for _, id := range ids {
		if v, ok := n.seen[id]; ok {
			out[id] = v
		} else {
			ask[id] = false
		}
	}
	if len(ask) == 0 {
		return out
	}
	es := &n.plan.Entries
	for i := range es.Len() {
		if _, ok := ask[es.ID(i)]; ok {
			ask[es.ID(i)] = true
		}
	}
	for _, x := range n.plan.Excluded {
		if _, ok := ask[x.ID]; ok {
			ask[x.ID] = true
		}
	}
	for id, v := range ask {
		n.seen[id], out[id] = v, v
	}
	return out
}
