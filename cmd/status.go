package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/report"
	"github.com/dlqctl/dlqctl/trust"
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
	// SecretNotes say what to set before a command that runs the plan can
	// run (the passwords that plans and journals do not keep).
	SecretNotes func(*redrive.Plan) []string
	// ApprovalPolicy is the policy the run's approvals are judged by, from
	// the key flags, the environment and the config.
	ApprovalPolicy func(k keyFlags, distinct bool) (redrive.ApprovalPolicy, error)

	// Kind is redrive or resolve: the command status belongs to.
	Kind     string
	Journal  string
	planPath string
	keys     keyFlags
}

// newStatusCmd builds `redrive status` or `resolve status`; runF, when not
// nil, runs instead of runStatus.
func newStatusCmd(f *Factory, kind string, runF func(context.Context, *statusOptions) error) *cobra.Command {
	o := &statusOptions{Kind: kind}
	c := &cobra.Command{
		Use:   "status JOURNAL",
		Short: "Where a run stands: batches, moved, verdicts, the gate that stopped it",
		Long: `Where a run stands, from its journal: the batches, what was moved, the
verdicts, the gate that stopped it and the command that resumes it; and every
approval the run went on under (those it started under, then those each
resume went on under), each judged here as of when the run went on under it,
with the allowed_signers file, HMAC key and policy apply would use
(--allowed-signers, --key-file, --keys-dir): valid, why not, or why it did
not count.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Report, o.Now, o.Journal = f.IO, f.reportOptions(), f.Now, args[0]
			lines := commandLines{global: f.Global, backends: f.Backends}
			o.LoadRunPlan, o.ResumeCommand, o.ApprovalPolicy, o.SecretNotes = planFiles{f.Getenv}.loadRunPlan, lines.resumeCommand, approvalSettingsFor(f).approvalPolicy, lines.secretNotes
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runStatus(o)
		},
	}
	c.Flags().StringVar(&o.planPath, "plan", "", "the run's plan file (default: the path the journal recorded, then the file of that name next to the journal)")
	o.keys.register(c.Flags())
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
	judgeRunApprovals(&doc, st, o.ApprovalPolicy, o.keys)
	if doc.Resume != "" {
		doc.Resume = o.ResumeCommand(o.Kind, o.Journal, hintFlags{pastGate: st.Status == redrive.StatusHalted, yes: len(st.Start.RecordedApprovals()) == 0 && st.Start.MAC == ""})

	}
	if o.SecretNotes != nil {
		doc.Needs = o.SecretNotes(st.Plan)
	}
	if !o.Report.Format.IsJSON() {
		if err := writeBatches(o.IO.Out, st.Plan.Kind, st.Batches, o.Report); err != nil {
			return err
		}
	}
	if err := printRun(o.IO.Out, o.Report, o.Now(), doc); err != nil || o.Report.Format.IsJSON() || len(doc.Approvals) == 0 {
		return err
	}
	fmt.Fprintln(o.IO.Out)
	return report.WriteTable(o.IO.Out, runApprovalsTable(doc.Approvals), o.Report)
}

// judgeRunApprovals gives each approval the run went on under its state,
// judged on this host as of the record that names it (trust.WentOnVerdicts):
// an approval that never met the policy shows why.
func judgeRunApprovals(d *RunDoc, st *redrive.State, policy func(keyFlags, bool) (redrive.ApprovalPolicy, error), keys keyFlags) {
	pol, perr := policy(keys, false)
	i := 0
	for _, w := range st.WentOn {
		var verdicts []redrive.Verdict
		if perr == nil {
			verdicts = trust.WentOnVerdicts(pol, st.Plan, w)
		}
		for k := range w.Approvals {
			if perr != nil {
				d.Approvals[i].State = "not checked: " + perr.Error()
			} else {
				d.Approvals[i].State = verdictState(verdicts[k])
			}
			i++
		}
	}
}

// runApprovalsTable lists the approvals a run went on under, with the
// record that names them and their state.
func runApprovalsTable(as []RunApproval) report.Table {
	t := report.Table{Title: "Approvals the run went on under", Columns: []report.Column{
		{Name: "by", Kind: report.Key}, {Name: "key", Kind: report.Key}, {Name: "at"}, {Name: "expires"},
		{Name: "went on"}, {Name: "state", Kind: report.Key, Tone: approvalTone, MaxWidth: 120},
	}}
	for _, a := range as {
		t.Rows = append(t.Rows, []any{a.By, a.Key, a.At, a.ExpiresAt, a.Record + " " + a.WentOnAt.Format(time.RFC3339), a.State})
	}
	return t
}

// loadRunPlan reads a journal's run-start and the run's plan: the plan
// file it names, believed only when its digest is the one the journal
// records (a missing or different plan exits 5), or the plan a journal of
// an earlier version embeds.
func (pf planFiles) loadRunPlan(journal, planPath string) (redrive.Record, *redrive.Plan, error) {
	boundHeap(pf.getenv)
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
