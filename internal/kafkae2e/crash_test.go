package kafkae2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startDlqctl starts the real command in the background; its combined
// output goes to the returned buffer (read it once the process ended).
func startDlqctl(t *testing.T, dir string, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	c := exec.Command("dlqctl", args...)
	c.Dir = dir
	c.Env = append(os.Environ(), append([]string{"DLQCTL_APPROVAL_KEY=kafka-e2e-approval-key-0123456789abcdef"}, env...)...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c, &out
}

// waitJournal waits until the journal in dir holds n published records.
func waitJournal(t *testing.T, path string, n int, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(path); strings.Count(string(b), `"published"`) >= n {
			return
		}
	}
	t.Fatalf("%s: fewer than %d published records after %s", path, n, timeout)
}

// TestResumeAfterBrokerCrash: the broker and apply are both killed with
// SIGKILL mid-run; once the broker is back, a resume starts moving within
// seconds (not the transaction timeout or a read's idle wait), says on
// stderr what it waits for, and each event is on the origin once.
func TestResumeAfterBrokerCrash(t *testing.T) {
	ctx := testCtx(t)
	const n = 60
	origin, dlt := seedSpringDLT(t, ctx, n)
	dir := t.TempDir()
	src := []string{"--source", source(dlt, "")}
	if code, out := dlqctl(t, dir, nil, append(src, "redrive", "plan", "--reason", "crash test", "--rate", "30",
		"--burst", "2", "--ramp", "60", "--settle", "0s", "--unverified-ok", "--out", "p.json")...); code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	}
	if code, out := dlqctl(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	apply, _ := startDlqctl(t, dir, nil, append(src, "redrive", "apply", "p.json")...)
	waitJournal(t, filepath.Join(dir, "p.journal"), 4, 60*time.Second)
	if err := broker.Kill(); err != nil {
		t.Fatal(err)
	}
	apply.Process.Signal(syscall.SIGKILL)
	apply.Wait()
	if err := broker.Up(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, out := dlqctl(t, dir, nil, append(src, "redrive", "resume", "p.journal")...)
	took := time.Since(start)
	t.Logf("resume after the broker crash took %s:\n%s", took, out)
	if code != 0 {
		t.Fatalf("resume: exit %d", code)
	}
	count := originEvents(t, ctx, origin)
	if len(count) != n {
		t.Errorf("%d events on the origin, want %d", len(count), n)
	}
	for id, c := range count {
		if c != 1 {
			t.Errorf("%s on the origin %d times", id, c)
		}
	}
}
