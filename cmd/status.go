package cmd

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/report"
)

// statusOptions is what status reads and with what: the journal, the
// output settings resolved for the invocation, the clock, and what it
// calls out to.
type statusOptions struct {
	IO     *IOStreams
	Report report.Options
	// Now is the time the summary is written at.
	Now func() time.Time
	// LoadRunPlan reads the run start of a journal and the plan it ran
	// (--plan, else where the journal says).
	LoadRunPlan func(journal, planPath string) (redrive.Record, *redrive.Plan, error)
	// ResumeCommand is the command line that resumes the run.
	ResumeCommand func(kind, journal string, h hintFlags) string

	// Kind is redrive or resolve: the command status belongs to.
	Kind     string
	Journal  string
	planPath string
}

// newStatusCmd builds `redrive status` or `resolve status`; runF, when not
// nil, runs instead of runStatus.
func newStatusCmd(f *Factory, kind string, runF func(context.Context, *statusOptions) error) *cobra.Command {
	o := &statusOptions{Kind: kind}
	c := &cobra.Command{
		Use:   "status JOURNAL",
		Short: "Where a run stands: batches, moved, verdicts, the gate that stopped it",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Report, o.Now, o.Journal = f.IO, f.reportOptions(), f.Now, args[0]
			o.LoadRunPlan, o.ResumeCommand = f.loadRunPlan, f.resumeCommand
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runStatus(o)
		},
	}
	c.Flags().StringVar(&o.planPath, "plan", "", "the run's plan file (default: the path the journal recorded, then the file of that name next to the journal)")
	return c
}

func runStatus(o *statusOptions) error {
	if err := wantJournal(o.Journal, o.Kind); err != nil {
		return err
	}
	_, plan, err := o.LoadRunPlan(o.Journal, o.planPath)
	if err != nil {
		return err
	}
	st, _, err := redrive.ReplayFile(o.Journal, nil, plan)
	if err != nil {
		return replayError(err)
	}
	doc := journalRunDoc(st, o.Journal)
	if doc.Resume != "" {
		doc.Resume = o.ResumeCommand(o.Kind, o.Journal, hintFlags{pastGate: st.Status == redrive.StatusHalted, yes: len(st.Start.RecordedApprovals()) == 0 && st.Start.MAC == ""})
	}
	if !o.Report.Format.IsJSON() {
		if err := writeBatches(o.IO.Out, st.Plan.Kind, st.Batches, o.Report); err != nil {
			return err
		}
	}
	return printRun(o.IO.Out, o.Report, o.Now(), doc)
}

// loadRunPlan reads a journal's run-start and the run's plan: the plan
// file it names, believed only when its digest is the one the journal
// records (a missing or different plan exits 5), or the plan a journal of
// an earlier version embeds.
func (f *Factory) loadRunPlan(journal, planPath string) (redrive.Record, *redrive.Plan, error) {
	boundHeap(f.Getenv)
	start, err := redrive.ReadRunStart(journal)
	if err != nil {
		return start, nil, usageErrorf("%v", err)
	}
	plan, err := redrive.LoadRunPlan(start, journal, planPath)
	if err != nil {
		return start, nil, withCode(ExitApproval, err)
	}
	return start, plan, nil
}

// replayError is the exit a failed replay gets: a run-start that does not
// name the plan given is the trust contract's (5), anything else a usage
// error.
func replayError(err error) error {
	if errors.Is(err, redrive.ErrRunPlan) {
		return withCode(ExitApproval, err)
	}
	return usageErrorf("%v", err)
}
