package ui

import (
	"context"
	"errors"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
)

// catRow is one line of the categories screen.
type catRow struct {
	Name         string
	Disposition  string
	Count        int
	OldestAge    time.Duration
	ExampleError string
}

// scanMsg is the categories scan reporting in: a snapshot of the counts so
// far, sent a few times a second while the scan runs and once at its end.
type scanMsg struct {
	gen   int
	pass  int // 1: first read; 2: recount after conflicts were found
	seen  int
	total int64 // the DLQ's length when the scan began (-1: unknown)
	rows  []catRow
	// conflicts is set once the first pass is over: from then on entries
	// can be classified exactly (the entries screen waits for it).
	conflicts *envelope.ConflictTracker
	done      bool
	err       error
}

// snapshotEvery is how often a running scan reports: often enough for the
// counts to climb visibly, rarely enough to cost nothing next to the scan.
const snapshotEvery = 100 * time.Millisecond

// tally counts the selected entries by category as a scan goes.
type tally struct {
	order []string // known categories in rule order
	rows  map[string]*catRow
}

func newTally(cl *envelope.Classifier) *tally {
	t := &tally{rows: map[string]*catRow{}}
	for _, c := range cl.Categories() {
		t.order = append(t.order, c.Category)
	}
	return t
}

func (t *tally) add(e envelope.Envelope, c envelope.Classification, now time.Time) {
	r := t.rows[c.Category]
	if r == nil {
		r = &catRow{Name: c.Category, Disposition: c.Disposition}
		t.rows[c.Category] = r
	}
	r.Count++
	if age := inspect.Age(e, now); age > r.OldestAge {
		r.OldestAge = age
	}
	if r.ExampleError == "" {
		r.ExampleError = errorText(e)
	}
}

// snapshot copies the rows in the order categorize uses (see
// inspect.OrderCategories).
func (t *tally) snapshot() []catRow {
	names := make([]string, 0, len(t.rows))
	for name := range t.rows {
		names = append(names, name)
	}
	inspect.OrderCategories(names, func(n string) int { return t.rows[n].Count }, t.order)
	out := make([]catRow, 0, len(names))
	for _, name := range names {
		out = append(out, *t.rows[name])
	}
	return out
}

func errorText(e envelope.Envelope) string {
	if e.Malformed != "" {
		return e.Malformed
	}
	return e.LastError
}

// runScan reads the whole DLQ once (twice when it holds conflicts, as
// categorize does) and reports to out. It keeps counts and the conflict
// tracker, never entries. It ends when ctx is cancelled.
func runScan(ctx context.Context, w inspect.Walker, sel inspect.Selector, gen int, out chan<- scanMsg) {
	total := int64(-1)
	if n, err := w.Source.Len(ctx); err == nil {
		total = n
	}
	tracker := envelope.NewConflictTracker()
	send := func(m scanMsg, final bool) {
		m.gen, m.total = gen, total
		if final {
			select {
			case out <- m:
			case <-ctx.Done():
			}
			return
		}
		// A snapshot the screen has not taken yet is simply replaced by a
		// later one: the scan never waits for the screen.
		select {
		case out <- m:
		default:
		}
	}
	pass := func(n int, conflicts *envelope.ConflictTracker) (*tally, int, error) {
		t := newTally(w.Classifier)
		memo := w.Classifier.Memo()
		seen := 0
		last := time.Now()
		err := w.Source.Scan(ctx, "", func(e envelope.Envelope) error {
			if conflicts == nil {
				tracker.Add(e)
			}
			c := memo.Classify(e, conflicts != nil && conflicts.IsConflict(e.EventID))
			if sel.Match(e, c, w.Now) {
				t.add(e, c, w.Now)
			}
			seen++
			if seen%256 == 0 && time.Since(last) >= snapshotEvery {
				last = time.Now()
				m := scanMsg{pass: n, seen: seen, conflicts: conflicts}
				if n == 1 {
					// A recount's partial counts would make the screen's
					// numbers drop and climb again; it shows the first
					// pass's until the recount is done.
					m.rows = t.snapshot()
				}
				send(m, false)
			}
			return nil
		})
		if errors.Is(err, backend.ErrStop) {
			err = nil
		}
		return t, seen, err
	}
	t, seen, err := pass(1, nil)
	if err != nil {
		send(scanMsg{pass: 1, seen: seen, rows: t.snapshot(), done: true, err: err}, true)
		return
	}
	// ConflictCount settles the tracker; after it the tracker is only read,
	// so the entries screen may use it while a second pass runs.
	if tracker.ConflictCount() == 0 {
		send(scanMsg{pass: 1, seen: seen, rows: t.snapshot(), conflicts: tracker, done: true}, true)
		return
	}
	send(scanMsg{pass: 2, seen: 0, rows: t.snapshot(), conflicts: tracker}, true)
	t, seen, err = pass(2, tracker)
	send(scanMsg{pass: 2, seen: seen, rows: t.snapshot(), conflicts: tracker, done: true, err: err}, true)
}
