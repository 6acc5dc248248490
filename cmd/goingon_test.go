package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/redrive"
)

// TestResumeOfAOneStepRun: a one-step run that was interrupted goes on as
// trust.HowGoingOn says: asked for "yes" when its journal is not signed,
// and refused (exit 5) once the policy asks for an approval.
func TestResumeOfAOneStepRun(t *testing.T) {
	q := dirQueue(t)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q})
	plan := filepath.Join(c.dir, "p.json")
	journal := redrive.DefaultJournalPath(plan)
	io, _, _, errOut := TestIO()
	ctx, cancel := context.WithCancel(context.Background())
	onStep := func(step string) {
		if step == redrive.RecPublished {
			cancel()
		}
	}
	args := []string{"redrive", "--category", "transient", "--max", "8", "--ramp", "2", "--rate", "4", "--burst", "1",
		"--settle", "0s", "--reason", "r", "--yes", "--out", plan}
	if code := Execute(ctx, c.factory(io, onStep), args); code != ExitInterrupted {
		t.Fatalf("one-step redrive: exit %d, want 130; stderr: %s", code, errOut)
	}

	conf := filepath.Join(c.dir, "strict.yaml")
	if err := os.WriteFile(conf, []byte("policy:\n  require_approval: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr := c.must(ExitApproval, "--config", conf, "redrive", "resume", journal, "--yes")
	if !strings.Contains(stderr, "the run started without an approval, and policy.require_approval is set in config "+conf) {
		t.Errorf("strict policy: %s", stderr)
	}

	// Not signed, and not on a terminal: the resume asks for --yes.
	_, stderr = c.must(ExitUsage, "redrive", "resume", journal)
	if !strings.Contains(stderr, "--yes") {
		t.Errorf("resume without --yes: %s", stderr)
	}
	out, stderr := c.must(0, "-o", "json", "redrive", "resume", journal, "--yes")
	if d := runJSON(t, out); d.Moved != 8 {
		t.Errorf("moved %d, want 8; stderr: %s", d.Moved, stderr)
	}
}
