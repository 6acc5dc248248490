package cmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/report"
)

// runView presents a run as it goes: a progress bar on a terminal's stderr
// (batch number, position, rate, ETA), one batch table whose rows are
// appended as batches end, and, when a gate fails, the events it names and
// the likely cause. Batch reports go to stdout in the human formats and to
// stderr when stdout carries JSON.
type runView struct {
	io     *IOStreams
	now    func() time.Time
	report func() report.Options
	kind   string
	out    io.Writer
	bar    bool
	table  *report.Stream

	// Where the run stood when this process took it up, so that a resume
	// starts its bar at the right place and its rate counts only its moves.
	base      int
	nextBatch int
	began     time.Time
	// batchBase is the position at the start of the batch in flight: the
	// resolve engine counts progress from the start of each batch.
	batchBase int
	pos       int

	// The settle countdown of the batch in flight.
	settle      time.Duration
	settleStart time.Time
	seen, of    int
}

// newRunView is the view of a run on io, with the output settings of
// report and the clock now; its batch reports go to stderr when stdout
// carries JSON (format).
func newRunView(io *IOStreams, format report.Format, report func() report.Options, now func() time.Time) *runView {
	v := &runView{io: io, now: now, report: report, out: io.Out, bar: io.ErrTTY, nextBatch: 1}
	if format.IsJSON() {
		v.out = io.ErrOut
	}
	return v
}

// Begin is shown the run before the engine takes it up (a
// redrive.RunWatcher): where it stands, and the engine to watch.
func (v *runView) Begin(st *redrive.State, eng *redrive.Engine) {
	v.kind = st.Plan.Kind
	v.begin(st)
	v.watch(eng, time.Duration(st.Plan.Params.Settle))
}

// begin records where the run stands before the engine takes it up.
func (v *runView) begin(st *redrive.State) {
	for _, b := range st.Batches {
		v.base += b.Size
		v.nextBatch = b.Index + 1
	}
	if moved, gone, skipped, _ := st.Counts(); v.kind == redrive.KindRedrive {
		// Moves of a batch a stopped run left open are not this
		// process's: the rate counts from after them.
		v.base = max(v.base, moved+gone+skipped)
	}
	v.batchBase, v.pos = v.base, v.base
	v.began = v.now()
}

func (v *runView) Progress(done, total int) {
	v.settleStart, v.seen, v.of = time.Time{}, 0, 0
	if v.began.IsZero() {
		v.began = v.now()
	}
	v.pos = done
	if v.kind == redrive.KindResolve {
		v.pos = v.batchBase + done
	}
	if !v.bar || total == 0 {
		return
	}
	fmt.Fprint(v.io.ErrOut, "\r"+progressLine(v.nextBatch, v.pos, total, v.pos-v.base, v.now().Sub(v.began))+"\033[K")
}

// progressLine is "batch 3 [######......] 60/125 48.0/s ETA 2s".
func progressLine(batch, pos, total, movedHere int, elapsed time.Duration) string {
	const width = 24
	pos = min(pos, total)
	filled := width * pos / total
	line := fmt.Sprintf("batch %d [%s%s] %d/%d", batch, strings.Repeat("#", filled), strings.Repeat(".", width-filled), pos, total)
	if elapsed > 0 && movedHere > 0 {
		rate := float64(movedHere) / elapsed.Seconds()
		eta := time.Duration(float64(total-pos) / rate * float64(time.Second)).Round(time.Second)
		line += fmt.Sprintf(" %.1f/s ETA %s", rate, report.FormatAge(eta))
	}
	return line
}

