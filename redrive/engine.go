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
	st.Approvals = append(st.Approvals, approvals...)
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
	r := Record{Type: RecResume, RunID: st.RunID, AppliedBy: by}
	r.setApprovals(fresh)
	if err := e.Journal.Append(r); err != nil {
		return err
	}
	st.Approvals = append(st.Approvals, fresh...)
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

// batchSize follows the ramp. The ramp counts consecutive passed batches:
// after a failed gate (a run resumed --past-gate) it starts again at its
// first size. Without effects it never passes the first size unless the
// plan says unverified is fine.
func (e *Engine) batchSize(st *State) int {
	ramp := st.Plan.Params.Ramp
	if len(ramp) == 0 {
		ramp = []int{10}
	}
	i := 0
	for j := len(st.Batches) - 1; j >= 0 && st.Batches[j].Passed(); j-- {
		i++
	}
	if e.Probe == nil && !st.Plan.Params.UnverifiedOK {
		i = 0
	}
	if i >= len(ramp) {
		i = len(ramp) - 1
	}
	return ramp[i]
}

// chunkSize is how many moves share one journal sync: the burst under a
// rate limit (so the limiter's accuracy holds), 256 when unlimited or
// what the mover asks for (backend.ChunkSizer).
func (e *Engine) chunkSize() int {
	if e.Chunk > 0 {
		return e.Chunk
	}
	if e.Limiter == nil || e.Limiter.Limit() == rate.Inf {
		if c, ok := e.Mover.(backend.ChunkSizer); ok && c.UnlimitedChunk() > 0 {
			return c.UnlimitedChunk()
		}
		return 256
	}
	if b := e.Limiter.Burst(); b > 0 {
		return b
	}
	return 1
}

// commit is the order every step follows: journal the records (one sync),
// then update the state, then the crash hook (tests) for step. No side
// effect runs before commit returns. An empty step calls no hook. Records
// held for the next write (hold) are written first, in the same sync.
func (e *Engine) commit(st *State, step string, recs ...Record) error {
	if len(recs) > 0 && len(e.pending) > 0 {
		held := e.pending
		if err := e.Journal.AppendAll(append(held, recs...)); err != nil {
			return err
		}
		e.pending = nil
		e.heard(held)
	} else if err := e.Journal.AppendAll(recs); err != nil {
		return err
	}
	for _, r := range recs {
		st.note(r)
	}
	if step != "" {
		e.crash(step)
	}
	return nil
}

// hold keeps records for the engine's next journal write instead of
// syncing them now, and notes them in the state at once. Only records no
// side effect waits on are held: a batch's start (nothing is sent before
// its intents, written with it), the last chunk's results of an atomic
// mover, and a passed batch's end (the next batch's first write carries
// it, before that batch sends anything). A crash before that write leaves
// the journal as a crash a moment earlier would have: the batch open with
// its entries' intents, which resume settles against the backend and
// reconciles again, gate included. flush writes them before any side
// effect, and Run's last write carries what is left. See
// docs/decisions.md, "Fewer journal syncs per batch".
func (e *Engine) hold(st *State, recs ...Record) {
	for _, r := range recs {
		st.note(r)
		e.pending = append(e.pending, r)
	}
}

// flush writes the held records, if any, alone.
func (e *Engine) flush() error {
	if len(e.pending) == 0 {
		return nil
	}
	held := e.pending
	if err := e.Journal.AppendAll(held); err != nil {
		return err
	}
	e.pending = nil
	e.heard(held)
	return nil
}

// heard calls the crash hook (tests) once for each kind of record a write
// carried that was held: a crash "after batch-end" then finds what the
// same write also made durable, as a real crash there would.
func (e *Engine) heard(held []Record) {
	seen := map[string]bool{}
	for _, r := range held {
		t := r.Type
		if isStep(t) {
			t = RecPublished
		}
		if !seen[t] {
			seen[t] = true
			e.crash(t)
		}
	}
}

