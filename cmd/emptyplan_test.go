package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/redrive"
)

// TestEmptyPlanIsNeitherApprovedNorApplied: a plan with no entries (as
// earlier versions wrote one for a selection that took nothing, with
// "next: approve") is a usage error for approve and apply: no approval is
// recorded and no run starts, instead of a run that "completes" having
// moved nothing.
func TestEmptyPlanIsNeitherApprovedNorApplied(t *testing.T) {
	q := dirQueue(t)
	const key = "test-approval-key-0123456789abcdef"
	c := newCLI(t, map[string]string{"DLQCTL_APPROVAL_KEY": key})
	path := filepath.Join(c.dir, "empty.plan.json")
	plan := &redrive.Plan{
		Schema: redrive.PlanSchema, Kind: redrive.KindRedrive, Reason: "r", PlannedBy: "alice", PlannedAt: testNow,
		Source: "dir:" + q, Params: redrive.Params{Ramp: []int{10}, Rate: 50, Burst: 10},
		Entries:  redrive.NewEntries(),
		Excluded: []redrive.Excluded{{ID: "1", EventID: "E1", Why: "disposition fix-then-redrive, not redrive", Disposition: "fix-then-redrive"}},
	}
	if err := plan.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := redrive.WritePlan(path, plan); err != nil {
		t.Fatal(err)
	}
	_, stderr := c.must(ExitUsage, "redrive", "approve", path, "--by", "bob")
	if !strings.Contains(stderr, "empty.plan.json holds no entries: there is nothing to approve (its selection left 1 entry out") {
		t.Errorf("approve of an empty plan: %s", stderr)
	}
	if p, err := redrive.ReadPlan(path); err != nil || len(p.Approvals) != 0 {
		t.Errorf("approve recorded an approval: %v", err)
	}
	// Approved the way an earlier version let it be, it is still not run.
	a, err := plan.Approve([]byte(key), "bob", c.now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	plan.Approvals = append(plan.Approvals, a)
	if err := redrive.WritePlan(path, plan); err != nil {
		t.Fatal(err)
	}
	_, stderr = c.must(ExitUsage, "redrive", "apply", path)
	if !strings.Contains(stderr, "holds no entries: there is nothing to apply") {
		t.Errorf("apply of an empty plan: %s", stderr)
	}
	if _, err := os.Stat(redrive.DefaultJournalPath(path)); err == nil {
		t.Error("apply of an empty plan started a run")
	}
}
