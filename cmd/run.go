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

// RunDoc is dlqctl.run/v1: where a redrive or resolve run stands.
type RunDoc struct {
	Schema     string `json:"schema"`
	Kind       string `json:"kind"`
	RunID      string `json:"run_id"`
	Journal    string `json:"journal"`
	PlanDigest string `json:"plan_digest"`
	Reason     string `json:"reason"`
	PlannedBy  string `json:"planned_by"`
	ApprovedBy string `json:"approved_by,omitempty"`
	AppliedBy  string `json:"applied_by"`
	Status     string `json:"status"`
	// StartedAt is the run's first start; EndedAt its last end (nil while
	// it runs or after a crash), and DurationSeconds the time between.
	StartedAt       *time.Time            `json:"started_at"`
	EndedAt         *time.Time            `json:"ended_at"`
	DurationSeconds *float64              `json:"duration_seconds"`
	Verdicts        map[string]int        `json:"verdicts"`
	Planned         int                   `json:"planned"`
	Moved           int                   `json:"moved"`
	Gone            int                   `json:"gone"`
	Skipped         int                   `json:"skipped"`
	Failed          int                   `json:"failed"`
	Remaining       int                   `json:"remaining"`
	Batches         []redrive.BatchReport `json:"batches"`
	HaltedBy        string                `json:"halted_by"`
	HaltReason      string                `json:"halt_reason,omitempty"`
	Resume          string                `json:"resume_command,omitempty"`
}

func runDoc(st *redrive.State, journal string) RunDoc {
	d := RunDoc{
		Schema: "dlqctl.run/v1", Kind: st.Plan.Kind, RunID: st.RunID, Journal: journal, PlanDigest: st.Plan.Digest,
		Reason: st.Plan.Reason, PlannedBy: st.Plan.PlannedBy, AppliedBy: st.Start.AppliedBy,
		Status: st.Status, Planned: len(st.Plan.Entries), HaltedBy: st.HaltedBy, Batches: []redrive.BatchReport{},
	}
	if d.Status == "" {
		// A journal that ends without run-end: the process died mid-run.
		d.Status = redrive.StatusInterrupted
	}
	if st.Start.Approval != nil {
		d.ApprovedBy = st.Start.Approval.By
	}
	d.Moved, d.Gone, d.Skipped, d.Failed = st.Counts()
	d.Remaining = d.Planned - d.Moved - d.Gone - d.Skipped
	for _, b := range st.Batches {
		b.Events = nil // per-event verdicts stay in the journal
		d.Batches = append(d.Batches, b)
		if b.Gate != redrive.GatePass {
			d.HaltReason = b.GateReason
		}
	}
	if d.Status != redrive.StatusCompleted {
		d.Resume = fmt.Sprintf("dlqctl %s resume %s", d.Kind, journal)
	}
	d.fillTotals(st)
	return d
}

func newStatusCmd(f *Factory, kind string) *cobra.Command {
	return &cobra.Command{
		Use:   "status JOURNAL",
		Short: "Where a run stands: batches, moved, verdicts, the gate that stopped it",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := wantJournal(args[0], kind); err != nil {
				return err
			}
			st, _, err := redrive.ReplayFile(args[0], nil)
			if err != nil {
				return usageErrorf("%v", err)
			}
			doc := journalRunDoc(st, args[0])
			if doc.Resume != "" {
				doc.Resume = f.resumeCommand(kind, args[0], hintFlags{pastGate: st.Status == redrive.StatusHalted, yes: st.Start.Approval == nil && st.Start.MAC == ""})
			}
			ro := f.reportOptions()
			if !ro.Format.IsJSON() {
				if err := writeBatches(f.IO.Out, st.Batches, ro); err != nil {
					return err
				}
			}
			return f.printRun(doc)
		},
	}
}

type resumeOptions struct {
	pastGate    bool
	retryFailed bool
	effects     string
	keys        keyFlags
	distinct    bool
	plan        string
	yes         bool
}