func (e *Engine) batch(ctx context.Context, st *State, seqs []int64, index int, watermark string, resumed bool) (*BatchReport, error) {
	strat := strategyFor(e, st.Plan.Kind)
	// The length (and, from a backend.LenTailer, the tail) read at the end
	// of the batch before are this one's length before and watermark:
	// between the reads and this batch's first write the engine only
	// journals.
	before, err := e.dlqLen, error(nil)
	lt, lenTail := e.Source.(backend.LenTailer)
	switch {
	case e.lenKnown:
	case lenTail && !resumed:
		if before, e.tail, err = lt.LenTail(ctx); err != nil {
			return nil, err
		}
		e.tailKnown = true
	default:
		if before, err = e.Source.Len(ctx); err != nil {
			return nil, err
		}
	}
	e.lenKnown = false
	if !resumed {
		if t, ok := e.Source.(backend.Tailer); ok {
			if e.tailKnown {
				watermark, e.tailKnown = e.tail, false
			} else if watermark, err = t.Tail(ctx); err != nil {
				return nil, err
			}
		}
		start := Record{Type: RecBatchStart, RunID: st.RunID, At: e.Journal.now().UTC(), Batch: &BatchReport{Index: index, Size: len(seqs)}, Seqs: seqs, Watermark: watermark}
		// Synced with the batch's first intents (hold).
		e.hold(st, start)
		st.open = &start
	}
	since := st.open.At
	if err := strat.move(ctx, st, seqs, since); err != nil {
		return nil, err
	}
	rep := &BatchReport{Index: index, Size: len(seqs), DLQBefore: before}
	if err := strat.report(ctx, st, seqs, watermark, rep); err != nil {
		return nil, err
	}
	// A passed batch with more to come: its end is held for the next
	// batch's first write (hold), and what the next batch reads first is
	// read now.
	next := rep.Passed() && st.workLeft()
	if next && lenTail {
		rep.DLQAfter, e.tail, err = lt.LenTail(ctx)
	} else {
		rep.DLQAfter, err = e.Source.Len(ctx)
	}
	e.tailKnown = next && lenTail && err == nil
	if err != nil {
		return nil, err
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
		return nil, err
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
	return rep, nil
}

// strategy is what a kind of run does with a batch: a redrive publishes
// each entry to its destination and reconciles the batch; a resolve
// archives each envelope in the journal and removes it.
type strategy interface {
	// move settles what a crash left open in seqs and moves the rest;
	// since is when the batch started.
	move(ctx context.Context, st *State, seqs []int64, since time.Time) error
	// report fills the batch's verdicts and gate.
	report(ctx context.Context, st *State, seqs []int64, watermark string, rep *BatchReport) error
}

func strategyFor(e *Engine, kind string) strategy {
	if kind == KindResolve {
		return resolveStrategy{e}
	}
	return redriveStrategy{e}
}

type redriveStrategy struct{ e *Engine }

func (s redriveStrategy) move(ctx context.Context, st *State, seqs []int64, since time.Time) error {
	return s.e.moveChunks(ctx, st, seqs, since)
}

func (s redriveStrategy) report(ctx context.Context, st *State, seqs []int64, watermark string, rep *BatchReport) error {
	return s.e.reconcile(ctx, st, seqs, watermark, rep)
}

type resolveStrategy struct{ e *Engine }

func (s resolveStrategy) move(ctx context.Context, st *State, seqs []int64, _ time.Time) error {
	return s.e.resolveChunks(ctx, st, seqs)
}

// report: a resolve has no consumer to reconcile with; its gate passes.
func (s resolveStrategy) report(_ context.Context, st *State, seqs []int64, _ string, rep *BatchReport) error {
	rep.Verdicts = map[string]int{}
	for _, seq := range seqs {
		if st.Step(seq) == RecRemoved {
			rep.Moved++
		}
	}
	rep.Gate = GatePass
	return nil
}

// moveCtx lets a chunk in flight finish after Ctrl-C, within MoveTimeout.
func (e *Engine) moveCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := e.MoveTimeout
	if d == 0 {
		d = 30 * time.Second
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

func (e *Engine) item(en Entry) backend.MoveItem {
	return backend.MoveItem{Seq: en.Seq, ID: en.ID, EventID: en.EventID, Fingerprint: en.Fingerprint, Dest: en.Dest}
}

// entryRec is an entry's step record: the entry by its plan sequence
// number, and only what is new (the note; the caller adds a destination ID).
func (e *Engine) entryRec(typ string, st *State, en Entry, note string) Record {
	return Record{Type: typ, Seq: en.Seq, Note: note}
}

// oneEach checks that a backend answered one result per item: anything
// else leaves every item's outcome unknown, as a failed call does.
func oneEach(what string, results []backend.MoveResult, items []backend.MoveItem) error {
	if len(results) != len(items) {
		return fmt.Errorf("%s: the backend returned %d results for %d entries; the outcome of each is unknown", what, len(results), len(items))
	}
	return nil
}

// settleOpen decides, for the entries of a batch that a crash (or a
// journal that cannot be believed) left between steps, what is left to do:
// publish, only remove, or nothing. The journal's word is checked against
// the backend wherever it can be: an atomic mover's entry still in the DLQ
// was not moved, whatever the journal says; and an entry that left the DLQ
// is counted as moved only when the destination does not deny it.
func (e *Engine) settleOpen(ctx context.Context, st *State, seqs []int64, since time.Time) (publish, remove []int64, err error) {
	checker, _ := e.Mover.(backend.PublishedChecker)
	var recs []Record
	// ask lists the entries to look up on the destination, and what each
	// answer means.
	type pending struct {
		en     Entry
		inDLQ  bool
		wasPub bool
	}
	var ask []pending
	for _, s := range seqs {
		step := st.Step(s)
		switch step {
		case RecRemoved, RecGone, RecSkipped:
			continue
		case RecPublished, RecIntent, RecAmbiguous:
		default:
			publish = append(publish, s)
			continue
		}
		en := st.entry(s)
		wasPub := step == RecPublished
		if e.Mover.Atomic() {
			// The move was one atomic step: if the entry is still in the
			// DLQ it did not happen, if it is gone it did (unless the
			// destination says it never arrived).
			_, gerr := e.Source.Get(ctx, en.ID)
			switch {
			case errors.Is(gerr, backend.ErrNotFound):
				if checker == nil {
					recs = append(recs, e.entryRec(RecRemoved, st, en, "not in the DLQ on resume: the atomic move had completed"))
				} else {
					ask = append(ask, pending{en: en, wasPub: wasPub})
				}
			case gerr != nil:
				return nil, nil, gerr
			default:
				if wasPub {
					recs = append(recs, e.entryRec(RecIntent, st, en, "the journal says published, but the entry is still in the DLQ: an atomic move cannot have happened; moving it now"))
				}
				publish = append(publish, en.Seq)
			}
			continue
		}
		if checker != nil {
			ask = append(ask, pending{en: en, inDLQ: true, wasPub: wasPub})
			continue
		}
		if wasPub {
			remove = append(remove, en.Seq)
			continue
		}
		// Outcome unknown: send again with the same identity, so the
		// broker's deduplication can drop it and the consumer absorb it.
		recs = append(recs, e.entryRec(RecAmbiguous, st, en, "outcome of the earlier send unknown; resent with the same event ID and sequence"))
		publish = append(publish, en.Seq)
	}
	if len(ask) > 0 {
		queries := make([]backend.PublishedQuery, len(ask))
		for i, a := range ask {
			queries[i] = backend.PublishedQuery{Item: e.item(a.en), DestID: st.DestID(a.en.Seq), Since: since}
		}
		found, cerr := checker.CheckPublished(ctx, queries, e.markers(st))
		if cerr != nil {
			return nil, nil, fmt.Errorf("look up the destination: %w", cerr)
		}
		if len(found) != len(queries) {
			return nil, nil, fmt.Errorf("look up the destination: %d answers for %d entries", len(found), len(queries))
		}
		for i, a := range ask {
			en := a.en
			switch {
			case !a.inDLQ && found[i] == backend.PresenceAbsent:
				recs = append(recs, e.entryRec(RecGone, st, en, "left the DLQ, but the destination holds no copy from this run: removed by someone else (e.g. XTRIM), not moved"))
			case !a.inDLQ && found[i] == backend.PresenceFound:
				recs = append(recs, e.entryRec(RecRemoved, st, en, "not in the DLQ on resume, and found on the destination: the atomic move had completed"))
			case !a.inDLQ:
				recs = append(recs, e.entryRec(RecRemoved, st, en, "not in the DLQ on resume: the atomic move had completed (the destination cannot confirm it)"))
			case found[i] == backend.PresenceFound:
				if !a.wasPub {
					r := e.entryRec(RecPublished, st, en, "found on the destination with this run's markers")
					recs = append(recs, r)
				}
				remove = append(remove, en.Seq)
			case found[i] == backend.PresenceAbsent:
				// Not believed: the journal's word alone never removes an
				// entry from the DLQ. Sent again with the same identity, in
				// case a consumer deleted what it took.
				recs = append(recs, e.entryRec(RecAmbiguous, st, en, "not found on the destination with this run's markers; sent again with the same event ID and sequence"))
				publish = append(publish, en.Seq)
			case a.wasPub:
				remove = append(remove, en.Seq)
			default:
				recs = append(recs, e.entryRec(RecAmbiguous, st, en, "outcome of the earlier send unknown; resent with the same event ID and sequence"))
				publish = append(publish, en.Seq)
			}
		}
	}
	if err := e.commit(st, "", recs...); err != nil {
		return nil, nil, err
	}
	return publish, remove, nil
}

func (e *Engine) moveChunks(ctx context.Context, st *State, seqs []int64, since time.Time) error {
	publish, remove, err := e.settleOpen(ctx, st, seqs, since)
	if err != nil {
		return err
	}
	if len(remove) > 0 {
		if err := e.removeChunk(ctx, st, st.entriesOf(remove)); err != nil {
			return err
		}
	}
	// A resumed batch's entries that a stopped run already moved count as
	// done: the bar goes on from the total moved.
	done := len(seqs) - len(publish)
	for _, b := range st.Batches {
		done += b.Size
	}
	// The chunks go through a pipeline (pipeline.go): the next chunk's
	// intents are synced while the current chunk's round trip is in flight.
	return e.publishChunks(ctx, st, publish, done)
}

func (e *Engine) removeChunk(ctx context.Context, st *State, part []Entry) error {
	if err := e.flush(); err != nil {
		return err
	}
	items := make([]backend.MoveItem, 0, len(part))
	for _, en := range part {
		items = append(items, e.item(en))
	}
	mctx, cancel := e.moveCtx(ctx)
	results, err := e.Mover.Remove(mctx, items)
	cancel()
	if err != nil {
		return fmt.Errorf("remove from the DLQ: %w", err)
	}
	if err := oneEach("remove from the DLQ", results, items); err != nil {
		return err
	}
	var recs []Record
	for i, res := range results {
		en := part[i]
		switch {
		case errors.Is(res.Err, backend.ErrNotFound):
			recs = append(recs, e.entryRec(RecRemoved, st, en, "already gone from the DLQ"))
		case res.Err != nil:
			recs = append(recs, e.entryRec(RecFailed, st, en, "remove: "+res.Err.Error()))
		default:
			recs = append(recs, e.entryRec(RecRemoved, st, en, ""))
		}
	}
	return e.commit(st, RecRemoved, recs...)
}

// resolveChunks archives each entry's full envelope in the journal, synced,
// and only then removes it from the DLQ.
func (e *Engine) resolveChunks(ctx context.Context, st *State, seqs []int64) error {
	const chunk = 100
	var todo []Entry
	for _, s := range seqs {
		if !st.done(s) {
			todo = append(todo, st.entry(s))
		}
	}
	done := 0
	for _, b := range st.Batches {
		done += b.Size
	}
	for i := 0; i < len(todo); i += chunk {
		part := todo[i:min(i+chunk, len(todo))]
		var recs []Record
		var remove []Entry
		for _, en := range part {
			env, err := e.Source.Get(ctx, en.ID)
			switch {
			case errors.Is(err, backend.ErrNotFound):
				if st.Step(en.Seq) == RecArchive {
					recs = append(recs, e.entryRec(RecRemoved, st, en, ""))
				} else {
					recs = append(recs, e.entryRec(RecGone, st, en, "no longer in the DLQ"))
				}
				continue
			case err != nil:
				return err
			}
			if env.Fingerprint != en.Fingerprint {
				recs = append(recs, e.entryRec(RecSkipped, st, en, backend.ErrChanged.Error()))
				continue
			}
			r := e.entryRec(RecArchive, st, en, st.Plan.Reason)
			r.Envelope = archived(env)
			recs = append(recs, r)
			remove = append(remove, en)
		}
		if err := e.commit(st, RecArchive, recs...); err != nil {
			return err
		}
		if len(remove) > 0 {
			if err := e.removeChunk(ctx, st, remove); err != nil {
				return err
			}
		}
		if e.Observer != nil {
			e.Observer.Progress(done+i+len(part), st.Plan.Entries.Len())
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
	c := Reconciler{Source: e.Source, Probe: e.Probe, Now: e.Now, Sleep: e.Sleep, PollEvery: e.PollEvery}
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
		back, err := backInDLQ(ctx, c.Source, watermark, index)
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
// arrival order to go by) it reads the whole DLQ.
func backInDLQ(ctx context.Context, src backend.Source, watermark string, want map[string]int) (map[string]bool, error) {
	back := map[string]bool{}
	if src == nil || len(want) == 0 {
		return back, nil
	}
	if _, ok := src.(backend.Tailer); !ok {
		watermark = ""
	}
	err := src.Scan(ctx, watermark, func(env envelope.Envelope) error {
		if _, ok := want[env.EventID]; ok {
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
		recs = append(recs, e.entryRec(RecGone, st, en, "not in the DLQ when the run started (--skip-missing)"))
	}
	for _, en := range changed {
		recs = append(recs, e.entryRec(RecSkipped, st, en, "fingerprint changed since the plan (--skip-missing)"))
	}
	return e.commit(st, "", recs...)
}
