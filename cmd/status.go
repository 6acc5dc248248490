package cmd

import (
	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/redrive"
)

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
