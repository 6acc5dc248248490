package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/trust"
)

// resumeOptions is what resume goes on with: the journal, the flags, the
// settings resolved for the invocation (source, approval policy), and the
// steps it calls out to, which a test may give as its own.
type resumeOptions struct {
	IO *IOStreams
	// Kind is redrive or resolve; Journal is the journal file.
	Kind    string
	Journal string
	// Source is the source in effect ("": the one the journal records).
	Source string
	// Policy is the config's approval policy; Config names where it
	// comes from, for messages.
	Policy trust.Policy
	Config string
	Now    func() time.Time
	Getenv func(string) string

	// ApprovalPolicy is the policy approvals are checked against, from the
	// key flags, the environment and the config.
	ApprovalPolicy func(k keyFlags, distinct bool) (redrive.ApprovalPolicy, error)
	// Confirm asks for "yes" on a terminal unless yes was given.
	Confirm func(ctx context.Context, yes bool, prompt string) error
	// Identity is who runs this (the OS user for "").
	Identity func(flag string) string
	// Runner goes on with the run (redrive.Runner.Resume); Out says how it
	// went.
	Runner redrive.Runner
	Out    runOutput

	pastGate    bool
	retryFailed bool
	effects     string
	keys        keyFlags
	distinct    bool
	plan        string
	yes         bool
}

