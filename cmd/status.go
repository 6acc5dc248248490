package cmd

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/redrive"
)

func newStatusCmd(f *Factory, kind string) *cobra.Command {
	var planPath string
	c := &cobra.Command{
		Use:   "status JOURNAL",
		Short: "Where a run stands: batches, moved, verdicts, the gate that stopped it",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := wantJournal(args[0], kind); err != nil {
				return err
			}
			_, plan, err := f.loadRunPlan(args[0], planPath)
			if err != nil {
				return err
			}
			st, _, err := redrive.ReplayFile(args[0], nil, plan)
			if err != nil {
				return replayError(err)
			}
			doc := journalRunDoc(st, args[0])
			if doc.Resume != "" {
				doc.Resume = f.resumeCommand(kind, args[0], hintFlags{pastGate: st.Status == redrive.StatusHalted, yes: len(st.Start.RecordedApprovals()) == 0 && st.Start.MAC == ""})
			}
			ro := f.reportOptions()
			if !ro.Format.IsJSON() {
				if err := writeBatches(f.IO.Out, st.Plan.Kind, st.Batches, ro); err != nil {
					return err
				}
			}
			return f.printRun(doc)
		},
	}
	c.Flags().StringVar(&planPath, "plan", "", "the run's plan file (default: the path the journal recorded, then the file of that name next to the journal)")
	return c
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
