package redrive

import (
	"context"
	"errors"
	"time"

	"golang.org/x/time/rate"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/effects"
)

// Run statuses (dlqctl.run/v1 status).
const (
	StatusCompleted   = "completed"
	StatusHalted      = "halted"
	StatusInterrupted = "interrupted"
	StatusFailed      = "failed"
)

// ErrInterrupted: the run stopped on Ctrl-C after the step in flight; the
// journal is consistent and the run resumable.
var ErrInterrupted = errors.New("interrupted")

// ErrDeadline: the command's time limit (--timeout) came before the run's
// end; it stopped between chunks, resumable like an interrupt.
var ErrDeadline = errors.New("the time limit was reached")

// Observer hears how a run goes: progress for a bar, reports for people.
type Observer interface {
	Progress(done, total int)
	BatchDone(BatchReport)
}

// Engine runs a plan against a DLQ. Build one per run.
type Engine struct {
	Source  backend.Source
	Mover   backend.Mover
	Probe   effects.Probe // nil: no --effects, batches are unverified
	Journal *Journal
	Limiter *rate.Limiter // nil: unlimited (--rate 0)
	Now     func() time.Time
	// Sleep waits between reconciliation polls; tests make it instant.
	Sleep    func(ctx context.Context, d time.Duration) error
	Observer Observer
	// Crash is a test-only crash point called after each journal write
	// with the record type; nil in production.
	Crash func(step string)
	// PollEvery is the reconciliation poll interval (default 250ms).
	PollEvery time.Duration
	// MoveTimeout bounds one chunk's publish or remove, which runs to its
	// end even after Ctrl-C (default 30s).
	MoveTimeout time.Duration
	// Chunk, when set, is how many moves share one journal sync; see chunkSize.
	Chunk int

	// guards checks each destination before its entries are sent.
	guards *backend.Guards
	// pending are records held for the engine's next journal write (see
	// hold); dlqLen is the DLQ's length read at the end of the last batch,
	// when lenKnown, which is the next batch's length before it.
	pending  []Record
	dlqLen   int64
	lenKnown bool
	// tail is the DLQ's tail read with dlqLen (a backend.LenTailer), when
	// tailKnown: the next batch's watermark.
	tail      string
	tailKnown bool
}

// NewRunID names a run: time plus randomness, sortable.
func NewRunID(now time.Time, random string) string {
	return now.UTC().Format("20060102T150405Z") + "-" + random
}

// Start begins a new run of p: it writes the run-start record, with the
// plan's digest and path and the approvals, into the journal, and returns
// the run's state.
func (e *Engine) Start(runID string, p *Plan, planPath, source, appliedBy string, approvals []Approval) (*State, error) {
	st := newState(runID, p)
	// The plan is named by its digest, not embedded: readers of the journal
	// read the plan file and check it against this digest (runplan.go).
	st.Start = Record{Type: RecRunStart, RunID: runID, At: e.Journal.now().UTC(), PlanDigest: p.Digest, PlanPath: planPath, Source: source, AppliedBy: appliedBy}
	st.Start.setApprovals(approvals)
	if err := e.Journal.Append(st.Start); err != nil {
		return nil, err
	}
	st.noteApprovals(st.Start, time.Time{})
	return st, nil
}

// setApprovals records one approval as `approval` (as journals always
// have), several as `approvals`.
func (r *Record) setApprovals(as []Approval) {
	switch len(as) {
	case 0:
	case 1:
		r.Approval = &as[0]
	default:
		r.Approvals = as
	}
}

// RecordedApprovals are the approvals a run-start or resume record names.
func (r Record) RecordedApprovals() []Approval {
	if r.Approval != nil {
		return append([]Approval{*r.Approval}, r.Approvals...)
	}
	return r.Approvals
}

