package kafkae2e

import (
	"bytes"
	"math/rand"
	"net"
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
	// The resume starts while the broker is still starting, as an
	// operator's would right after restarting it.
	up := make(chan error, 1)
	go func() { up <- broker.Up() }()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", broker.Bootstrap()); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the broker does not listen after 60 s")
		}
	}
	start := time.Now()
	code, out := dlqctl(t, dir, nil, append(src, "redrive", "resume", "p.journal")...)
	took := time.Since(start)
	if err := <-up; err != nil {
		t.Fatal(err)
	}
	t.Logf("resume after the broker crash took %s:\n%s", took, out)
	if code != 0 {
		t.Fatalf("resume: exit %d", code)
	}
	// 56 entries at 30/s take 2 s; the rest is waiting for the broker.
	if took > 20*time.Second {
		t.Errorf("resume took %s after the broker came back", took)
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

// TestRandomKills kills apply and its resumes with SIGKILL at random
// moments, and the broker once, until a resume completes: every event is
// on the origin exactly once (read_committed) and the DLT reads empty.
func TestRandomKills(t *testing.T) {
	ctx := testCtx(t)
	const n = 120
	origin, dlt := seedSpringDLT(t, ctx, n)
	dir := t.TempDir()
	src := []string{"--source", source(dlt, "")}
	if code, out := dlqctl(t, dir, nil, append(src, "redrive", "plan", "--reason", "random kills", "--rate", "15",
		"--burst", "4", "--ramp", "20,40", "--settle", "0s", "--unverified-ok", "--out", "p.json")...); code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	}
	if code, out := dlqctl(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewSource(seed))
	journal := filepath.Join(dir, "p.journal")
	done, kills, brokerKilled := false, 0, false
	// An apply killed before its journal exists leaves a lease of its run
	// ID, which the next apply (another run ID) waits out (30 s).
	deadline := time.Now().Add(150 * time.Second)
	for trial := 0; time.Now().Before(deadline) && !done; trial++ {
		args := append(src, "redrive", "resume", "p.journal")
		if _, err := os.Stat(journal); err != nil {
			args = append(src, "redrive", "apply", "p.json")
		}
		c, out := startDlqctl(t, dir, nil, args...)
		exited := make(chan error, 1)
		go func() { exited <- c.Wait() }()
		select {
		case err := <-exited:
			if err == nil {
				done = true
				continue
			}
			// Refused (the last one's lease, a journal not yet there): try again.
			t.Logf("trial %d: %v\n%s", trial, err, out)
			time.Sleep(2 * time.Second)
			continue
		case <-time.After(time.Duration(300+rnd.Intn(2200)) * time.Millisecond):
		}
		c.Process.Signal(syscall.SIGKILL)
		<-exited
		kills++
		if kills == 2 {
			brokerKilled = true
			if err := broker.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := broker.Up(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if kills < 3 || !brokerKilled {
		t.Errorf("only %d kills (broker killed: %v): the run was too quick to test", kills, brokerKilled)
	}
	if !done {
		code, out := dlqctl(t, dir, nil, append(src, "redrive", "resume", "p.journal")...)
		if code != 0 {
			t.Fatalf("final resume: exit %d\n%s\n%s", code, out, txnDiag(t, ctx, dlt))
		}
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
	code, out := dlqctl(t, dir, nil, append(src, "stats", "-o", "json")...)
	var st struct {
		Total int `json:"total"`
	}
	jsonDoc(t, out, &st)
	if code != 0 || st.Total != 0 {
		t.Errorf("DLQ after the run: exit %d, %d entries", code, st.Total)
	}
}
