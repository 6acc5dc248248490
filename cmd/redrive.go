package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/redrive"
)

func newRedriveCmd(f *Factory) *cobra.Command {
	return newMoveCmd(f, redrive.KindRedrive, nil)
}

func newResolveCmd(f *Factory) *cobra.Command {
	return newMoveCmd(f, redrive.KindResolve, nil)
}

// newMoveCmd builds `redrive` or `resolve` with its subcommands: both are
// plan → approve → apply with a journal; resolve has no destination, rate
// or effects, and archives each envelope in the journal before removing it.
// runF, when not nil, runs instead of runOneStep (the one-step form).
func newMoveCmd(f *Factory, kind string, runF func(context.Context, *oneStepOptions) error) *cobra.Command {
	one := &oneStepOptions{plan: planFlags{kind: kind}}
	short := "Put dead letters back on their origin in reconciled batches: plan, approve, apply (or one step)"
	if kind == redrive.KindResolve {
		short = "End entries that retrying cannot fix, each archived in the journal: plan, approve, apply (or one step)"
	}
	c := &cobra.Command{
		Use:   kind,
		Short: short,
		Long: fmt.Sprintf(`%s in one step for the ungated case: plan, show it, ask for the literal
"yes" on a terminal (or take --yes), and apply. Refused when the config sets
policy.require_approval: use "dlqctl %s plan", "approve" and "apply" then.
--dry-run prints the plan and changes nothing.`, strings.ToUpper(kind[:1])+kind[1:], kind),
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			one.IO, one.Policy, one.Config, one.Started = f.IO, f.config.Policy, f.config.String(), f.now()
			one.OpenSession, one.MakePlan, one.PrintPlan, one.Confirm = f.openSession, planMakerFor(f).makePlan, planReviewerFor(f).printPlan, f.IO.confirm
			one.ApprovalKey, one.Runner = approvalSettingsFor(f).approvalKey, planRunnerFor(f)
			if runF != nil {
				return runF(c.Context(), one)
			}
			return runOneStep(c.Context(), one)
		},
	}
	one.plan.register(c)
	c.Flags().BoolVar(&one.yes, "yes", false, "do not ask; needed when not on a terminal")
	c.Flags().BoolVar(&one.dryRun, "dry-run", false, "print the plan and change nothing")
	c.Flags().StringVar(&one.journal, "journal", "", "journal file (default: next to the plan)")
	c.Flags().StringVar(&one.plan.out, "out", "", "where to keep the plan (default: "+kind+"-TIME.plan.json here)")
	c.AddCommand(refusingMissing(f, newPlanCmd(f, kind, nil), false), newPlanShowCmd(f, kind, nil), newApproveCmd(f, kind, nil), newApplyCmd(f, kind, nil), newStatusCmd(f, kind, nil), newResumeCmd(f, kind, nil))
	return refusingMissing(f, c, false)
}

// planFiles read plans and the plans of journals under the plan
// commands' soft memory limit, which getenv may change (boundHeap).
type planFiles struct {
	getenv func(string) string
}

// readPlanFor reads a plan and refuses a tampered one (exit 5).
func (pf planFiles) readPlanFor(path, kind string) (*redrive.Plan, error) {
	boundHeap(pf.getenv)
	if err := wantPlan(path, kind); err != nil {
		return nil, err
	}
	plan, err := redrive.ReadPlan(path)
	if err != nil {
		return nil, withCode(ExitApproval, err)
	}
	if plan.Kind != kind {
		return nil, usageErrorf("%s is a %s plan; use dlqctl %s", path, plan.Kind, plan.Kind)
	}
	if err := plan.Verify(); err != nil {
		return nil, withCode(ExitApproval, fmt.Errorf("%s: %w", path, err))
	}
	return plan, nil
}
