package cmd

import (
	"fmt"
	"slices"
	"strings"
	"time"

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
	// ApprovedBy names every approver the run went on under, once each;
	// Approvals lists each of those approvals.
	ApprovedBy string        `json:"approved_by,omitempty"`
	Approvals  []RunApproval `json:"approvals,omitempty"`
	AppliedBy  string        `json:"applied_by"`
	Status     string        `json:"status"`
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
	// Needs says what to set before the commands the document gives run
	// (resume, reconcile): the variables that give the passwords that
	// plans and journals do not keep.
	Needs []string `json:"needs,omitempty"`
	// CameBack is the events the consumer dead-lettered again: they are
	// in the DLQ once more, and only a new plan sends them again.
	CameBack []string `json:"came_back,omitempty"`
}

func runDoc(st *redrive.State, journal string) RunDoc {
	d := RunDoc{
		Schema: "dlqctl.run/v1", Kind: st.Plan.Kind, RunID: st.RunID, Journal: journal, PlanDigest: st.Plan.Digest,
		Reason: st.Plan.Reason, PlannedBy: st.Plan.PlannedBy, AppliedBy: st.Start.AppliedBy,
		Status: st.Status, Planned: st.Plan.Entries.Len(), HaltedBy: st.HaltedBy, Batches: []redrive.BatchReport{},
	}
	if d.Status == "" {
		// A journal that ends without run-end: the process died mid-run.
		d.Status = redrive.StatusInterrupted
	}
	d.Approvals = runApprovals(st.WentOn)
	var by []string
	for _, a := range d.Approvals {
		if !slices.Contains(by, a.By) {
			by = append(by, a.By)
		}
	}
	d.ApprovedBy = strings.Join(by, ", ")
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
	d.CameBack = cameBack(st)
	d.fillTotals(st)
	return d
}

// RunApproval is one approval a run went on under (dlqctl.run/v1
// approvals[]).
type RunApproval struct {
	By string `json:"by"`
	// Key is the signing key's SHA256 fingerprint, or "hmac".
	Key       string    `json:"key"`
	At        time.Time `json:"at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Record is the journal record that names it (run-start, or resume)
	// and WentOnAt that record's time.
	Record   string    `json:"record"`
	WentOnAt time.Time `json:"went_on_at"`
	// State is how status judges it here, as of WentOnAt: "valid", or why
	// not ("" where it is not judged: the summary of apply and resume).
	State string `json:"state,omitempty"`
}

// runApprovals lists every approval of the records a run went on under.
func runApprovals(wentOn []redrive.WentOn) []RunApproval {
	var out []RunApproval
	for _, w := range wentOn {
		for _, a := range w.Approvals {
			key := a.Key
			if !a.Signed() {
				key = "hmac"
			}
			out = append(out, RunApproval{By: a.By, Key: key, At: a.At.UTC(), ExpiresAt: a.ExpiresAt.UTC(), Record: w.Record, WentOnAt: w.At.UTC()})
		}
	}
	return out
}
