package redrive

import (
	"errors"
	"fmt"
	"time"
)

// State is where a run stands, rebuilt from its journal. Apply starts from
// an empty State; status and resume replay the journal into one.
type State struct {
	RunID    string
	Plan     *Plan
	Start    Record
	Batches  []BatchReport
	Status   string
	HaltedBy string
	// HaltedAt is when a gate last halted the run (zero when none did):
	// going on past it needs an approval given after it.
	HaltedAt time.Time
	LastNote string
	// EndedAt is when the run last ended (its last run-end record); zero
	// while it runs or after a resume began.
	EndedAt time.Time
	// Approvals are the approvals the run went on under: the run-start's,
	// then any fresh one a resume recorded.
	Approvals []Approval

	step   map[int64]string
	destID map[int64]string
	// entries are the plan's entries by sequence number.
	entries map[int64]Entry
	// cursor is the plan index before which every entry is done or failed:
	// a batch is picked from there, not by a scan of the whole plan.
	cursor int
	// retry holds the failed entries this run tries once more
	// (resume --retry-failed), in plan order.
	retry []int64
	// open is the batch that started and did not end.
	open *Record
}

func newState(runID string, p *Plan) *State {
	st := &State{RunID: runID, Plan: p, step: map[int64]string{}, destID: map[int64]string{},
		entries: make(map[int64]Entry, len(p.Entries))}
	for _, en := range p.Entries {
		st.entries[en.Seq] = en
	}
	return st
}

// Replay rebuilds the state from a journal's records.
func Replay(recs []Record) *State {
	rp := &replayer{}
	for _, r := range recs {
		_ = rp.add(r) // records of a journal read whole start with a run-start
	}
	return rp.st
}

// replayer builds a State one record at a time, so a journal can be
// streamed into it.
type replayer struct{ st *State }

func (rp *replayer) add(r Record) error {
	if rp.st == nil {
		if r.Type != RecRunStart || r.Plan == nil {
			return errors.New("the journal does not start with a run-start record")
		}
		st := newState(r.RunID, r.Plan)
		st.Start = r
		if r.Approval != nil {
			st.Approvals = append(st.Approvals, *r.Approval)
		}
		rp.st = st
		return nil
	}
	st := rp.st
	switch r.Type {
	case RecIntent, RecAmbiguous, RecPublished, RecRemoved, RecGone, RecSkipped, RecFailed, RecArchive:
		st.note(r)
	case RecBatchStart:
		if r.Batch == nil {
			return errors.New("a batch-start record without its batch")
		}
		open := r
		open.Batch = &BatchReport{Index: r.Batch.Index, Size: r.Batch.Size}
		st.open = &open
	case RecBatchEnd:
		st.open = nil
		if r.Batch != nil {
			b := *r.Batch
			b.Events = nil // per-event verdicts stay in the journal
			st.Batches = append(st.Batches, b)
		}
	case RecRunEnd:
		st.Status, st.HaltedBy, st.LastNote, st.EndedAt = r.Status, r.HaltedBy, r.Note, r.At
		if r.Status == StatusHalted {
			st.HaltedAt = r.At
		}
	case RecResume:
		st.Status, st.HaltedBy = "", ""
		if r.Approval != nil {
			st.Approvals = append(st.Approvals, *r.Approval)
		}
	}
	return nil
}

func (st *State) note(r Record) {
	switch r.Type {
	case RecFailed:
		// A failed item is still in the DLQ; resume --retry-failed tries it again.
		st.step[r.Seq] = RecFailed
	case RecArchive:
		if st.step[r.Seq] == RecIntent {
			st.step[r.Seq] = RecArchive
		}
	default:
		st.step[r.Seq] = r.Type
		if r.DestID != "" {
			st.destID[r.Seq] = r.DestID
		}
	}
}

// Step is the last journaled step of the entry with plan index seq.
func (st *State) Step(seq int64) string { return st.step[seq] }