func (v *runView) BatchDone(b redrive.BatchReport) {
	if v.bar {
		fmt.Fprint(v.io.ErrOut, "\r\033[K")
	}
	v.nextBatch = b.Index + 1
	v.batchBase += b.Size
	v.settleStart, v.seen, v.of = time.Time{}, 0, 0
	ro := v.report()
	if v.out != v.io.Out {
		ro.TTY, ro.Format, ro.Width = v.io.ErrTTY, report.FormatTable, v.io.ErrWidth
	}
	if v.table == nil {
		fmt.Fprintln(v.out)
		t, err := report.NewStream(v.out, "Batches", batchColumns(v.kind), ro)
		if err != nil {
			return
		}
		v.table = t
	}
	_ = v.table.Row(batchRow(v.kind, b)...)
	if b.Gate != redrive.GatePass && b.Gate != "" {
		fmt.Fprintln(v.out)
		_ = report.WriteLine(v.out, report.ToneBad, gateExplanation(b), ro)
	}
}

// batchColumns fit 80 columns: numbers and the gate are never cut, and the
// gate's column is as wide as the longest gate's name, so that a tripped
// gate never pushes its row out of line; the verdicts take what is left,
// or, on a terminal that leaves them too little (80 columns), a line of
// their own under each row.
// A resolve moves nothing anywhere and nothing is reconciled: its batches
// say how many were resolved (archived in the journal) and the DLQ's size.
func batchColumns(kind string) []report.Column {
	if kind == redrive.KindResolve {
		return []report.Column{
			{Name: "batch", Right: true}, {Name: "size", Right: true}, {Name: "resolved", Right: true},
			{Name: "dlq", Kind: report.Key},
		}
	}
	return []report.Column{
		{Name: "batch", Right: true}, {Name: "size", Right: true}, {Name: "moved", Right: true},
		{Name: "attempts", Right: true}, {Name: "effects", Right: true}, {Name: "unique", Right: true},
		{Name: "dlq", Kind: report.Key, MaxWidth: 9}, {Name: "gate", Kind: report.Key, MaxWidth: gateWidth(), Tone: report.VerdictTone},
		{Name: "verdicts"},
	}
}

func batchRow(kind string, b redrive.BatchReport) []any {
	dlq := fmt.Sprintf("%d→%d", b.DLQBefore, b.DLQAfter)
	if kind == redrive.KindResolve {
		return []any{b.Index, b.Size, b.Moved, dlq}
	}
	var vs []string
	for _, k := range sortedKeys(b.Verdicts) {
		vs = append(vs, fmt.Sprintf("%s=%d", k, b.Verdicts[k]))
	}
	return []any{b.Index, b.Size, b.Moved, b.Attempts, b.Effects, b.UniqueEvents, dlq, b.Gate, strings.Join(vs, " ")}
}

// writeBatches is the whole batch report of a run of this kind (status,
// reconcile).
func writeBatches(w io.Writer, kind string, batches []redrive.BatchReport, ro report.Options) error {
	if len(batches) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t, err := report.NewStream(w, "Batches", batchColumns(kind), ro)
	if err != nil {
		return err
	}
	for _, b := range batches {
		if err := t.Row(batchRow(kind, b)...); err != nil {
			return err
		}
	}
	return nil
}

// gateWidth is the length of the longest gate's name.
func gateWidth() int {
	w := len(redrive.GatePass)
	for g := range gateVerdict {
		w = max(w, len(g))
	}
	return w
}

// gateVerdict is the verdict that fails each gate.
var gateVerdict = map[string]string{
	redrive.GatePending:          redrive.VerdictPending,
	redrive.GateDuplicateEffect:  redrive.VerdictDuplicateEffect,
	redrive.GateConflict:         redrive.VerdictConflict,
	redrive.GateReDeadLettered:   redrive.VerdictReDeadLettered,
	redrive.GateUnverifiedNoRamp: redrive.VerdictUnverified,
}