// Resume marks the journal as resumed by `by`, under the approvals fresh
// when they are not the ones the run started with (nil: those).
func (e *Engine) Resume(st *State, by string, fresh []Approval) error {
	r := Record{Type: RecResume, At: e.Journal.now().UTC(), RunID: st.RunID, AppliedBy: by}
	r.setApprovals(fresh)
	if err := e.Journal.Append(r); err != nil {
		return err
	}
	halt := time.Time{}
	if st.Status == StatusHalted {
		halt = st.HaltedAt
	}
	st.noteApprovals(r, halt)
	return nil
}

func (e *Engine) markers(st *State) backend.Markers {
	return backend.Markers{RunID: st.RunID, ProducerName: "dlqctl-" + st.RunID}
}

func (e *Engine) crash(step string) {
	if e.Crash != nil {
		e.Crash(step)
	}
}

// Run moves the plan's remaining entries batch by batch until every entry
// is done, a gate fails, Ctrl-C, or the backend fails. It journals the end
// of the run and returns its status; err is ErrInterrupted, a backend error,
// or nil (also when a gate halted the run: see st.Status).
func (e *Engine) Run(ctx context.Context, st *State) error {
	status, halted, note, err := e.run(ctx, st)
	st.Status, st.HaltedBy = status, halted
	end := Record{Type: RecRunEnd, RunID: st.RunID, Status: status, HaltedBy: halted, Note: note}
	end.Moved, _, _, _ = st.Counts()
	// Records still held (a batch's end, its last results) go in the same
	// write: commit puts them first.
	if jerr := e.commit(st, "", end); jerr != nil && err == nil {
		err = jerr
	}
	return err
}

func (e *Engine) run(ctx context.Context, st *State) (status, halted, note string, err error) {
	if st.open != nil {
		seqs := append([]int64(nil), st.open.Seqs...)
		rep, err := e.batch(ctx, st, seqs, st.open.Batch.Index, st.open.batchWatermark(), true)
		if s, h, n, stop := e.after(st, rep, err); stop {
			return s, h, n, err
		}
	}
	for {
		next := st.nextBatch(e.batchSize(st))
		if len(next) == 0 {
			break
		}
		rep, err := e.batch(ctx, st, next, len(st.Batches)+1, "", false)
		if s, h, n, stop := e.after(st, rep, err); stop {
			return s, h, n, err
		}
	}
	return StatusCompleted, "", "", nil
}

// stopped names why a wait or a step ended early: Ctrl-C, or the time
// limit — including a rate limiter that refuses a wait it could not finish
// before the deadline.
func stopped(ctx context.Context, err error) error {
	if _, limited := ctx.Deadline(); limited && (errors.Is(ctx.Err(), context.DeadlineExceeded) || ctx.Err() == nil) {
		return ErrDeadline
	}
	if ctx.Err() != nil {
		return ErrInterrupted
	}
	return err
}

// after turns a batch's outcome into "stop" or "go on".
func (e *Engine) after(st *State, rep *BatchReport, err error) (status, halted, note string, stop bool) {
	switch {
	case errors.Is(err, ErrInterrupted):
		return StatusInterrupted, "", "interrupted by signal", true
	case errors.Is(err, ErrDeadline):
		return StatusInterrupted, "", "stopped at the time limit (--timeout)", true
	case err != nil:
		return StatusFailed, "", err.Error(), true
	case rep != nil && !rep.Passed():
		return StatusHalted, rep.Gate, rep.GateReason, true
	}
	return "", "", "", false
}

