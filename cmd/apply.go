package cmd

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/time/rate"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/redrive"
)

// applyOptions is what `redrive apply` and `resolve apply` run and with
// what: the plan, the flags, and the steps they call out to (reading the
// plan and the approvals beside it, the approval policy, running it).
type applyOptions struct {
	// Kind is redrive or resolve; Plan is the plan file.
	Kind string
	Plan string
	// ReadPlan reads a plan of kind, refusing a tampered one.
	ReadPlan func(path, kind string) (*redrive.Plan, error)
	// PlanApprovals adds the approvals handed over beside the plan.
	PlanApprovals func(plan *redrive.Plan, path string) error
	// ApprovalPolicy is the policy approvals are checked against, from the
	// key flags, the environment and the config.
	ApprovalPolicy func(k keyFlags, distinct bool) (redrive.ApprovalPolicy, error)
	// ApplyPlan checks the approved plan against the DLQ and runs it.
	ApplyPlan func(context.Context, approvedRun) error
	// PlanSource makes the plan's own source (as it recorded it) the one
	// the run opens, when none was given.
	PlanSource func(recorded string)

	journal     string
	skipMissing bool
	keys        keyFlags
	effects     string
	distinct    bool
}

// approvedRun is a plan whose approvals hold, ready to run: where its
// journal goes, the key the journal is chained with (nil for a signed
// run), and the apply flags that shape the run.
type approvedRun struct {
	plan                  *redrive.Plan
	planPath, journalPath string
	approvals             []redrive.Approval
	key                   []byte
	skipMissing           bool
	effectsURL            string
	hint                  hintFlags
}

