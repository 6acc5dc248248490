package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/trust"
)

// confirm asks for the literal "yes" on a terminal, unless yes was given.
func (s *IOStreams) confirm(ctx context.Context, yes bool, prompt string) error {
	if yes {
		return nil
	}
	if !s.CanPrompt() {
		return usageErrorf("not on a terminal: give --yes to go on without a prompt")
	}
	fmt.Fprintf(s.ErrOut, "\n%s", prompt)
	answer, err := readAnswer(ctx, s.In)
	if err != nil {
		fmt.Fprintln(s.ErrOut)
		return withCode(ExitInterrupted, errors.New("interrupted at the prompt; nothing was changed"))
	}
	if answer != "yes" {
		return withCode(ExitApproval, fmt.Errorf("not confirmed; nothing was changed"))
	}
	return nil
}

// oneStepOptions is what `dlqctl redrive` and `dlqctl resolve` (the
// one-step forms) plan and run and with what: the plan flags, the policy
// in effect, and the steps they call out to, which a test may give as
// its own.
type oneStepOptions struct {
	IO *IOStreams
	// Policy is the config's approval policy; Config names where it
	// comes from, for messages.
	Policy trust.Policy
	Config string
	// Started is when the invocation started, which names a plan file
	// written without --out.
	Started time.Time

	// OpenSession opens the source in effect with the category rules in
	// effect.
	OpenSession func(context.Context) (*session, error)
	// MakePlan builds the plan from the flags against the open source.
	MakePlan func(context.Context, *session, *planFlags) (*redrive.Plan, error)
	// PrintPlan shows what the plan written to path will do.
	PrintPlan func(p *redrive.Plan, path string) error
	// Confirm asks for "yes" on a terminal unless yes was given.
	Confirm func(ctx context.Context, yes bool, prompt string) error
	// ApprovalKey is the HMAC approval key in effect (nil: none).
	ApprovalKey func(keyFile string) ([]byte, error)
	// Runner checks the plan against the DLQ and runs it.
	Runner planRunner

	plan    planFlags
	yes     bool
	dryRun  bool
	journal string
}

// runOneStep plans, shows the plan, asks for "yes" and runs it, unless the
// policy requires an approval.
func runOneStep(ctx context.Context, o *oneStepOptions) error {
	kind := o.plan.kind
	if rule := trust.RequiredBy(o.Policy); rule != "" && !o.dryRun {
		return withCode(ExitApproval, fmt.Errorf("%s is set in %s: use dlqctl %s plan, then approve, then apply", rule, o.Config, kind))
	}
	if !o.yes && !o.dryRun && !o.IO.CanPrompt() {
		return usageErrorf("not on a terminal: give --yes to %s without a prompt (or --dry-run to only see the plan)", kind)
	}
	planPath := firstNonEmpty(o.plan.out, fmt.Sprintf("%s-%s.plan.json", kind, o.Started.Format("20060102T150405Z")))
	if !o.dryRun {
		if err := checkPlanOut(planPath); err != nil {
			return err
		}
	}
	s, err := o.OpenSession(ctx)
	if err != nil {
		return err
	}
	plan, err := o.MakePlan(ctx, s, &o.plan)
	s.src.Close()
	if err != nil {
		return err
	}
	if o.dryRun {
		fmt.Fprintln(o.IO.ErrOut, "(dry run) nothing will be changed")
		return o.PrintPlan(plan, "(dry run, not written)")
	}
	if plan.Entries.Len() == 0 {
		if err := o.PrintPlan(plan, notWritten); err != nil {
			return err
		}
		fmt.Fprintf(o.IO.ErrOut, "nothing to do: the selection takes no entry%s\n", leftOutNote(plan))
		return nil
	}
	if err := o.PrintPlan(plan, planPath); err != nil {
		return err
	}
	if err := o.Confirm(ctx, o.yes, fmt.Sprintf("%s %s? Only \"yes\" is accepted: ", strings.ToUpper(kind[:1])+kind[1:], entries(plan.Entries.Len()))); err != nil {
		return err
	}
	if err := redrive.WritePlan(planPath, plan); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	journal := firstNonEmpty(o.journal, redrive.DefaultJournalPath(planPath))
	// Signed when an approval key is in effect, so that its resume can
	// check the journal as it checks an approved run's.
	key, err := o.ApprovalKey("")
	if err != nil {
		return err
	}
	// The effects URL as typed: the plan keeps it with its password hidden.
	return o.Runner.apply(ctx, approvedRun{plan: plan, planPath: planPath, journalPath: journal, key: key, effectsURL: o.plan.effects, hint: hintFlags{yes: len(key) == 0}})
}
