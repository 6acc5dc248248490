package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A second apply of a plan whose run crashed is told to resume it, not
// that the plan is stale: the entries the run moved are why it looks so.
func TestReapplyAfterACrashSaysResumeIt(t *testing.T) {
	c, plan, journal := approvedDirPlan(t, "3")
	c.crashAt("published", 1, "redrive", "apply", plan)
	_, stderr := c.must(ExitUsage, "redrive", "apply", plan)
	if !strings.Contains(stderr, "journal "+journal+" exists") || !strings.Contains(stderr, "redrive resume "+journal) || strings.Contains(stderr, "skip-missing") {
		t.Errorf("re-apply after a crash does not say to resume, with the command:\n%s", stderr)
	}
	c.must(0, "redrive", "resume", journal)
}

// A journal cut at a write boundary (the writes after a batch's start
// lost in a crash) leaves moved entries without an outcome: resume finds
// them gone from the DLQ, looks for them on the destination, and counts
// them as moved, not as gone.
func TestResumeOfACutJournalFindsTheLostMoves(t *testing.T) {
	c, plan, journal := approvedDirPlan(t, "6")
	c.must(0, "redrive", "apply", plan)
	raw, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(raw), "\n")
	// Cut at the end of the write that holds the first batch-start (its
	// last line carries the write's MAC): the moves after it are lost.
	keep, started := 0, false
	for i, l := range lines {
		started = started || strings.Contains(l, `"type":"batch-start"`)
		if started && strings.Contains(l, `"mac":`) {
			keep = i + 1
			break
		}
	}
	if keep == 0 {
		t.Fatalf("no batch-start in the journal:\n%s", raw)
	}
	if err := os.WriteFile(journal, []byte(strings.Join(lines[:keep], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, _ := c.must(0, "-o", "json", "redrive", "resume", journal)
	var doc struct {
		Moved int `json:"moved"`
		Gone  int `json:"gone"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if doc.Moved != 6 || doc.Gone != 0 {
		t.Errorf("after a cut journal: moved %d, gone %d; want 6 moved", doc.Moved, doc.Gone)
	}
}

// approvedDirPlan is an approved plan of 6 transient entries of a dir
// queue, in batches of ramp, and where its journal goes.
func approvedDirPlan(t *testing.T, ramp string) (c *cli, plan, journal string) {
	q := dirQueue(t)
	c = newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q, "DLQCTL_APPROVAL_KEY": "k-0123456789abcdef0123456789abcdef"})
	plan = filepath.Join(c.dir, "p.json")
	journal = filepath.Join(c.dir, "p.journal")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "6", "--rate", "0", "--settle", "0s", "--unverified-ok", "--ramp", ramp, "--reason", "r", "--out", plan)
	c.must(0, "redrive", "approve", plan, "--by", "bob")
	return c, plan, journal
}