// done says the entry needs no more work.
func (st *State) done(seq int64) bool {
	switch st.step[seq] {
	case RecRemoved, RecGone, RecSkipped:
		return true
	}
	return false
}

// RetryFailed makes this run try every failed entry once more, before the
// entries not tried yet.
func (st *State) RetryFailed() int {
	st.retry = st.retry[:0]
	for _, en := range st.Plan.Entries {
		if st.step[en.Seq] == RecFailed {
			st.retry = append(st.retry, en.Seq)
		}
	}
	return len(st.retry)
}

// nextBatch picks up to size entries to move next: the failed entries this
// run retries, then the untried ones from the cursor on. A failed entry is
// never picked twice in one run.
func (st *State) nextBatch(size int) []int64 {
	var next []int64
	for len(st.retry) > 0 && len(next) < size {
		next = append(next, st.retry[0])
		st.retry = st.retry[1:]
	}
	entries := st.Plan.Entries
	for st.cursor < len(entries) && st.settled(entries[st.cursor].Seq) {
		st.cursor++
	}
	for i := st.cursor; i < len(entries) && len(next) < size; i++ {
		if s := entries[i].Seq; !st.settled(s) {
			next = append(next, s)
		}
	}
	return next
}

// settled: done, or failed (and so not tried again unless retried).
func (st *State) settled(seq int64) bool {
	return st.done(seq) || st.step[seq] == RecFailed
}

// Counts says how many entries reached each final step.
func (st *State) Counts() (moved, gone, skipped, failed int) {
	for _, step := range st.step {
		switch step {
		case RecRemoved:
			moved++
		case RecGone:
			gone++
		case RecSkipped:
			skipped++
		case RecFailed:
			failed++
		}
	}
	return
}

// MovedByBatch lists, per ended batch of a journal, the entries it moved
// and the DLQ watermark the batch started from. Entries come from the plan
// by sequence number, so their event IDs are exact.
func MovedByBatch(recs []Record) ([][]Entry, []string) {
	var m movedByBatch
	for _, r := range recs {
		m.add(r)
	}
	return m.batches, m.marks
}

// MovedByBatchFile is MovedByBatch over a journal file, streamed: it also
// returns the run's plan.
func MovedByBatchFile(path string) (*Plan, [][]Entry, []string, error) {
	var m movedByBatch
	if _, err := ScanJournal(path, nil, func(r Record) error { m.add(r); return nil }); err != nil {
		return nil, nil, nil, err
	}
	if m.plan == nil {
		return nil, nil, nil, fmt.Errorf("journal %s: %w", path, ErrNeverStarted)
	}
	return m.plan, m.batches, m.marks, nil
}

// movedByBatch collects what MovedByBatch returns one record at a time;
// per entry it keeps only whether it was removed.
type movedByBatch struct {
	plan    *Plan
	entries map[int64]Entry
	moved   map[int64]bool
	seqs    []int64
	mark    string
	batches [][]Entry
	marks   []string
}

func (m *movedByBatch) add(r Record) {
	switch r.Type {
	case RecRunStart:
		if m.plan == nil && r.Plan != nil {
			m.plan = r.Plan
			m.entries = make(map[int64]Entry, len(r.Plan.Entries))
			for _, en := range r.Plan.Entries {
				m.entries[en.Seq] = en
			}
			m.moved = map[int64]bool{}
		}
	case RecRemoved:
		if m.moved != nil {
			m.moved[r.Seq] = true
		}
	case RecBatchStart:
		m.seqs, m.mark = r.Seqs, r.batchWatermark()
	case RecBatchEnd:
		var b []Entry
		for _, s := range m.seqs {
			if m.moved[s] {
				b = append(b, m.entries[s])
			}
		}
		m.batches = append(m.batches, b)
		m.marks = append(m.marks, m.mark)
	}
}

// batchWatermark is a batch-start's watermark; journals written before it
// had a field of its own kept it in the note.
func (r Record) batchWatermark() string {
	if r.Watermark != "" {
		return r.Watermark
	}
	return r.Note
}