// newResumeCmd builds `redrive resume` or `resolve resume`; runF, when
// not nil, runs instead of runResume.
func newResumeCmd(f *Factory, kind string, runF func(context.Context, *resumeOptions) error) *cobra.Command {
	o := &resumeOptions{Kind: kind}
	c := &cobra.Command{
		Use:   "resume JOURNAL",
		Short: "Continue a run without repeating any completed move",
		Long: `Continue an interrupted or failed run from its journal, on the source the
journal names (--source only when its URL needs a password). The run's
approvals are checked as apply checks them (with those given since, in the
plan file or beside it). An HMAC-approved run's journal must verify its
chain with the same key: an edited or hand-written journal is refused (exit
5). A run approved by SSH signatures has no secret to chain with: its
recorded approvals must verify, and every step its journal says reached a
destination is checked against the DLQ and the destination again.
Confirmed moves are never repeated; an entry whose move outcome is unknown
is checked against the DLQ and the destination (Redis, dir: still in the DLQ
means not moved) or sent again with the same identity (Pulsar) and journaled
as ambiguous. A run halted by a gate goes on only with --past-gate and an
approval given after the halt (approve the plan again); its batches start
again at the first ramp size. --retry-failed tries entries whose move failed
once more.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := wantJournal(args[0], kind); err != nil {
				return err
			}
			o.IO, o.Journal, o.Source, o.Now, o.Getenv = f.IO, args[0], f.source, f.Now, f.Getenv
			o.Policy, o.Config = f.config.Policy, f.config.String()
			approvals := approvalSettingsFor(f)
			o.ApprovalPolicy, o.Confirm, o.Identity = approvals.approvalPolicy, f.IO.confirm, approvals.identity
			o.Runner, o.Out = runnerFor(f), runAdviceFor(f)
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runResume(c.Context(), o)
		},
	}
	c.Flags().BoolVar(&o.pastGate, "past-gate", false, "resume a run that a reconciliation gate halted (needs an approval given after the halt)")
	c.Flags().BoolVar(&o.retryFailed, "retry-failed", false, "try the entries whose move failed once more, each once")
	c.Flags().StringVar(&o.plan, "plan", "", "the run's plan file, checked against the digest the journal records; its approvals given after the run started count (default: the path the journal recorded, then the file of that name next to the journal)")
	c.Flags().BoolVar(&o.distinct, "require-distinct-approver", false, "refuse an approval by the planner (also policy.distinct_approver)")
	c.Flags().BoolVar(&o.yes, "yes", false, "resume a one-step run (one without an approval) without asking")
	o.keys.register(c.Flags())
	if kind == redrive.KindRedrive {
		c.Flags().StringVar(&o.effects, "effects", "", "the effects URL with its password, when the plan's has one hidden")
	}
	return c
}

// trustedRun is a journal that resume may believe, and how to go on
// writing it.
type trustedRun struct {
	st *redrive.State
	// key is the approval key the journal is chained with (nil: an
	// unsigned one-step run), v how far it verified.
	key []byte
	v   redrive.Verified
	// fresh are the approvals to record when they are not the run-start's.
	fresh []redrive.Approval
	// fromFile says the run's plan was read from its plan file (checked
	// by digest), whose approvals are then st.Plan's own.
	fromFile bool
}

// trustRun reads the journal and checks what resume must before it
// believes it: the plan's digest, the run's approval (exactly as apply
// checks it; after a halt, one given after it) and the journal's chain.
// The journal is streamed, never held whole.
func trustRun(o *resumeOptions) (*trustedRun, error) {
	kind, path := o.Kind, o.Journal
	start, err := redrive.ReadRunStart(path)
	if errors.Is(err, redrive.ErrNeverStarted) {
		return nil, usageErrorf("%v; start it with: dlqctl %s apply PLAN --journal %s", err, kind, shellQuote(path))
	}
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	// The run's plan: the file the journal names, checked against the
	// digest it records (or, from journals of earlier versions, the plan
	// the run-start embeds, checked against its own digest).
	boundHeap(o.Getenv)
	plan, err := redrive.LoadRunPlan(start, path, o.plan)
	if err != nil {
		return nil, withCode(ExitApproval, err)
	}
	if plan.Kind != kind {
		return nil, usageErrorf("%s is the journal of a %s run; use dlqctl %s resume", path, plan.Kind, plan.Kind)
	}
	pol, err := o.ApprovalPolicy(o.keys, o.distinct)
	if err != nil {
		return nil, err
	}
	trust, err := plan.TrustRun(start, pol)
	if err != nil {
		if errors.Is(err, redrive.ErrUnsigned) {
			return nil, withCode(ExitApproval, fmt.Errorf("journal %s: %w; resume refuses it", path, err))
		}
		return nil, withCode(ExitApproval, fmt.Errorf("journal %s: %w", path, err))
	}
	tr := &trustedRun{key: trust.Key}
	var jkey []byte
	if tr.key != nil {
		jkey = redrive.JournalKey(tr.key, start.RunID)
	}
	st, v, err := redrive.ReplayFile(path, jkey, plan)
	if err != nil {
		if errors.Is(err, redrive.ErrRunPlan) {
			return nil, withCode(ExitApproval, err)
		}
		if errors.Is(err, redrive.ErrForged) || errors.Is(err, redrive.ErrUnsigned) {
			return nil, withCode(ExitApproval, fmt.Errorf("%w; resume refuses it (a journal made by dlqctl verifies with the approval key the run started under)", err))
		}
		return nil, usageErrorf("%v", err)
	}
	if trust.Unauthenticated {
		// A signed run's journal is not believed where believing it could
		// remove an entry that never reached its destination.
		st.Distrust()
	}
	tr.st, tr.v = st, v
	tr.fromFile = start.Plan == nil
	return tr, nil
}

// approveGoingOn checks that the run may go on (trust.GoOn): under
// approvals that meet the policy now, found in its journal, the plan file
// and beside it; or, for a one-step run, as the one-step command did.
func approveGoingOn(ctx context.Context, tr *trustedRun, o *resumeOptions) error {
	st, path := tr.st, o.Journal
	pol, err := o.ApprovalPolicy(o.keys, o.distinct)
	if err != nil {
		return err
	}
	r := trust.Resumed{Plan: st.Plan, Started: st.Start.RecordedApprovals(), Recorded: st.Approvals, Signed: tr.key != nil}
	if st.Status == redrive.StatusHalted {
		r.HaltedAt = st.HaltedAt
	}
	planPath := firstNonEmpty(o.plan, st.Start.PlanPath)
	if r.Given, err = givenApprovals(tr, o.plan, planPath); err != nil {
		return withCode(ExitApproval, err)
	}
	g, err := trust.GoOn(o.Policy, o.Config, pol, r)
	var refused *trust.NotApproved
	if errors.As(err, &refused) {
		msg := fmt.Sprintf("journal %s (run %s): %v", path, st.RunID, err)
		if refused.PastGate {
			msg += fmt.Sprintf("; going on past a gate needs a fresh approval, given since the halt: dlqctl %s approve %s --again", st.Plan.Kind, shellQuote(firstNonEmpty(planPath, "PLAN")))
		}
		return withCode(ExitApproval, errors.New(msg))
	}
	if g.How == trust.AskYes {
		return o.Confirm(ctx, o.yes, fmt.Sprintf("Resume run %s (%s, not signed: no approval key was in effect)? Only \"yes\" is accepted: ", st.RunID, entries(st.Plan.Entries.Len())))
	}
	tr.fresh = g.Fresh
	return nil
}

// givenApprovals are the approvals given in the run's plan file (read
// already when the run's plan came from it; --plan names another copy,
// which must have the run's digest) and beside it (approve --detach).
func givenApprovals(tr *trustedRun, planFlag, planPath string) ([]redrive.Approval, error) {
	var given []redrive.Approval
	if tr.fromFile {
		given = append(given, tr.st.Plan.Approvals...)
	} else if p, perr := redrive.ReadPlan(planPath); perr == nil && p.Digest == tr.st.Plan.Digest {
		given = append(given, p.Approvals...)
	} else if planFlag != "" {
		if perr == nil {
			perr = fmt.Errorf("its digest %s is not the run's %s", p.Digest, tr.st.Plan.Digest)
		}
		return nil, fmt.Errorf("--plan %s: %v", planFlag, perr)
	}
	if planPath != "" {
		found, err := redrive.ReadDetached(planPath)
		if err != nil {
			return nil, err
		}
		for _, d := range found {
			given = append(given, d.Approval)
		}
	}
	return given, nil
}

// runResume checks that the journal may be believed and the run may go
// on, then goes on with it where it stopped.
func runResume(ctx context.Context, o *resumeOptions) (err error) {
	path := o.Journal
	unlock, err := o.Runner.LockExistingJournal(path)
	if err != nil {
		return busyOr(err)
	}
	defer unlock()
	tr, err := trustRun(o)
	if err != nil {
		return err
	}
	st := tr.st
	hint := hintFlags{keys: o.keys}
	switch {
	case st.Status == redrive.StatusCompleted && !(o.retryFailed && hasFailed(st)):
		fmt.Fprintf(o.IO.ErrOut, "run %s is complete; nothing to resume\n", st.RunID)
		return o.Out.printRun(runDoc(st, path))
	case st.Status == redrive.StatusHalted && (!o.pastGate || nothingLeft(st)):
		// Past the gate there is nothing to go on with when it tripped in
		// the last batch: say so, and what came back, instead of a run
		// that "completes" without moving anything.
		doc := journalRunDoc(st, path)
		if nothingLeft(st) {
			if err := o.Out.printRun(doc); err != nil {
				return err
			}
		}
		return fmt.Errorf("run %s was %w", st.RunID, o.Out.haltError(ctx, st, doc, runPlanPath(st, o.plan), path, hint))
	}
	if err := approveGoingOn(ctx, tr, o); err != nil {
		return err
	}
	return goOn(ctx, tr, o, hint)
}

// goOn goes on with the run on its source (redrive.Runner.Resume):
// the one given, else the one the journal records.
func goOn(ctx context.Context, tr *trustedRun, o *resumeOptions, hint hintFlags) (err error) {
	st, path := tr.st, o.Journal
	source := o.Source
	if source == "" {
		if source, err = journalSource(st.Start.Source); err != nil {
			return err
		}
	}
	ran, err := o.Runner.Resume(ctx, redrive.ResumeRequest{State: st, JournalPath: path, Source: source, Key: tr.key, Verified: tr.v,
		ResumedBy: o.Identity(""), Fresh: tr.fresh, RetryFailed: o.retryFailed, EffectsURL: o.effects})
	if err != nil {
		return busyOr(err)
	}
	return o.Out.finishRun(ctx, ran, path, hint)
}

// nothingLeft says that every entry of the run's plan was moved or left
// out: a resume would move nothing.
func nothingLeft(st *redrive.State) bool {
	moved, gone, skipped, _ := st.Counts()
	return moved+gone+skipped >= st.Plan.Entries.Len()
}

func hasFailed(st *redrive.State) bool {
	_, _, _, failed := st.Counts()
	return failed > 0
}