// gateCause is what usually makes each gate fail, for the person who has
// to decide whether to resume with --past-gate.
var gateCause = map[string]string{
	redrive.GatePending:          "is the consumer running and reading the destination, and does it write the effects store? A --settle too short for the consumer's lag fails this gate too",
	redrive.GateDuplicateEffect:  "the consumer applied these events more than once: its idempotency check (the inbox table) did not hold",
	redrive.GateConflict:         "the consumer recorded another fingerprint for these event IDs: the payload changed after they were first processed",
	redrive.GateReDeadLettered:   "the consumer failed these events again: the cause of the incident is not fixed yet (dlqctl show EVENT_ID has the new error)",
	redrive.GateUnverifiedNoRamp: "no --effects to reconcile against: plan again with --effects, or accept unverified batches with --unverified-ok",
}

// gateExplanation names the gate, up to 10 of its events and the likely
// cause.
func gateExplanation(b redrive.BatchReport) string {
	msg := fmt.Sprintf("batch %d stopped by the %s gate", b.Index, b.Gate)
	if b.GateReason != "" {
		msg += ": " + b.GateReason
	}
	var ids []string
	for _, e := range b.Events {
		if e.Verdict == gateVerdict[b.Gate] {
			ids = append(ids, e.EventID)
		}
	}
	if len(ids) > 0 {
		msg += " (" + firstIDs(ids, 10) + ")"
	}
	if c := gateCause[b.Gate]; c != "" {
		msg += ". Likely cause: " + c
	}
	return msg
}

// liveRunDoc is the run document of a run this process just drove: it
// ended now.
func (a runAdvice) liveRunDoc(st *redrive.State, journal string) RunDoc {
	d := runDoc(st, journal)
	if d.StartedAt == nil {
		// A run begun by this process: the engine journals its start
		// time but keeps a copy without it.
		t := a.started()
		d.StartedAt = &t
	}
	d.ended(a.now())
	return d
}

// journalRunDoc is the run document read from a journal: it ended at its
// last run-end record, if any.
func journalRunDoc(st *redrive.State, journal string) RunDoc {
	d := runDoc(st, journal)
	if !st.EndedAt.IsZero() {
		d.ended(st.EndedAt)
	}
	return d
}

// fillTotals sets started_at and the verdict totals.
func (d *RunDoc) fillTotals(st *redrive.State) {
	if !st.Start.At.IsZero() {
		t := st.Start.At.UTC().Truncate(time.Second)
		d.StartedAt = &t
	}
	d.Verdicts = map[string]int{}
	for _, b := range st.Batches {
		for k, n := range b.Verdicts {
			d.Verdicts[k] += n
		}
	}
}

func (d *RunDoc) ended(at time.Time) {
	if at.IsZero() {
		return
	}
	t := at.UTC().Truncate(time.Second)
	d.EndedAt = &t
	if d.StartedAt != nil {
		s := at.Sub(*d.StartedAt).Seconds()
		d.DurationSeconds = &s
	}
}

// printRun prints the run document in JSON modes, and otherwise a summary
// in the manner of terraform's: one coloured headline with the outcome,
// duration and counts, then the details a reviewer needs.
func (a runAdvice) printRun(d RunDoc) error {
	return printRun(a.io.Out, a.report(), a.now(), d)
}

// printRun is Factory.printRun for the run functions that get their
// stream, settings and clock in their Options; now is the time the
// summary is written at (the run took a while: "ended 5s ago", not "in
// 6m").
func printRun(w io.Writer, ro report.Options, now time.Time, d RunDoc) error {
	ro.Now = now
	if done, err := emitJSON(w, ro.Format, d); done {
		return err
	}
	fmt.Fprintln(w)
	unreconciled := unreconciledMoves(d)
	tone, head := runHeadline(d, unreconciled)
	if err := report.WriteLine(w, tone, head, ro); err != nil {
		return err
	}
	return report.WriteFields(w, "", runFields(d, unreconciled), ro)
}

// movedWord is what a run of kind calls a moved entry.
func movedWord(kind string) string {
	if kind == redrive.KindResolve {
		return "resolved"
	}
	return "moved"
}

// unreconciledMoves counts the moves of a redrive stopped before its last
// batch's verdicts.
func unreconciledMoves(d RunDoc) int {
	if d.Kind != redrive.KindRedrive || d.Status == redrive.StatusCompleted {
		return 0
	}
	n := d.Moved
	for _, b := range d.Batches {
		n -= b.Moved
	}
	return max(n, 0)
}

