package cmd

import (
	"context"
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
			recs, err := redrive.ReadJournal(args[0])
			if err != nil {
				return usageErrorf("%v", err)
			}
			st := redrive.Replay(recs)
			ro := f.reportOptions()
			if !ro.Format.IsJSON() {
				if err := writeBatches(f.IO.Out, st.Batches, ro); err != nil {
					return err
				}
			}
			return f.printRun(journalRunDoc(st, args[0], recs))
		},
	}
}

type resumeOptions struct {
	pastGate bool
	effects  string
}

func newResumeCmd(f *Factory, kind string) *cobra.Command {
	o := &resumeOptions{}
	c := &cobra.Command{
		Use:   "resume JOURNAL",
		Short: "Continue a run without repeating any completed move",
		Long: `Continue an interrupted or failed run from its journal. Confirmed moves are
never repeated; an entry whose move outcome is unknown is checked against the
DLQ (Redis, dir: still there means not moved) or sent again with the same
identity (Pulsar) and journaled as ambiguous. A run halted by a gate is not
resumed unless --past-gate says the cause was dealt with.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := wantJournal(args[0], kind); err != nil {
				return err
			}
			return runResume(c.Context(), f, args[0], o)
		},
	}
	c.Flags().BoolVar(&o.pastGate, "past-gate", false, "resume a run that a reconciliation gate halted")
	if kind == redrive.KindRedrive {
		c.Flags().StringVar(&o.effects, "effects", "", "the effects URL with its password, when the plan's has one hidden")
	}
	return c
}

func runResume(ctx context.Context, f *Factory, path string, o *resumeOptions) error {
	recs, err := redrive.ReadJournal(path)
	if err != nil {
		return usageErrorf("%v", err)
	}
	st := redrive.Replay(recs)
	if err := st.Plan.Verify(); err != nil {
		return withCode(ExitApproval, fmt.Errorf("journal %s: %w", path, err))
	}
	switch st.Status {
	case redrive.StatusCompleted:
		fmt.Fprintf(f.IO.ErrOut, "run %s is complete; nothing to resume\n", st.RunID)
		return f.printRun(runDoc(st, path))
	case redrive.StatusHalted:
		if !o.pastGate {
			return withCode(ExitGate, fmt.Errorf("run %s was halted by the %s gate; resume with --past-gate once the cause is dealt with", st.RunID, st.HaltedBy))
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
	eng, closeEng, err := f.engine(ctx, s.src, st.Plan, o.effects)
	if err != nil {
		return err
	}
	defer closeEng()
	j, err := redrive.OpenJournal(path, f.Now)
	if err != nil {
		return err
	}
	defer j.Close()
	eng.Journal = j
	if err := eng.Resume(st, f.identity("")); err != nil {
		return err
	}
	f.noteCrossSlot(s.src, st.Plan)
	fmt.Fprintf(f.IO.ErrOut, "resuming run %s from %s\n", st.RunID, path)
	return f.finishRun(ctx, eng, st, path)
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
	if !o.yes {
		fmt.Fprintf(f.IO.ErrOut, "\n%s %s? Only \"yes\" is accepted: ", strings.ToUpper(kind[:1])+kind[1:], entries(len(plan.Entries)))
		var answer string
		fmt.Fscanln(f.IO.In, &answer)
		if answer != "yes" {
			return withCode(ExitApproval, fmt.Errorf("not confirmed; nothing was changed"))
		}
	}
	if err := redrive.WritePlan(planPath, plan); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	journal := firstNonEmpty(o.journal, redrive.DefaultJournalPath(planPath))
	return f.applyPlan(ctx, plan, planPath, journal, nil, false, "")
}
