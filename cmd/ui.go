package cmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/report"
	"github.com/dlqctl/dlqctl/ui"
)

// uiOptions is what the browser shows and plans with: the plan flags and
// the plan folder, the terminal, and the steps it calls out to, which a
// test may give as its own.
type uiOptions struct {
	IO      *IOStreams
	NoColor bool
	Now     func() time.Time
	// OpenSession opens the source in effect with the category rules in
	// effect.
	OpenSession func(context.Context) (*session, error)
	// MakePlanNow builds a plan from the flags against the open source as
	// of now (when p is pressed, not when the browser started: its
	// planned_at and its age selectors read the clock then).
	MakePlanNow func(context.Context, *session, *planFlags) (*redrive.Plan, error)

	plan    planFlags
	planDir string
	redact  []string
}

// newUICmd builds ui; runF, when not nil, runs instead of runUI.
func newUICmd(f *Factory, runF func(context.Context, *uiOptions) error) *cobra.Command {
	o := &uiOptions{plan: planFlags{kind: redrive.KindRedrive}}
	c := &cobra.Command{
		Use:   "ui",
		Short: "Browse the DLQ interactively: categories, their entries, one envelope; plan a redrive of what is shown",
		Long: `Browse a DLQ on the terminal: the categories (count, oldest age, an example
error) fill in while the DLQ is read; Enter opens a category's entries, a
page at a time, and then one envelope with its fingerprint check, the rule
that chose its category, its properties and its payload, personal data
hidden until v reveals it. Esc goes back, q quits, ? lists the keys.

/ filters every screen by error regex, event ID, origin and owner; the
selector flags below set where it starts. r reads the DLQ again.

p makes a redrive plan of what is shown (every category on the first
screen, the open category on the entries screen) with the same planner and
plan flags as "dlqctl redrive plan", so its rules on dispositions, per-key
order and quarantined entries apply, and each exclusion is recorded. It
asks for the reason, writes the plan file into --plan-dir and names the
next command. The browser never approves, applies or deletes anything.

It needs a terminal; scripts read the same data with "dlqctl list",
"categorize" and "show".`,
		Example: `  dlqctl --source dir:testdata/incident ui
  dlqctl --source 'redis://localhost:6379/0?stream=orders.dlq' ui --origin orders --rate 20`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if c.Flags().Changed("limit") {
				return usageErrorf("--limit: the browser reads a page at a time by itself; --max caps a plan")
			}
			o.IO, o.NoColor, o.Now, o.OpenSession = f.IO, f.noColor, f.Now, f.openSession
			o.MakePlanNow = func(ctx context.Context, s *session, p *planFlags) (*redrive.Plan, error) {
				f.started = f.Now().UTC()
				s.walker.Now = f.started
				return planMakerFor(f).makePlan(ctx, s, p)
			}
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runUI(c.Context(), o)
		},
	}
	o.plan.register(c)
	// The browser pages by itself; --limit stays out of its help.
	_ = c.Flags().MarkHidden("limit")
	c.Flags().Lookup("reason").Usage = "the reason p starts its prompt with (kept in the plan and the journal)"
	c.Flags().StringVar(&o.planDir, "plan-dir", ".", "directory for the plans that p writes")
	c.Flags().StringSliceVar(&o.redact, "redact", nil, "more payload fields to hide: a key (anywhere) or a dotted path from the root")
	return c
}

// runUI checks the flags and the terminal, opens the source and runs the
// browser over it.
func runUI(ctx context.Context, o *uiOptions) error {
	if !o.IO.OutTTY || !o.IO.InTTY {
		return usageErrorf("ui needs a terminal (stdin and stdout); from a script or a pipe use dlqctl list (or categorize, show)")
	}
	if _, err := o.plan.sel.selector(); err != nil {
		return err
	}
	if _, err := parseRamp(o.plan.ramp); err != nil {
		return err
	}
	if st, err := os.Stat(o.planDir); err != nil || !st.IsDir() {
		return usageErrorf("--plan-dir %q: not a directory", o.planDir)
	}
	s, err := o.OpenSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	if err := checkCategories("--category", o.plan.sel.categories, s.walker.Classifier); err != nil {
		return err
	}
	return ui.Run(ctx, uiDeps(o, s), o.IO.In, o.IO.Out)
}

// uiDeps is what the browser reads the open source with, and how its p
// key makes a plan of what is shown with the plan flags.
func uiDeps(o *uiOptions, s *session) ui.Deps {
	selectFor := func(flt ui.Filter, category string) selectorFlags {
		sf := o.plan.sel
		sf.errorRegex, sf.eventIDs, sf.origins, sf.owners = flt.Error, flt.EventIDs, flt.Origins, flt.Owners
		if category != "" {
			sf.categories = []string{category}
		}
		return sf
	}
	return ui.Deps{
		Walker: s.walker,
		Selector: func(flt ui.Filter, category string) (inspect.Selector, error) {
			sf := selectFor(flt, category)
			return sf.selector()
		},
		Plan: func(ctx context.Context, flt ui.Filter, category, reason string) (ui.PlanResult, error) {
			p := o.plan
			p.sel, p.reason = selectFor(flt, category), reason
			plan, err := o.MakePlanNow(ctx, s, &p)
			if err != nil {
				return ui.PlanResult{}, err
			}
			if plan.Entries.Len() == 0 {
				return ui.PlanResult{}, fmt.Errorf("nothing to plan: what is shown takes no entry (%s left out); no plan written", entries(len(plan.Excluded)))
			}
			path, err := newPlanPath(o.planDir, plan)
			if err != nil {
				return ui.PlanResult{}, err
			}
			if err := redrive.WritePlan(path, plan); err != nil {
				return ui.PlanResult{}, fmt.Errorf("write plan: %w", err)
			}
			return ui.PlanResult{
				Path: path, Entries: plan.Entries.Len(), Excluded: len(plan.Excluded),
				Next: fmt.Sprintf("dlqctl redrive show %s, then dlqctl redrive approve %s", path, path),
			}, nil
		},
		Filter: ui.Filter{
			Error: o.plan.sel.errorRegex, EventIDs: o.plan.sel.eventIDs,
			Origins: o.plan.sel.origins, Owners: o.plan.sel.owners,
		},
		Reason:   o.plan.reason,
		Source:   s.src.String(),
		Styles:   report.NewTUI(o.NoColor),
		Redactor: inspect.NewRedactor(o.redact),
		PageSize: 50,
		Now:      o.Now,
	}
}

// newPlanPath names a plan after the time it was made, like the one-step
// redrive does, and never over an existing file: two plans made in the same
// second both stay.
func newPlanPath(dir string, p *redrive.Plan) (string, error) {
	base := "redrive-" + p.PlannedAt.UTC().Format("20060102T150405Z")
	for i := 1; i < 100; i++ {
		name := base + ".plan.json"
		if i > 1 {
			name = fmt.Sprintf("%s-%d.plan.json", base, i)
		}
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return path, nil
		}
	}
	return "", fmt.Errorf("%s: too many plans named %s-*", dir, base)
}