// runHeadline is the one coloured line with the outcome, the counts and
// the duration, ending in a full stop.
func runHeadline(d RunDoc, unreconciled int) (report.Tone, string) {
	verb := map[string]string{redrive.KindRedrive: "Redrive", redrive.KindResolve: "Resolve"}[d.Kind]
	tone, outcome := report.ToneGood, "complete"
	switch d.Status {
	case redrive.StatusHalted:
		tone, outcome = report.ToneBad, "halted by the "+d.HaltedBy+" gate"
	case redrive.StatusFailed:
		tone, outcome = report.ToneBad, "failed"
	case redrive.StatusInterrupted:
		tone, outcome = report.ToneWarn, "interrupted"
	}
	head := fmt.Sprintf("%s %s! %d %s", verb, outcome, d.Moved, movedWord(d.Kind))
	if unreconciled > 0 {
		head += fmt.Sprintf(" (%d not yet reconciled)", unreconciled)
	}
	if d.Failed > 0 {
		head += fmt.Sprintf(", %d failed", d.Failed)
	}
	head += fmt.Sprintf(", %d remaining", d.Remaining)
	if d.DurationSeconds != nil {
		head += " in " + time.Duration(*d.DurationSeconds*float64(time.Second)).Round(time.Second).String()
	}
	if n := len(d.CameBack); n > 0 {
		head += fmt.Sprintf("; %d came back to the DLQ", n)
	}
	if d.Kind == redrive.KindResolve && d.Moved > 0 {
		// Resolved entries go nowhere but the journal, which keeps them.
		head += "; archived in " + d.Journal
	}
	return tone, head + "."
}

// runFields are the details under the headline: times, counts, verdicts,
// who planned, approved and applied, the journal and how to resume.
func runFields(d RunDoc, unreconciled int) []report.Field {
	moved := movedWord(d.Kind)
	fields := []report.Field{{Key: "run", Value: d.RunID}, {Key: "status", Value: d.Status}}
	if d.StartedAt != nil {
		fields = append(fields, report.Field{Key: "started", Value: *d.StartedAt})
	}
	if d.EndedAt != nil {
		fields = append(fields, report.Field{Key: "ended", Value: *d.EndedAt})
	}
	fields = append(fields, report.Field{Key: "planned", Value: d.Planned}, report.Field{Key: moved, Value: d.Moved})
	if d.Gone+d.Skipped+d.Failed > 0 {
		fields = append(fields, report.Field{Key: "not moved", Value: fmt.Sprintf("%d gone, %d changed, %d failed", d.Gone, d.Skipped, d.Failed)})
	}
	fields = append(fields, report.Field{Key: "remaining", Value: d.Remaining})
	if len(d.CameBack) > 0 {
		fields = append(fields, report.Field{Key: "came back", Value: strings.Join(d.CameBack, ", ")})
	}
	if unreconciled > 0 {
		fields = append(fields, report.Field{Key: "not reconciled", Value: fmt.Sprintf("%d: the resume reconciles them first", unreconciled)})
	}
	if len(d.Verdicts) > 0 {
		var vs []string
		for _, k := range sortedByCount(d.Verdicts) {
			vs = append(vs, fmt.Sprintf("%s %d", k, d.Verdicts[k]))
		}
		fields = append(fields, report.Field{Key: "verdicts", Value: strings.Join(vs, ", ")})
	}
	if n := len(d.Batches); n > 0 {
		fields = append(fields, report.Field{Key: "dlq", Value: fmt.Sprintf("%d → %d", d.Batches[0].DLQBefore, d.Batches[n-1].DLQAfter)})
	}
	fields = append(fields, report.Field{Key: "reason", Value: d.Reason}, report.Field{Key: "planned by", Value: d.PlannedBy})
	if len(d.Approvals) > 0 {
		fields = append(fields, report.Field{Key: "approved by", Value: approvedByText(d.Approvals)})
	}
	fields = append(fields, report.Field{Key: "applied by", Value: d.AppliedBy})
	if d.HaltedBy != "" {
		fields = append(fields, report.Field{Key: "halted by", Value: d.HaltedBy + ": " + d.HaltReason})
	}
	fields = append(fields, report.Field{Key: "journal", Value: d.Journal})
	// Commands, each a value of its own that is never wrapped, after what
	// to set before they run.
	var commands []report.Field
	if n := d.Verdicts[redrive.VerdictUnverified]; n > 0 && d.Status == redrive.StatusCompleted {
		// The run did not wait after its last batch (nothing settles
		// without effects); a later reconcile sees what came back.
		fields = append(fields, report.Field{Key: "check later", Value: fmt.Sprintf("%d unverified: a reconcile shows any that came back to the DLQ", n)})
		commands = append(commands, report.Field{Key: "reconcile", Value: report.Command("dlqctl reconcile --journal " + shellQuote(d.Journal))})
	}
	if d.Resume != "" && d.Remaining > 0 {
		commands = append(commands, report.Field{Key: "resume", Value: report.Command(d.Resume)})
	}
	if len(commands) > 0 && len(d.Needs) > 0 {
		fields = append(fields, report.Field{Key: "needs", Value: strings.Join(d.Needs, "; ")})
	}
	return append(fields, commands...)
}