// newApplyCmd builds `redrive apply` or `resolve apply`; runF, when not
// nil, runs instead of runApply.
func newApplyCmd(f *Factory, kind string, runF func(context.Context, *applyOptions) error) *cobra.Command {
	o := &applyOptions{Kind: kind}
	c := &cobra.Command{
		Use:   "apply PLAN",
		Short: "Run an approved plan in batches, journaled, reconciled after every batch",
		Long: `Run an approved plan. Refused (exit 5) when the plan is unapproved, changed
after it was made, its approval expired or does not verify, or it is stale:
an entry left the DLQ or its fingerprint changed (listed; --skip-missing goes
on without them). Every step is journaled before the next side effect;
Ctrl-C finishes the chunks already journaled (at most two) and exits 130 with the resume command.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.Plan, o.ReadPlan, o.PlanApprovals, o.ApprovalPolicy = args[0], f.readPlanFor, f.planApprovals, f.approvalPolicy
			o.ApplyPlan = f.planRunner().apply
			o.PlanSource = func(recorded string) {
				if f.source == "" {
					f.source = recorded
				}
			}
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runApply(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.journal, "journal", "", "journal file (default: next to the plan, PLAN.journal)")
	c.Flags().BoolVar(&o.skipMissing, "skip-missing", false, "go on without entries that left the DLQ or changed")
	o.keys.register(c.Flags())
	c.Flags().BoolVar(&o.distinct, "require-distinct-approver", false, "refuse an approval by the planner (also policy.distinct_approver)")
	if kind == redrive.KindRedrive {
		c.Flags().StringVar(&o.effects, "effects", "", "the effects URL with its password, when the plan's has one hidden")
	}
	return c
}

// runApply checks the plan's approvals against the policy and runs it.
func runApply(ctx context.Context, o *applyOptions) error {
	path := o.Plan
	plan, err := o.ReadPlan(path, o.Kind)
	if err != nil {
		return err
	}
	if err := refuseEmpty(plan, path, "apply"); err != nil {
		return err
	}
	if o.PlanSource != nil {
		o.PlanSource(plan.Source)
	}
	if err := o.PlanApprovals(plan, path); err != nil {
		return err
	}
	pol, err := o.ApprovalPolicy(o.keys, o.distinct)
	if err != nil {
		return err
	}
	approvals, err := plan.CheckApprovals(pol)
	if err != nil {
		return withCode(ExitApproval, fmt.Errorf("%s: not approved: %w", path, err))
	}
	// An HMAC-approved run's journal is chained with the approval key; a
	// signed run's host holds no secret to chain it with (docs/journal.md).
	var key []byte
	if !approvals[0].Signed() {
		if key, err = pol.KeyOf(approvals[0].By); err != nil {
			return withCode(ExitApproval, err)
		}
	}
	journal := firstNonEmpty(o.journal, redrive.DefaultJournalPath(path))
	return o.ApplyPlan(ctx, approvedRun{plan: plan, planPath: path, journalPath: journal, approvals: approvals, key: key,
		skipMissing: o.skipMissing, effectsURL: o.effects, hint: hintFlags{keys: o.keys}})
}

// planRunner starts the run of an approved plan: what apply and the
// one-step forms do once a plan may run. Its fields are plain values and
// the steps a run goes through, so a test can give its own.
type planRunner struct {
	IO *IOStreams
	// Started is when the invocation started, which names the run; Now
	// is the clock of the journal.
	Started time.Time
	Now     func() time.Time
	// Applier is who runs it (recorded in the run-start).
	Applier string
	// OpenSession opens the source in effect with the category rules in
	// effect.
	OpenSession func(context.Context) (*session, error)
	Steps       runSteps
}

// planRunner is the Factory's: its clock, source and run steps.
func (f *Factory) planRunner() planRunner {
	return planRunner{IO: f.IO, Started: f.now(), Now: f.Now, Applier: f.identity(""), OpenSession: f.openSession, Steps: f.runSteps()}
}

// apply checks the plan against the DLQ and runs it. r.key is the
// approval key the journal is chained with (nil: a signed run, or a
// one-step run without one, whose journal is not chained).
func (p planRunner) apply(ctx context.Context, r approvedRun) (err error) {
	plan, journalPath, steps := r.plan, r.journalPath, p.Steps
	runID := redrive.NewRunID(p.Started, randomSuffix())
	unlock, err := steps.LockJournal(journalPath, runID)
	if err != nil {
		return err
	}
	defer unlock()
	if err := restartNeverStarted(p.IO.ErrOut, journalPath); err != nil {
		return err
	}
	if _, err := os.Lstat(journalPath); err == nil {
		// The run started: whatever left the DLQ since was most likely
		// moved by it, and only the journal knows. Checked before the plan
		// is compared with the DLQ, which would call it stale.
		return steps.StartedAlready(ctx, plan, r.planPath, journalPath, r.hint)
	}
	s, err := p.OpenSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	if s.src.String() != plan.Source {
		return usageErrorf("the plan was made for %s, but the source is %s", plan.Source, s.src)
	}
	ctx, release, err := steps.LeaseDLQ(ctx, s.src, runID)
	if err != nil {
		return err
	}
	defer func() { err = steps.ReleaseAfter(err, release) }()
	missing, changed, err := redrive.Stale(ctx, s.src, plan)
	if err != nil {
		return err
	}
	if err := refuseStale(s.src, plan, journalPath, missing, changed, r.skipMissing); err != nil {
		return err
	}
	eng, closeEng, err := steps.Engine(ctx, s.src, plan, r.effectsURL)
	if err != nil {
		return err
	}
	defer closeEng()
	j, err := redrive.CreateJournal(journalPath, p.Now)
	if err != nil {
		return err
	}
	defer j.Close()
	eng.Journal = j
	if len(r.key) > 0 {
		j.Chain(redrive.JournalKey(r.key, runID), "")
	}
	st, err := eng.Start(runID, plan, r.planPath, s.src.String(), p.Applier, r.approvals)
	if err != nil {
		return err
	}
	if err := eng.MarkStale(st, missing, changed); err != nil {
		return err
	}
	noteWeakMoves(p.IO.ErrOut, s.src, plan)
	fmt.Fprintf(p.IO.ErrOut, "run %s: %s, journal %s\n", runID, entries(plan.Entries.Len()), journalPath)
	return steps.FinishRun(ctx, eng, st, journalPath, r.hint)
}

// refuseStale refuses a plan some of whose entries left the DLQ or
// changed, unless skipMissing; with every entry gone, always.
func refuseStale(src backend.Source, plan *redrive.Plan, journalPath string, missing, changed []redrive.Entry, skipMissing bool) error {
	if len(missing) == plan.Entries.Len() && len(missing) > 0 {
		// --skip-missing would go on with nothing.
		return withCode(ExitApproval, fmt.Errorf("plan is stale: none of its %s is in the DLQ any more; was it applied already (with another --journal than %s)? Its journal's run: dlqctl %s status JOURNAL%s", entries(len(missing)), journalPath, plan.Kind, unseenNote(src, len(missing))))
	}
	if (len(missing) > 0 || len(changed) > 0) && !skipMissing {
		return withCode(ExitApproval, fmt.Errorf("plan is stale: %s (--skip-missing goes on without them)%s", staleText(missing, changed), unseenNote(src, len(missing))))
	}
	return nil
}

// restartNeverStarted removes a journal whose run never started (its
// run-start record torn by a crash, before anything moved), so that apply
// starts the run again, as resume advises for it.
func restartNeverStarted(w io.Writer, journalPath string) error {
	never, err := redrive.NeverStarted(journalPath)
	if errors.Is(err, os.ErrNotExist) || (err == nil && !never) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.Remove(journalPath); err != nil {
		return err
	}
	fmt.Fprintf(w, "journal %s holds no complete record: a crash tore its run-start before anything was moved; starting the run again\n", journalPath)
	return nil
}

// unseenNote says, when entries are missing and the scan could not see
// some messages (SQS: in flight, held by another reader or by a killed
// scan or move), that those may be the missing ones.
func unseenNote(src backend.Source, missing int) string {
	u, ok := src.(unseenCounter)
	if !ok || missing == 0 || u.Unseen() == 0 {
		return ""
	}
	return fmt.Sprintf("; %d messages were in flight and not seen (another reader, or a killed dlqctl scan or move, holds them): the missing entries may be among them, so retry once their visibility timeout has run out", u.Unseen())
}

func staleText(missing, changed []redrive.Entry) string {
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("%s no longer in the DLQ (%s)", entries(len(missing)), entryIDs(missing)))
	}
	if len(changed) > 0 {
		parts = append(parts, fmt.Sprintf("%s with another fingerprint now (%s)", entries(len(changed)), entryIDs(changed)))
	}
	return strings.Join(parts, "; ")
}

func entryIDs(es []redrive.Entry) string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return firstIDs(ids, 10)
}

// engine builds the redrive engine for plan over src.
func (f *Factory) engine(ctx context.Context, src backend.Source, plan *redrive.Plan, effectsURL string) (*redrive.Engine, func(), error) {
	mover, ok := src.(backend.Mover)
	if !ok {
		return nil, nil, usageErrorf("%s: this backend cannot move entries", src)
	}
	eng := &redrive.Engine{Source: src, Mover: mover, Now: f.Now, Observer: f.runObserver(plan), Crash: f.CrashHook}
	closeFn := func() {}
	if plan.Kind == redrive.KindRedrive {
		if plan.Params.Rate > 0 {
			eng.Limiter = rate.NewLimiter(rate.Limit(plan.Params.Rate), plan.Params.Burst)
		}
		if plan.Params.Effects != "" {
			url := plan.Params.Effects
			if effectsURL != "" {
				url = effectsURL
			}
			probe, err := f.openProbe(ctx, url, plan.Params.EffectsQuery)
			if err != nil {
				return nil, nil, err
			}
			if probe.String() != plan.Params.Effects {
				probe.Close()
				return nil, nil, usageErrorf("--effects %s is not the plan's %s", probe, plan.Params.Effects)
			}
			eng.Probe = probe
			closeFn = func() { probe.Close() }
		}
	}
	return eng, closeFn, nil
}

// finishRun runs the engine and turns the outcome into output and an exit code.
func (f *Factory) finishRun(ctx context.Context, eng *redrive.Engine, st *redrive.State, journalPath string, hint hintFlags) error {
	if v, ok := eng.Observer.(*runView); ok {
		v.begin(st)
		v.watch(eng, time.Duration(st.Plan.Params.Settle))
	}
	runErr := eng.Run(ctx, st)
	hint.pastGate = st.Status == redrive.StatusHalted
	cmdline := f.resumeCommand(st.Plan.Kind, journalPath, hint)
	doc := f.liveRunDoc(st, journalPath)
	if doc.Resume != "" {
		doc.Resume = cmdline
	}
	doc.Needs = f.secretNotes(st.Plan)
	if err := f.printRun(doc); err != nil {
		return err
	}
	resume := "\n" + shellLines(f.secretNotes(st.Plan), cmdline)
	switch {
	case errors.Is(runErr, redrive.ErrDeadline):
		return withCode(ExitError, fmt.Errorf("--timeout reached; stopped after the step in flight, the journal is consistent. Resume with:%s", resume))
	case errors.Is(runErr, redrive.ErrInterrupted):
		return withCode(ExitInterrupted, fmt.Errorf("interrupted after the step in flight; the journal is consistent. Resume with:%s", resume))
	case runErr != nil:
		return withCode(ExitError, fmt.Errorf("%w\nthe journal is consistent. Resume with:%s", runErr, resume))
	case st.Status == redrive.StatusHalted:
		return f.halted(ctx, eng.Source, st, doc, runPlanPath(st, ""), journalPath, hint)
	case doc.Gone+doc.Skipped+doc.Failed > 0:
		retry := ""
		if doc.Failed > 0 {
			retry = "; try the failed ones again with:\n" + shellLines(f.secretNotes(st.Plan), cmdline+" --retry-failed")
		}
		return withCode(ExitPartial, fmt.Errorf("moved %d; not moved: %d gone from the DLQ, %d changed, %d failed (see %s)%s", doc.Moved, doc.Gone, doc.Skipped, doc.Failed, journalPath, retry))
	}
	if advice := f.cameBackAdvice(ctx, eng.Source, st, runPlanPath(st, ""), journalPath); advice != "" {
		// The gates let them pass (--max-failed-ratio), but they are in
		// the DLQ again.
		fmt.Fprintln(f.IO.ErrOut, "dlqctl: note: "+strings.TrimPrefix(advice, "\n"))
	}
	return nil
}

// noteWeakMoves says where the backend cannot move to a destination as
// strongly as usual (Redis Cluster: DLQ and destination in different hash
// slots take a journaled two-step move instead of one atomic script).
func noteWeakMoves(w io.Writer, src backend.Source, plan *redrive.Plan) {
	n, ok := src.(backend.MoveNoter)
	if !ok {
		return
	}
	seen := map[string]bool{}
	for e := range plan.Entries.All() {
		if e.Dest != "" && !seen[e.Dest] {
			seen[e.Dest] = true
			if note := n.MoveNote(e.Dest); note != "" {
				fmt.Fprintln(w, "dlqctl: note: "+note)
			}
		}
	}
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return fmt.Sprintf("%x", b)
}