func (e *Engine) batch(ctx context.Context, st *State, seqs []int64, index int, watermark string, resumed bool) (*BatchReport, error) {
	strat := strategyFor(e, st.Plan.Kind)
	before, err := e.lenBefore(ctx, resumed)
	if err != nil {
		return nil, err
	}
	if !resumed {
		if watermark, err = e.openBatch(ctx, st, seqs, index, watermark); err != nil {
			return nil, err
		}
	}
	since := st.open.At
	if err := strat.move(ctx, st, seqs, since); err != nil {
		return nil, err
	}
	rep := &BatchReport{Index: index, Size: len(seqs), DLQBefore: before}
	if err := strat.report(ctx, st, seqs, watermark, rep); err != nil {
		return nil, err
	}
	if err := e.closeBatch(ctx, st, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// lenBefore is the DLQ's length before a batch. The length (and, from a
// backend.LenTailer, the tail) read at the end of the batch before are
// this one's length before and watermark: between the reads and this
// batch's first write the engine only journals.
func (e *Engine) lenBefore(ctx context.Context, resumed bool) (before int64, err error) {
	before = e.dlqLen
	lt, lenTail := e.Source.(backend.LenTailer)
	switch {
	case e.lenKnown:
	case lenTail && !resumed:
		if before, e.tail, err = lt.LenTail(ctx); err != nil {
			return 0, err
		}
		e.tailKnown = true
	default:
		if before, err = e.Source.Len(ctx); err != nil {
			return 0, err
		}
	}
	e.lenKnown = false
	return before, nil
}

// openBatch starts a new batch of seqs: its watermark (the DLQ's tail,
// from a backend.Tailer; else watermark as given) and its start record,
// held for the batch's first write.
func (e *Engine) openBatch(ctx context.Context, st *State, seqs []int64, index int, watermark string) (string, error) {
	if t, ok := e.Source.(backend.Tailer); ok {
		if e.tailKnown {
			watermark, e.tailKnown = e.tail, false
		} else {
			var err error
			if watermark, err = t.Tail(ctx); err != nil {
				return "", err
			}
		}
	}
	start := Record{Type: RecBatchStart, RunID: st.RunID, At: e.Journal.now().UTC(), Batch: &BatchReport{Index: index, Size: len(seqs)}, Seqs: seqs, Watermark: watermark}
	// Synced with the batch's first intents (hold).
	e.hold(st, start)
	st.open = &start
	return watermark, nil
}

// closeBatch reads the DLQ's length after the batch, journals the batch's
// end and keeps its report in the state.
func (e *Engine) closeBatch(ctx context.Context, st *State, rep *BatchReport) error {
	// A passed batch with more to come: its end is held for the next
	// batch's first write (hold), and what the next batch reads first is
	// read now.
	next := rep.Passed() && st.workLeft()
	lt, lenTail := e.Source.(backend.LenTailer)
	var err error
	if next && lenTail {
		rep.DLQAfter, e.tail, err = lt.LenTail(ctx)
	} else {
		rep.DLQAfter, err = e.Source.Len(ctx)
	}
	e.tailKnown = next && lenTail && err == nil
	if err != nil {
		return err
	}
	// The batch-end record keeps the counts and, of the events, only those
	// whose verdict needs a look: listing every applied or unverified
	// event cost about 80 bytes per entry of a large journal, and the
	// counts say how many of those there were.
	journaled := *rep
	journaled.Events = notableEvents(rep.Events)
	end := Record{Type: RecBatchEnd, RunID: st.RunID, At: e.Journal.now().UTC(), Batch: &journaled}
	if next {
		// Synced with the next batch's first write, which comes before
		// anything of that batch is sent.
		e.hold(st, end)
		e.dlqLen, e.lenKnown = rep.DLQAfter, true
	} else if err := e.commit(st, RecBatchEnd, end); err != nil {
		return err
	}
	st.open = nil
	// The state keeps the report without its per-event verdicts, as a
	// replayed journal does: at a batch of a million they were more than
	// the plan, and the observer below has them.
	kept := *rep
	st.noteCameBack(rep.Events)
	kept.Events = nil
	st.Batches = append(st.Batches, kept)
	if e.Observer != nil {
		e.Observer.BatchDone(*rep)
	}
	return nil
}

// MarkStale journals the entries that --skip-missing leaves out, so the
// run's record says what happened to every planned entry.
func (e *Engine) MarkStale(st *State, missing, changed []Entry) error {
	var recs []Record
	for _, en := range missing {
		recs = append(recs, e.entryRec(RecGone, st, en, "not in the DLQ when the run started (--skip-missing)"))
	}
	for _, en := range changed {
		recs = append(recs, e.entryRec(RecSkipped, st, en, "fingerprint changed since the plan (--skip-missing)"))
	}
	return e.commit(st, "", recs...)
}
