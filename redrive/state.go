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
	// WentOn are the journal's records that name approvals, in order: the
	// run-start, then each resume that went on under approvals of its own.
	WentOn []WentOn
	// CameBack is the event IDs that reconciliation found dead-lettered
	// again, in the order their batches ended: they are in the DLQ once
	// more. Kept apart from the batches' per-event verdicts, which the
	// state drops, as they are what the person running the redrive must
	// act on.
	CameBack []string

	// step and destID are each entry's last journaled step and its
	// destination's message ID, by plan index: compact and without
	// pointers, not maps of strings, since a run of a million entries holds
	// one of each per entry and the collector would mark every string.
	step   []stepCode
	destID destIDs
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
	return &State{RunID: runID, Plan: p, step: make([]stepCode, p.Entries.Len())}
}

// stepCode is a step record's type as a small number (see stepNames).
type stepCode uint8

// stepNames are the step record types by code; 0 is "no step yet".
var stepNames = [...]string{"", RecIntent, RecArchive, RecPublished, RecAmbiguous, RecRemoved, RecGone, RecSkipped, RecFailed}

func codeOf(typ string) stepCode {
	for i, n := range stepNames {
		if n == typ {
			return stepCode(i)
		}
	}
	return 0
}

// entry is the plan entry with sequence number seq.
func (st *State) entry(seq int64) Entry {
	en, _ := st.Plan.Entries.BySeq(seq)
	return en
}

// entriesOf is the plan entries with sequence numbers seqs: a chunk's
// worth at a time, since a batch of a million held as entries would cost
// more than the plan.
func (st *State) entriesOf(seqs []int64) []Entry {
	out := make([]Entry, len(seqs))
	for i, s := range seqs {
		out[i] = st.entry(s)
	}
	return out
}

// DestID is the destination's message ID of the entry seq, when one was journaled.
func (st *State) DestID(seq int64) string {
	if i, ok := st.Plan.Entries.Index(seq); ok {
		return st.destID.get(i)
	}
	return ""
}

// destIDs are destination message IDs by plan index, their text in one
// buffer: at[i] is the ID's offset in text shifted left 16, or-ed with its
// length plus one (0: none); an ID of 64 KiB or more goes to long.
type destIDs struct {
	text []byte
	at   []uint64
	long map[int]string
}

func (d *destIDs) set(i, n int, id string) {
	if d.at == nil {
		d.at = make([]uint64, n)
	}
	if len(id) >= 0xFFFF {
		if d.long == nil {
			d.long = map[int]string{}
		}
		d.long[i] = id
		d.at[i] = 0
		return
	}
	delete(d.long, i)
	d.at[i] = uint64(len(d.text))<<16 | uint64(len(id)+1)
	d.text = append(d.text, id...)
}

func (d *destIDs) get(i int) string {
	if id, ok := d.long[i]; ok {
		return id
	}
	if d.at == nil || d.at[i] == 0 {
		return ""
	}
	off, n := d.at[i]>>16, d.at[i]&0xFFFF-1
	return string(d.text[off : off+n])
}

// Replay rebuilds the state from a journal's records. p is the run's plan
// (the file its run-start names); nil for a journal whose run-start
// embeds it, as journals of earlier versions do.
func Replay(p *Plan, recs []Record) *State {
	rp := &replayer{plan: p}
	for _, r := range recs {
		_ = rp.add(r) // records of a journal read whole start with a run-start
	}
	return rp.st
}

// replayer builds a State one record at a time, so a journal can be
// streamed into it. plan is the run's plan when the run-start names it by
// digest; nil when it embeds it.
type replayer struct {
	plan *Plan
	st   *State
}

func (rp *replayer) add(r Record) error {
	if rp.st == nil {
		if r.Type != RecRunStart || (r.Plan == nil && r.PlanDigest == "") {
			return errors.New("the journal does not start with a run-start record")
		}
		p, err := startPlan(r, rp.plan)
		if err != nil {
			return err
		}
		st := newState(r.RunID, p)
		st.Start = r
		st.noteApprovals(r, time.Time{})
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
			st.noteCameBack(b.Events)
			b.Events = nil // per-event verdicts stay in the journal
			st.Batches = append(st.Batches, b)
		}
	case RecRunEnd:
		st.Status, st.HaltedBy, st.LastNote, st.EndedAt = r.Status, r.HaltedBy, r.Note, r.At
		if r.Status == StatusHalted {
			st.HaltedAt = r.At
		}
	case RecResume:
		halt := time.Time{}
		if st.Status == StatusHalted {
			halt = st.HaltedAt
		}
		st.Status, st.HaltedBy = "", ""
		st.noteApprovals(r, halt)
	}
	return nil
}

func (st *State) note(r Record) {
	i, ok := st.Plan.Entries.Index(r.Seq)
	if !ok {
		return // not an entry of this plan: nothing a run writes
	}
	switch r.Type {
	case RecFailed:
		// A failed item is still in the DLQ; resume --retry-failed tries it again.
		st.step[i] = codeOf(RecFailed)
	case RecArchive:
		if st.step[i] == codeOf(RecIntent) {
			st.step[i] = codeOf(RecArchive)
		}
	default:
		st.step[i] = codeOf(r.Type)
		if r.DestID != "" {
			st.destID.set(i, len(st.step), r.DestID)
		}
	}
}

// Step is the last journaled step of the entry with plan index seq.
func (st *State) Step(seq int64) string {
	if i, ok := st.Plan.Entries.Index(seq); ok {
		return stepNames[st.step[i]]
	}
	return ""
}

