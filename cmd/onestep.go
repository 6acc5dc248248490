package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dlqctl/dlqctl/redrive"
)

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

type oneStepOptions struct {
	plan    planFlags
	yes     bool
	dryRun  bool
	journal string
}

func runOneStep(ctx context.Context, f *Factory, o *oneStepOptions) error {
	kind := o.plan.kind
	if rule := f.approvalRequired(); rule != "" && !o.dryRun {
		return withCode(ExitApproval, fmt.Errorf("%s is set in %s: use dlqctl %s plan, then approve, then apply", rule, f.config, kind))
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
	if plan.Entries.Len() == 0 {
		fmt.Fprintln(f.IO.ErrOut, "nothing to do: no entry selected")
		return nil
	}
	if err := f.confirm(ctx, o.yes, fmt.Sprintf("%s %s? Only \"yes\" is accepted: ", strings.ToUpper(kind[:1])+kind[1:], entries(plan.Entries.Len()))); err != nil {
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