func newResumeCmd(f *Factory, kind string) *cobra.Command {
	o := &resumeOptions{}
	c := &cobra.Command{
		Use:   "resume JOURNAL",
		Short: "Continue a run without repeating any completed move",
		Long: `Continue an interrupted or failed run from its journal, on the source the
journal names (--source only when its URL needs a password). The run's
approval is checked as apply checks it, and the journal's signature chain
with the same key: an edited or hand-written journal is refused (exit 5).
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
			return runResume(c.Context(), f, kind, args[0], o)
		},
	}
	c.Flags().BoolVar(&o.pastGate, "past-gate", false, "resume a run that a reconciliation gate halted (needs an approval given after the halt)")
	c.Flags().BoolVar(&o.retryFailed, "retry-failed", false, "try the entries whose move failed once more, each once")
	c.Flags().StringVar(&o.plan, "plan", "", "the plan file, for approvals given after the run started (default: the path the journal recorded)")
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
	// fresh is the approval to record when it is not the run-start's.
	fresh *redrive.Approval
}

// trustRun reads the journal and checks what resume must before it
// believes it: the plan's digest, the run's approval (exactly as apply
// checks it; after a halt, one given after it) and the journal's chain.
// The journal is streamed, never held whole.
func (f *Factory) trustRun(ctx context.Context, kind, path string, o *resumeOptions) (*trustedRun, error) {
	start, err := redrive.ReadRunStart(path)
	if errors.Is(err, redrive.ErrNeverStarted) {
		return nil, usageErrorf("%v; start it with: dlqctl %s apply PLAN --journal %s", err, kind, shellQuote(path))
	}
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	if start.Plan.Kind != kind {
		return nil, usageErrorf("%s is the journal of a %s run; use dlqctl %s resume", path, start.Plan.Kind, start.Plan.Kind)
	}
	if err := start.Plan.Verify(); err != nil {
		return nil, withCode(ExitApproval, fmt.Errorf("journal %s: %w", path, err))
	}
	pol, err := f.approvalPolicy(o.keys, o.distinct)
	if err != nil {
		return nil, err
	}
	signed := start.MAC != ""
	tr := &trustedRun{}
	switch {
	case start.Approval != nil:
		// The approval's signature first, so that a wrong key is named as such.
		sig := pol
		sig.Now, sig.DistinctApprover = time.Time{}, false
		check := *start.Plan
		check.Approvals = []redrive.Approval{*start.Approval}
		if _, err := check.CheckApproval(sig); err != nil {
			return nil, withCode(ExitApproval, fmt.Errorf("journal %s: the run's approval: %w", path, err))
		}
		if tr.key, err = pol.KeyOf(start.Approval.By); err != nil {
			return nil, withCode(ExitApproval, err)
		}
		if !signed {
			return nil, withCode(ExitApproval, fmt.Errorf("journal %s: %w, but its run has an approval: a journal made by dlqctl is signed; resume refuses it", path, redrive.ErrUnsigned))
		}
	case signed:
		// A one-step run signed with the approval key in effect then.
		if tr.key, err = pol.KeyOf(""); err != nil {
			return nil, withCode(ExitApproval, fmt.Errorf("journal %s is signed: %w", path, err))
		}
	}
	var jkey []byte
	if tr.key != nil {
		jkey = redrive.JournalKey(tr.key, start.RunID)
	}
	st, v, err := redrive.ReplayFile(path, jkey)
	if err != nil {
		if errors.Is(err, redrive.ErrForged) || errors.Is(err, redrive.ErrUnsigned) {
			return nil, withCode(ExitApproval, fmt.Errorf("%w; resume refuses it (a journal made by dlqctl verifies with the approval key the run started under)", err))
		}
		return nil, usageErrorf("%v", err)
	}
	tr.st, tr.v = st, v
	return tr, nil
}

// approveGoingOn checks that the run may go on: under an approval that
// verifies now (after a halt, one given since), or, for a one-step run,
// what the one-step command asked.
func (f *Factory) approveGoingOn(ctx context.Context, path string, tr *trustedRun, o *resumeOptions) error {
	st := tr.st
	pol, err := f.approvalPolicy(o.keys, o.distinct)
	if err != nil {
		return err
	}
	halted := st.Status == redrive.StatusHalted
	if halted {
		pol.After = st.HaltedAt
	}
	start := st.Start.Approval
	if start == nil && !halted {
		if f.config.Policy.RequireApproval {
			return withCode(ExitApproval, fmt.Errorf("journal %s is of a run without an approval, and policy.require_approval is set in %s", path, f.config))
		}
		if tr.key == nil {
			return f.confirm(ctx, o.yes, fmt.Sprintf("Resume run %s (%s, not signed: no approval key was in effect)? Only \"yes\" is accepted: ", st.RunID, entries(len(st.Plan.Entries))))
		}
		return nil
	}
	// The approvals the run may go on under: its own, those resumes
	// recorded, and those given in the plan file since.
	cands := append([]redrive.Approval(nil), st.Approvals...)
	planPath := firstNonEmpty(o.plan, st.Start.PlanPath)
	if p, perr := redrive.ReadPlan(planPath); perr == nil && p.Digest == st.Plan.Digest {
		cands = append(cands, p.Approvals...)
	} else if o.plan != "" {
		if perr == nil {
			perr = fmt.Errorf("its digest %s is not the run's %s", p.Digest, st.Plan.Digest)
		}
		return withCode(ExitApproval, fmt.Errorf("--plan %s: %v", o.plan, perr))
	}
	check := *st.Plan
	check.Approvals = cands
	a, err := check.CheckApproval(pol)
	if err != nil {
		return withCode(ExitApproval, fmt.Errorf("run %s: not approved to go on: %w", st.RunID, err))
	}
	if start == nil || a != *start {
		tr.fresh = &a
	}
	return nil
}

// confirm asks for the literal "yes" on a terminal, unless yes was given.
func (f *Factory) confirm(ctx context.Context, yes bool, prompt string) error {
	if yes {
		return nil
	}
	if !f.IO.CanPrompt() {
		return usageErrorf("not on a terminal: give --yes to go on without a prompt")
	}
	fmt.Fprintf(f.IO.ErrOut, "\n%s", prompt)
	answer, err := readAnswer(ctx, f.IO.In)
	if err != nil {
		fmt.Fprintln(f.IO.ErrOut)
		return withCode(ExitInterrupted, errors.New("interrupted at the prompt; nothing was changed"))
	}
	if answer != "yes" {
		return withCode(ExitApproval, fmt.Errorf("not confirmed; nothing was changed"))
	}
	return nil
}

func runResume(ctx context.Context, f *Factory, kind, path string, o *resumeOptions) error {
	unlock, err := f.lockExistingJournal(path)
	if err != nil {
		return err
	}
	defer unlock()
	tr, err := f.trustRun(ctx, kind, path, o)
	if err != nil {
		return err
	}
	st := tr.st
	hint := hintFlags{keys: o.keys}
	switch {
	case st.Status == redrive.StatusCompleted && !(o.retryFailed && hasFailed(st)):
		fmt.Fprintf(f.IO.ErrOut, "run %s is complete; nothing to resume\n", st.RunID)
		return f.printRun(runDoc(st, path))
	case st.Status == redrive.StatusHalted && !o.pastGate:
		hint.pastGate = true
		return withCode(ExitGate, fmt.Errorf("run %s was halted by the %s gate; once the cause is dealt with, approve the plan again (dlqctl %s approve PLAN --again) and go on with: %s",
			st.RunID, st.HaltedBy, kind, f.resumeCommand(kind, path, hint)))
	}
	if err := f.approveGoingOn(ctx, path, tr, o); err != nil {
		return err
	}
	if f.source == "" {
		if f.source, err = journalSource(st.Start.Source); err != nil {
			return err
		}
	}
	s, err := f.openSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	if s.src.String() != st.Plan.Source {
		return usageErrorf("the run was on %s, but the source is %s", st.Plan.Source, s.src)
	}
	ctx, release, err := f.leaseDLQ(ctx, s.src, st.RunID)
	if err != nil {
		return err
	}
	defer release()
	eng, closeEng, err := f.engine(ctx, s.src, st.Plan, o.effects)
	if err != nil {
		return err
	}
	defer closeEng()
	var j *redrive.Journal
	if tr.key != nil {
		j, err = redrive.OpenVerifiedJournal(path, f.Now, redrive.JournalKey(tr.key, st.RunID), tr.v)
	} else {
		j, err = redrive.OpenJournal(path, f.Now)
	}
	if err != nil {
		return err
	}
	defer j.Close()
	eng.Journal = j
	if err := eng.Resume(st, f.identity(""), tr.fresh); err != nil {
		return err
	}
	if o.retryFailed {
		if n := st.RetryFailed(); n > 0 {
			fmt.Fprintf(f.IO.ErrOut, "trying %s that failed once more\n", entries(n))
		}
	}
	f.noteWeakMoves(s.src, st.Plan)
	fmt.Fprintf(f.IO.ErrOut, "resuming run %s from %s\n", st.RunID, path)
	return f.finishRun(ctx, eng, st, path, hint)
}

func hasFailed(st *redrive.State) bool {
	_, _, _, failed := st.Counts()
	return failed > 0
}

type oneStepOptions struct {
	plan    planFlags
	yes     bool
	dryRun  bool
	journal string
}

func runOneStep(ctx context.Context, f *Factory, o *oneStepOptions) error {
	kind := o.plan.kind
	if f.config.Policy.RequireApproval && !o.dryRun {
		return withCode(ExitApproval, fmt.Errorf("policy.require_approval is set in %s: use dlqctl %s plan, then approve, then apply", f.config, kind))
	}
	if !o.yes && !o.dryRun && !f.IO.CanPrompt() {
		return usageErrorf("not on a terminal: give --yes to %s without a prompt (or --dry-run to only see the plan)", kind)
	}
	s, err := f.openSession(ctx)
	if err != nil {
		return err
	}
	plan, err := f.makePlan(ctx, s, &o.plan)
	s.src.Close()
	if err != nil {
		return err
	}
	planPath := firstNonEmpty(o.plan.out, fmt.Sprintf("%s-%s.plan.json", kind, f.now().Format("20060102T150405Z")))
	if o.dryRun {
		fmt.Fprintln(f.IO.ErrOut, "(dry run) nothing will be changed")
		return f.printPlan(plan, "(dry run, not written)")
	}
	if err := f.printPlan(plan, planPath); err != nil {
		return err
	}
	if len(plan.Entries) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "nothing to do: no entry selected")
		return nil
	}
	if err := f.confirm(ctx, o.yes, fmt.Sprintf("%s %s? Only \"yes\" is accepted: ", strings.ToUpper(kind[:1])+kind[1:], entries(len(plan.Entries)))); err != nil {
		return err
	}
	if err := redrive.WritePlan(planPath, plan); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	journal := firstNonEmpty(o.journal, redrive.DefaultJournalPath(planPath))
	// Signed when an approval key is in effect, so that its resume can
	// check the journal as it checks an approved run's.
	key, err := f.approvalKey("")
	if err != nil {
		return err
	}
	return f.applyPlan(ctx, plan, planPath, journal, nil, key, false, "", hintFlags{yes: len(key) == 0})
}
