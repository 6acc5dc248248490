package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
	// Runner checks the approved plan against the DLQ and runs it.
	Runner planRunner

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
			o.Plan, o.ReadPlan, o.PlanApprovals, o.ApprovalPolicy = args[0], planFiles{f.Getenv}.readPlanFor, planApprovals, approvalSettingsFor(f).approvalPolicy
			o.Runner = planRunnerFor(f)
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
	if o.Runner.Source == "" {
		// None given: the plan's own, as resume takes the journal's.
		o.Runner.Source = plan.Source
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
	return o.Runner.apply(ctx, approvedRun{plan: plan, planPath: path, journalPath: journal, approvals: approvals, key: key,
		skipMissing: o.skipMissing, effectsURL: o.effects, hint: hintFlags{keys: o.keys}})
}

// planRunner starts the run of an approved plan: what apply and the
// one-step forms do once a plan may run. The run is redrive's
// (redrive.Runner.Apply); what is left here is on which source and by
// whom, and how its outcome reads.
type planRunner struct {
	Runner redrive.Runner
	Out    runOutput
	// Source is the source URL in effect; Started is when the invocation
	// started, which names the run; Applier is who runs it (recorded in
	// the run-start).
	Source  string
	Started time.Time
	Applier string
}

// planRunnerFor is the planRunner of the invocation f: its runner,
// source, clock and output.
func planRunnerFor(f *Factory) planRunner {
	return planRunner{Runner: runnerFor(f), Out: runAdviceFor(f), Source: f.source, Started: f.now(), Applier: identityFrom(f.Getenv)("")}
}

// apply checks the plan against the DLQ and runs it. r.key is the
// approval key the journal is chained with (nil: a signed run, or a
// one-step run without one, whose journal is not chained).
func (p planRunner) apply(ctx context.Context, r approvedRun) error {
	ran, err := p.Runner.Apply(ctx, redrive.ApplyRequest{Plan: r.plan, PlanPath: r.planPath, JournalPath: r.journalPath,
		Source: p.Source, Started: p.Started, AppliedBy: p.Applier, Approvals: r.approvals, Key: r.key,
		SkipMissing: r.skipMissing, EffectsURL: r.effectsURL})
	var started *redrive.StartedError
	var stale *redrive.StaleError
	switch {
	case errors.As(err, &started):
		return p.Out.startedAlready(ctx, r.plan, r.planPath, started, r.hint)
	case errors.As(err, &stale):
		return staleRefusal(r.plan, r.journalPath, stale)
	case err != nil:
		return busyOr(err)
	}
	return p.Out.finishRun(ctx, ran, r.journalPath, r.hint)
}

// staleRefusal is the error for a plan some of whose entries left the
// DLQ or changed: with every entry gone, was it applied already; else
// which ones, and that --skip-missing goes on without them.
func staleRefusal(plan *redrive.Plan, journalPath string, e *redrive.StaleError) error {
	missing, changed := e.Missing, e.Changed
	if len(missing) == plan.Entries.Len() && len(missing) > 0 {
		// --skip-missing would go on with nothing.
		return withCode(ExitApproval, fmt.Errorf("plan is stale: none of its %s is in the DLQ any more; was it applied already (with another --journal than %s)? Its journal's run: dlqctl %s status JOURNAL%s", entries(len(missing)), journalPath, plan.Kind, unseenNote(e.Unseen, len(missing))))
	}
	return withCode(ExitApproval, fmt.Errorf("plan is stale: %s (--skip-missing goes on without them)%s", staleText(missing, changed), unseenNote(e.Unseen, len(missing))))
}

// unseenNote says, when entries are missing and the scan could not see
// some messages (SQS: in flight, held by another reader or by a killed
// scan or move), that those may be the missing ones.
func unseenNote(unseen int64, missing int) string {
	if missing == 0 || unseen == 0 {
		return ""
	}
	return fmt.Sprintf("; %d messages were in flight and not seen (another reader, or a killed dlqctl scan or move, holds them): the missing entries may be among them, so retry once their visibility timeout has run out", unseen)
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

// finishRun says how a run went: it prints the run document, turns the
// outcome into an exit code with the advice that goes with it, and then
// says what failed in giving the DLQ lease back.
func (a runAdvice) finishRun(ctx context.Context, ran *redrive.Ran, journalPath string, hint hintFlags) error {
	return redrive.AfterRelease(a.io.ErrOut, a.runOutcome(ctx, ran.State, ran.Err, journalPath, hint), ran.Release)
}

// runOutcome is the run document and the error of a run that ended with
// runErr (nil when it ended by itself).
func (a runAdvice) runOutcome(ctx context.Context, st *redrive.State, runErr error, journalPath string, hint hintFlags) error {
	hint.pastGate = st.Status == redrive.StatusHalted
	cmdline := a.lines.resumeCommand(st.Plan.Kind, journalPath, hint)
	resume := "\n" + shellLines(a.lines.secretNotes(st.Plan), cmdline)
	doc := a.liveRunDoc(st, journalPath)
	if doc.Resume != "" {
		doc.Resume = cmdline
	}
	doc.Needs = a.lines.secretNotes(st.Plan)
	if err := a.printRun(doc); err != nil {
		return err
	}
	switch {
	case errors.Is(runErr, redrive.ErrDeadline):
		return withCode(ExitError, fmt.Errorf("--timeout reached; stopped after the step in flight, the journal is consistent. Resume with:%s", resume))
	case errors.Is(runErr, redrive.ErrInterrupted):
		return withCode(ExitInterrupted, fmt.Errorf("interrupted after the step in flight; the journal is consistent. Resume with:%s", resume))
	case runErr != nil:
		return withCode(ExitError, fmt.Errorf("%w\nthe journal is consistent. Resume with:%s", runErr, resume))
	case st.Status == redrive.StatusHalted:
		return a.haltError(ctx, st, doc, runPlanPath(st, ""), journalPath, hint)
	case doc.Gone+doc.Skipped+doc.Failed > 0:
		retry := ""
		if doc.Failed > 0 {
			retry = "; try the failed ones again with:\n" + shellLines(a.lines.secretNotes(st.Plan), cmdline+" --retry-failed")
		}
		return withCode(ExitPartial, fmt.Errorf("moved %d; not moved: %d gone from the DLQ, %d changed, %d failed (see %s)%s", doc.Moved, doc.Gone, doc.Skipped, doc.Failed, journalPath, retry))
	}
	if advice := a.cameBackAdvice(ctx, st, runPlanPath(st, ""), journalPath); advice != "" {
		// The gates let them pass (--max-failed-ratio), but they are in
		// the DLQ again.
		fmt.Fprintln(a.io.ErrOut, "dlqctl: note: "+strings.TrimPrefix(advice, "\n"))
	}
	return nil
}