// settleProbe passes the engine's effects lookups through, remembering how
// many of the batch's events had an effect, for the settle countdown.
type settleProbe struct {
	effects.Probe
	v *runView
}

func (p settleProbe) Records(ctx context.Context, ids []string) (map[string]effects.Record, error) {
	recs, err := p.Probe.Records(ctx, ids)
	if err == nil {
		seen := 0
		for _, id := range ids {
			if recs[id].Effects > 0 {
				seen++
			}
		}
		p.v.seen, p.v.of = seen, len(ids)
	}
	return recs, err
}

// watch wraps the engine's effects probe and poll sleep, so that while a
// batch settles the bar counts down the --settle time left and shows the
// effects seen so far.
func (v *runView) watch(eng *redrive.Engine, settle time.Duration) {
	v.settle = settle
	if eng.Probe != nil {
		eng.Probe = settleProbe{Probe: eng.Probe, v: v}
	}
	sleep := eng.Sleep
	eng.Sleep = func(ctx context.Context, d time.Duration) error {
		if v.bar {
			if v.settleStart.IsZero() {
				v.settleStart = v.now()
			}
			left := max(v.settle-v.now().Sub(v.settleStart), 0).Round(time.Second)
			line := fmt.Sprintf("batch %d settling: %s left", v.nextBatch, report.FormatAge(left))
			if v.of > 0 {
				line += fmt.Sprintf(", effects seen %d/%d", v.seen, v.of)
			}
			fmt.Fprint(v.io.ErrOut, "\r"+line+"\033[K")
		}
		if sleep != nil {
			return sleep(ctx, d)
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
}

// approvedByText names the approvals a run went on under, grouped by the
// journal record that names them: "bob, carol" for those it started
// under, then "; dave (on resume at T)" for each resume that went on
// under approvals of its own.
func approvedByText(as []RunApproval) string {
	var groups []string
	for i := 0; i < len(as); {
		j := i + 1
		for j < len(as) && as[j].Record == as[i].Record && as[j].WentOnAt.Equal(as[i].WentOnAt) {
			j++
		}
		var names []string
		for _, a := range as[i:j] {
			names = append(names, a.By)
		}
		g := strings.Join(names, ", ")
		if as[i].Record == redrive.RecResume {
			g += " (on resume at " + as[i].WentOnAt.UTC().Format(time.RFC3339) + ")"
		}
		groups = append(groups, g)
		i = j
	}
	return strings.Join(groups, "; ")
}