// done says the entry needs no more work.
func (st *State) done(seq int64) bool {
	switch st.Step(seq) {
	case RecRemoved, RecGone, RecSkipped:
		return true
	}
	return false
}

// RetryFailed makes this run try every failed entry once more, before the
// entries not tried yet.
func (st *State) RetryFailed() int {
	st.retry = st.retry[:0]
	for i, c := range st.step {
		if c == codeOf(RecFailed) {
			st.retry = append(st.retry, st.Plan.Entries.At(i).Seq)
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
	entries := &st.Plan.Entries
	for st.cursor < len(st.step) && st.settledAt(st.cursor) {
		st.cursor++
	}
	for i := st.cursor; i < len(st.step) && len(next) < size; i++ {
		if !st.settledAt(i) {
			next = append(next, entries.At(i).Seq)
		}
	}
	return next
}

// workLeft says whether this run has entries left to move after the
// batches so far: ones to retry, or untried ones. It reads from the cursor,
// which only entries already settled precede, so it costs about a batch.
func (st *State) workLeft() bool {
	if len(st.retry) > 0 {
		return true
	}
	for i := st.cursor; i < len(st.step); i++ {
		if !st.settledAt(i) {
			return true
		}
	}
	return false
}

// settled: done, or failed (and so not tried again unless retried).
func (st *State) settledAt(i int) bool {
	switch stepNames[st.step[i]] {
	case RecRemoved, RecGone, RecSkipped, RecFailed:
		return true
	}
	return false
}

// Counts says how many entries reached each final step.
func (st *State) Counts() (moved, gone, skipped, failed int) {
	for _, c := range st.step {
		switch stepNames[c] {
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

// MovedByBatchFile lists, per ended batch of a journal file (streamed),
// the entries it moved (by plan index) and the DLQ watermark the batch
// started from; entries come from the plan by sequence number, so their
// event IDs are exact. It also returns the run's plan, and each batch's
// report as the run recorded it (its DLQ sizes before and after, which
// only the run could see). p is the run's plan (nil when the run-start
// embeds it).
func MovedByBatchFile(path string, p *Plan) (*Plan, []Moved, []string, []BatchReport, error) {
	m := movedByBatch{given: p}
	if _, err := ScanJournal(path, nil, m.add); err != nil {
		return nil, nil, nil, nil, err
	}
	if m.plan == nil {
		return nil, nil, nil, nil, fmt.Errorf("journal %s: %w", path, ErrNeverStarted)
	}
	return m.plan, m.batches, m.marks, m.reports, nil
}

// movedByBatch collects what MovedByBatchFile returns one record at a time;
// per entry it keeps only whether it was removed.
type movedByBatch struct {
	given   *Plan
	plan    *Plan
	moved   []bool // by plan index
	seqs    []int64
	mark    string
	batches []Moved
	marks   []string
	reports []BatchReport
}

func (m *movedByBatch) add(r Record) error {
	switch r.Type {
	case RecRunStart:
		if m.plan == nil {
			p, err := startPlan(r, m.given)
			if err != nil {
				return err
			}
			m.plan = p
			m.moved = make([]bool, p.Entries.Len())
		}
	case RecRemoved:
		if m.plan != nil {
			if i, ok := m.plan.Entries.Index(r.Seq); ok {
				m.moved[i] = true
			}
		}
	case RecBatchStart:
		m.seqs, m.mark = r.Seqs, r.batchWatermark()
	case RecBatchEnd:
		var b PlanSubset
		if m.plan != nil {
			b.Entries = &m.plan.Entries
			for _, s := range m.seqs {
				if i, ok := m.plan.Entries.Index(s); ok && m.moved[i] {
					b.Index = append(b.Index, i)
				}
			}
		}
		m.batches = append(m.batches, b)
		m.marks = append(m.marks, m.mark)
		var rep BatchReport
		if r.Batch != nil {
			rep = *r.Batch
			rep.Events = nil
		}
		m.reports = append(m.reports, rep)
	}
	return nil
}

// batchWatermark is a batch-start's watermark; journals written before it
// had a field of its own kept it in the note.
func (r Record) batchWatermark() string {
	if r.Watermark != "" {
		return r.Watermark
	}
	return r.Note
}

// noteCameBack keeps the events of a batch that were dead-lettered again.
func (st *State) noteCameBack(evs []EventVerdict) {
	for _, ev := range evs {
		if ev.Verdict == VerdictReDeadLettered {
			st.CameBack = append(st.CameBack, ev.EventID)
		}
	}
}

// WentOn is a journal record that names the approvals a run went on
// under: the run-start, or a resume (after a halt, or once the approvals
// the run had expired).
type WentOn struct {
	// Record is the record's type (RecRunStart or RecResume); At when it
	// was written, and By who ran the run then.
	Record string
	At     time.Time
	By     string
	// HaltedAt is when the gate that halted the run before this resume
	// did (zero when none had): the approvals had to be given after it.
	HaltedAt  time.Time
	Approvals []Approval
}

// noteApprovals keeps the approvals a run-start or resume record names;
// haltedAt is when a gate halted the run just before it (zero if none).
func (st *State) noteApprovals(r Record, haltedAt time.Time) {
	as := r.RecordedApprovals()
	if len(as) == 0 {
		return
	}
	st.Approvals = append(st.Approvals, as...)
	st.WentOn = append(st.WentOn, WentOn{Record: r.Type, At: r.At, By: r.AppliedBy, HaltedAt: haltedAt, Approvals: as})
}
