package cmd

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The run-start names the plan by digest; status, resume and reconcile
// --journal read the plan file and believe it only when it is the run's
// (exit 5 otherwise, never a guess).
func TestJournalNamesItsPlanByDigest(t *testing.T) {
	q := dirQueue(t)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q, "DLQCTL_APPROVAL_KEY": "k-0123456789abcdef0123456789abcdef"})
	plan := filepath.Join(c.dir, "p.json")
	journal := filepath.Join(c.dir, "p.journal")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "3", "--rate", "0", "--settle", "0s", "--reason", "r", "--out", plan)
	c.must(0, "redrive", "approve", plan, "--by", "bob")
	c.must(0, "redrive", "apply", plan)

	f, err := os.Open(journal)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := bufio.NewReader(f).ReadString('\n')
	f.Close()
	if strings.Contains(first, `"plan":`) || !strings.Contains(first, `"plan_digest":"sha256:`) {
		t.Errorf("run-start embeds the plan or names no digest: %s", first)
	}
	c.must(0, "redrive", "status", journal)

	// Moved away: nowhere the journal says, so refused, naming --plan.
	moved := filepath.Join(t.TempDir(), "elsewhere.json")
	if err := os.Rename(plan, moved); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"redrive", "status", journal},
		{"redrive", "resume", journal},
		{"reconcile", "--journal", journal, "--effects", "sqlite:" + filepath.Join(c.dir, "e.db")},
	} {
		_, stderr := c.must(ExitApproval, args...)
		if !strings.Contains(stderr, "does not exist") || !strings.Contains(stderr, "--plan") {
			t.Errorf("%v with the plan moved away: %s", args, stderr)
		}
	}
	c.must(0, "redrive", "status", journal, "--plan", moved)
	c.must(0, "redrive", "resume", journal, "--plan", moved)

	// Another plan at the recorded path (put there by hand: plan --out
	// refuses to write it there): its digest is not the run's.
	other := filepath.Join(c.dir, "other.json")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "3", "--rate", "0", "--settle", "0s", "--reason", "another", "--out", other)
	if err := os.Rename(other, plan); err != nil {
		t.Fatal(err)
	}
	_, stderr := c.must(ExitApproval, "redrive", "status", journal)
	if !strings.Contains(stderr, "not the run's") {
		t.Errorf("status with another plan at the recorded path: %s", stderr)
	}
	// An edited copy of the run's plan does not verify.
	b, _ := os.ReadFile(moved)
	edited := filepath.Join(c.dir, "edited.json")
	os.WriteFile(edited, []byte(strings.Replace(string(b), `"reason": "r"`, `"reason": "x"`, 1)), 0o600)
	_, stderr = c.must(ExitApproval, "redrive", "status", journal, "--plan", edited)
	if !strings.Contains(stderr, "digest mismatch") {
		t.Errorf("status with an edited plan: %s", stderr)
	}
}
