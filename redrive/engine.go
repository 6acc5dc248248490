package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/envelope"
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
}

// NewRunID names a run: time plus randomness, sortable.
func NewRunID(now time.Time, random string) string {
	return now.UTC().Format("20060102T150405Z") + "-" + random
}

// Start begins a new run of p: it writes the run-start record, the plan
// and the approval into the journal, and returns the run's state.
func (e *Engine) Start(runID string, p *Plan, planPath, source, appliedBy string, a *Approval) (*State, error) {
	st := newState(runID, p)
	st.Start = Record{Type: RecRunStart, RunID: runID, Plan: p, PlanPath: planPath, Source: source, AppliedBy: appliedBy, Approval: a}
	if err := e.Journal.Append(st.Start); err != nil {
		return nil, err
	}
	return st, nil
}

// Resume marks the journal as resumed by `by`.
func (e *Engine) Resume(st *State, by string) error {
	return e.Journal.Append(Record{Type: RecResume, RunID: st.RunID, AppliedBy: by})
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
	if jerr := e.Journal.Append(end); jerr != nil && err == nil {
		err = jerr
	}
	return err
}

func (e *Engine) run(ctx context.Context, st *State) (status, halted, note string, err error) {
	bySeq := map[int64]Entry{}
	for _, en := range st.Plan.Entries {
		bySeq[en.Seq] = en
	}
	if st.open != nil {
		var seqs []int64
		seqs = append(seqs, st.open.Seqs...)
		rep, err := e.batch(ctx, st, bySeq, seqs, st.open.Batch.Index, st.open.Note, true)
		if s, h, n, stop := e.after(st, rep, err); stop {
			return s, h, n, err
		}
	}
	for {
		// A failed entry is still in the DLQ; it is tried again by a
		// resume, never twice within one run.
		var next []int64
		size := e.batchSize(st)
		for _, en := range st.Plan.Entries {
			if len(next) == size {
				break
			}
			if !st.done(en.Seq) && st.step[en.Seq] != RecFailed {
				next = append(next, en.Seq)
			}
		}
		if len(next) == 0 {
			break
		}
		rep, err := e.batch(ctx, st, bySeq, next, len(st.Batches)+1, "", false)
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

// batchSize follows the ramp; without effects it never passes the first
// size unless the plan says unverified is fine.
func (e *Engine) batchSize(st *State) int {
	ramp := st.Plan.Params.Ramp
	if len(ramp) == 0 {
		ramp = []int{10}
	}
	i := len(st.Batches)
	if e.Probe == nil && !st.Plan.Params.UnverifiedOK {
		i = 0
	}
	if i >= len(ramp) {
		i = len(ramp) - 1
	}
	return ramp[i]
}

// chunkSize is how many moves share one journal sync: the burst under a
// rate limit (so the limiter's accuracy holds), 256 when unlimited.
func (e *Engine) chunkSize() int {
	if e.Chunk > 0 {
		return e.Chunk
	}
	if e.Limiter == nil || e.Limiter.Limit() == rate.Inf {
		return 256
	}
	if b := e.Limiter.Burst(); b > 0 {
		return b
	}
	return 1
}

func (e *Engine) batch(ctx context.Context, st *State, bySeq map[int64]Entry, seqs []int64, index int, watermark string, resumed bool) (*BatchReport, error) {
	before, err := e.Source.Len(ctx)
	if err != nil {
		return nil, err
	}
	if !resumed {
		if t, ok := e.Source.(backend.Tailer); ok {
			if watermark, err = t.Tail(ctx); err != nil {
				return nil, err
			}
		}
		start := Record{Type: RecBatchStart, RunID: st.RunID, Batch: &BatchReport{Index: index, Size: len(seqs)}, Seqs: seqs, Note: watermark}
		if err := e.Journal.Append(start); err != nil {
			return nil, err
		}
		st.open = &start
		e.crash(RecBatchStart)
	}
	if st.Plan.Kind == KindResolve {
		err = e.resolveChunks(ctx, st, bySeq, seqs)
	} else {
		err = e.moveChunks(ctx, st, bySeq, seqs)
	}
	if err != nil {
		return nil, err
	}
	rep := &BatchReport{Index: index, Size: len(seqs), DLQBefore: before}
	if st.Plan.Kind == KindResolve {
		rep.Verdicts = map[string]int{}
		for _, s := range seqs {
			if st.step[s] == RecRemoved {
				rep.Moved++
			}
		}
		rep.Gate = GatePass
	} else if err := e.reconcile(ctx, st, bySeq, seqs, watermark, rep); err != nil {
		return nil, err
	}
	if rep.DLQAfter, err = e.Source.Len(ctx); err != nil {
		return nil, err
	}
	if err := e.Journal.Append(Record{Type: RecBatchEnd, RunID: st.RunID, Batch: rep}); err != nil {
		return nil, err
	}
	st.open = nil
	st.Batches = append(st.Batches, *rep)
	e.crash(RecBatchEnd)
	if e.Observer != nil {
		e.Observer.BatchDone(*rep)
	}
	return rep, nil
}

// moveCtx lets a chunk in flight finish after Ctrl-C, within MoveTimeout.
func (e *Engine) moveCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := e.MoveTimeout
	if d == 0 {
		d = 30 * time.Second
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

func (e *Engine) item(st *State, en Entry) backend.MoveItem {
	return backend.MoveItem{Seq: en.Seq, ID: en.ID, EventID: en.EventID, Fingerprint: en.Fingerprint, Dest: en.Dest}
}

func (e *Engine) entryRec(typ string, st *State, en Entry) Record {
	return Record{Type: typ, RunID: st.RunID, Seq: en.Seq, ID: en.ID, EventID: en.EventID, Fingerprint: en.Fingerprint, Dest: en.Dest}
}

func (e *Engine) moveChunks(ctx context.Context, st *State, bySeq map[int64]Entry, seqs []int64) error {
	// First settle what a crash left open.
	var publish, remove []Entry
	for _, s := range seqs {
		en := bySeq[s]
		switch st.step[s] {
		case RecRemoved, RecGone, RecSkipped:
		case RecPublished:
			remove = append(remove, en)
		case RecIntent, RecAmbiguous:
			if e.Mover.Atomic() {
				// The move was one atomic step: if the entry is still in
				// the DLQ it did not happen, if it is gone it did.
				_, err := e.Source.Get(ctx, en.ID)
				switch {
				case errors.Is(err, backend.ErrNotFound):
					r := e.entryRec(RecRemoved, st, en)
					r.Note = "not in the DLQ on resume: the atomic move had completed"
					if err := e.Journal.Append(r); err != nil {
						return err
					}
					st.note(r)
					continue
				case err != nil:
					return err
				}
				publish = append(publish, en)
				continue
			}
			// Outcome unknown: send again with the same identity, so the
			// broker's deduplication can drop it and the consumer absorb it.
			r := e.entryRec(RecAmbiguous, st, en)
			r.Note = "outcome of the earlier send unknown; resent with the same event ID and sequence"
			if err := e.Journal.Append(r); err != nil {
				return err
			}
			st.note(r)
			publish = append(publish, en)
		default:
			publish = append(publish, en)
		}
	}
	if len(remove) > 0 {
		if err := e.removeChunk(ctx, st, remove); err != nil {
			return err
		}
	}
	done := 0
	for _, b := range st.Batches {
		done += b.Size
	}
	chunk := e.chunkSize()
	for i := 0; i < len(publish); i += chunk {
		part := publish[i:min(i+chunk, len(publish))]
		if e.Limiter != nil {
			if err := e.Limiter.WaitN(ctx, len(part)); err != nil {
				return stopped(ctx, err)
			}
		}
		if err := e.publishChunk(ctx, st, part); err != nil {
			return err
		}
		if e.Observer != nil {
			e.Observer.Progress(done+i+len(part), len(st.Plan.Entries))
		}
		if ctx.Err() != nil {
			return stopped(ctx, ctx.Err())
		}
	}
	return nil
}

func (e *Engine) publishChunk(ctx context.Context, st *State, part []Entry) error {
	intents := make([]Record, 0, len(part))
	items := make([]backend.MoveItem, 0, len(part))
	for _, en := range part {
		if st.step[en.Seq] != RecAmbiguous {
			intents = append(intents, e.entryRec(RecIntent, st, en))
		}
		items = append(items, e.item(st, en))
	}
	if err := e.Journal.AppendAll(intents); err != nil {
		return err
	}
	for _, r := range intents {
		st.note(r)
	}
	e.crash(RecIntent)
	mctx, cancel := e.moveCtx(ctx)
	results, err := e.Mover.Publish(mctx, items, e.markers(st))
	cancel()
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	var recs []Record
	var remove []Entry
	for i, res := range results {
		en := part[i]
		switch {
		case errors.Is(res.Err, backend.ErrNotFound):
			r := e.entryRec(RecGone, st, en)
			r.Note = "no longer in the DLQ: nothing published"
			recs = append(recs, r)
		case errors.Is(res.Err, backend.ErrChanged):
			r := e.entryRec(RecSkipped, st, en)
			r.Note = res.Err.Error()
			recs = append(recs, r)
		case res.Err != nil:
			r := e.entryRec(RecFailed, st, en)
			r.Note = res.Err.Error()
			recs = append(recs, r)
		default:
			r := e.entryRec(RecPublished, st, en)
			r.DestID = res.DestID
			recs = append(recs, r)
			if res.Removed {
				recs = append(recs, e.entryRec(RecRemoved, st, en))
			} else {
				remove = append(remove, en)
			}
		}
	}
	if err := e.Journal.AppendAll(recs); err != nil {
		return err
	}
	for _, r := range recs {
		st.note(r)
	}
	e.crash(RecPublished)
	if len(remove) > 0 {
		return e.removeChunk(ctx, st, remove)
	}
	return nil
}

func (e *Engine) removeChunk(ctx context.Context, st *State, part []Entry) error {
	items := make([]backend.MoveItem, 0, len(part))
	for _, en := range part {
		items = append(items, e.item(st, en))
	}
	mctx, cancel := e.moveCtx(ctx)
	results, err := e.Mover.Remove(mctx, items)
	cancel()
	if err != nil {
		return fmt.Errorf("remove from the DLQ: %w", err)
	}
	var recs []Record
	for i, res := range results {
		en := part[i]
		r := e.entryRec(RecRemoved, st, en)
		switch {
		case errors.Is(res.Err, backend.ErrNotFound):
			r.Note = "already gone from the DLQ"
		case res.Err != nil:
			r = e.entryRec(RecFailed, st, en)
			r.Note = "remove: " + res.Err.Error()
		}
		recs = append(recs, r)
	}
	if err := e.Journal.AppendAll(recs); err != nil {
		return err
	}
	for _, r := range recs {
		st.note(r)
	}
	e.crash(RecRemoved)
	return nil
}

// resolveChunks archives each entry's full envelope in the journal, synced,
// and only then removes it from the DLQ.
func (e *Engine) resolveChunks(ctx context.Context, st *State, bySeq map[int64]Entry, seqs []int64) error {
	const chunk = 100
	var todo []Entry
	for _, s := range seqs {
		if !st.done(s) {
			todo = append(todo, bySeq[s])
		}
	}
	for i := 0; i < len(todo); i += chunk {
		part := todo[i:min(i+chunk, len(todo))]
		var recs []Record
		var remove []Entry
		for _, en := range part {
			env, err := e.Source.Get(ctx, en.ID)
			switch {
			case errors.Is(err, backend.ErrNotFound):
				if st.step[en.Seq] == RecArchive {
					recs = append(recs, e.entryRec(RecRemoved, st, en))
				} else {
					r := e.entryRec(RecGone, st, en)
					r.Note = "no longer in the DLQ"
					recs = append(recs, r)
				}
				continue
			case err != nil:
				return err
			}
			if env.Fingerprint != en.Fingerprint {
				r := e.entryRec(RecSkipped, st, en)
				r.Note = backend.ErrChanged.Error()
				recs = append(recs, r)
				continue
			}
			r := e.entryRec(RecArchive, st, en)
			r.Envelope = archived(env)
			r.Note = st.Plan.Reason
			recs = append(recs, r)
			remove = append(remove, en)
		}
		if err := e.Journal.AppendAll(recs); err != nil {
			return err
		}
		for _, r := range recs {
			st.note(r)
		}
		e.crash(RecArchive)
		if len(remove) > 0 {
			if err := e.removeChunk(ctx, st, remove); err != nil {
				return err
			}
		}
		if e.Observer != nil {
			e.Observer.Progress(i+len(part), len(st.Plan.Entries))
		}
		if ctx.Err() != nil {
			return stopped(ctx, ctx.Err())
		}
	}
	return nil
}

func archived(env envelope.Envelope) *envelope.Envelope {
	env.Fingerprint = env.CarriedFingerprint()
	return &env
}

// reconcile waits up to the plan's settle time for every moved event of the
// batch to settle and gives each its verdict.
func (e *Engine) reconcile(ctx context.Context, st *State, bySeq map[int64]Entry, seqs []int64, watermark string, rep *BatchReport) error {
	var moved []Entry
	for _, s := range seqs {
		if st.step[s] == RecRemoved {
			moved = append(moved, bySeq[s])
		}
	}
	c := Reconciler{Source: e.Source, Probe: e.Probe, Now: e.Now, Sleep: e.Sleep, PollEvery: e.PollEvery}
	if err := c.Batch(ctx, moved, watermark, time.Duration(st.Plan.Params.Settle), rep); err != nil {
		return err
	}
	rep.ApplyGates(st.Plan.Params.MaxFailedRatio)
	return nil
}

// Reconciler gives the events of a batch their verdicts: one probe round
// trip and one read of the DLQ's new entries per poll.
type Reconciler struct {
	Source    backend.Source // nil: re-dead-letters are not looked for
	Probe     effects.Probe  // nil: unverified
	Now       func() time.Time
	Sleep     func(ctx context.Context, d time.Duration) error
	PollEvery time.Duration
}

// Batch polls until every event settled or settle ran out, and fills rep.
func (c Reconciler) Batch(ctx context.Context, moved []Entry, watermark string, settle time.Duration, rep *BatchReport) error {
	rep.Moved = len(moved)
	ids := uniqueEventIDs(moved)
	deadline := c.Now().Add(settle)
	poll := c.PollEvery
	if poll == 0 {
		poll = 250 * time.Millisecond
	}
	for {
		back, err := backInDLQ(ctx, c.Source, watermark, ids)
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
		for _, id := range ids {
			ev := EventVerdict{EventID: id}
			if c.Probe == nil {
				ev.Verdict = VerdictUnverified
				if back[id] {
					ev.Verdict = VerdictReDeadLettered
				}
			} else {
				rec, found := recs[id]
				ev.Attempts, ev.Effects = rec.Attempts, rec.Effects
				ev.Verdict = Judge(fingerprintOf(moved, id), rec, found, back[id])
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

func (e *Engine) sleep(ctx context.Context, d time.Duration) error {
	return Reconciler{Sleep: e.Sleep}.sleep(ctx, d)
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

func uniqueEventIDs(entries []Entry) []string {
	seen := map[string]bool{}
	var ids []string
	for _, en := range entries {
		if !seen[en.EventID] {
			seen[en.EventID] = true
			ids = append(ids, en.EventID)
		}
	}
	return ids
}

func fingerprintOf(entries []Entry, eventID string) string {
	for _, en := range entries {
		if en.EventID == eventID {
			return en.Fingerprint
		}
	}
	return ""
}

// backInDLQ reads the DLQ entries that arrived after the batch started and
// says which of ids are among them. Without a Tailer (no arrival order to
// go by) it reads the whole DLQ.
func backInDLQ(ctx context.Context, src backend.Source, watermark string, ids []string) (map[string]bool, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	back := map[string]bool{}
	if src == nil || len(ids) == 0 {
		return back, nil
	}
	if _, ok := src.(backend.Tailer); !ok {
		watermark = ""
	}
	err := src.Scan(ctx, watermark, func(env envelope.Envelope) error {
		if want[env.EventID] {
			back[env.EventID] = true
		}
		return nil
	})
	return back, err
}

// MarkStale journals the entries that --skip-missing leaves out, so the
// run's record says what happened to every planned entry.
func (e *Engine) MarkStale(st *State, missing, changed []Entry) error {
	var recs []Record
	for _, en := range missing {
		r := e.entryRec(RecGone, st, en)
		r.Note = "not in the DLQ when the run started (--skip-missing)"
		recs = append(recs, r)
	}
	for _, en := range changed {
		r := e.entryRec(RecSkipped, st, en)
		r.Note = "fingerprint changed since the plan (--skip-missing)"
		recs = append(recs, r)
	}
	if err := e.Journal.AppendAll(recs); err != nil {
		return err
	}
	for _, r := range recs {
		st.note(r)
	}
	return nil
}
