package sqsdlq_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backends/sqs/sqstest"
)

// TestE2ERandomKills kills `redrive apply` and `redrive resume` with
// SIGKILL at random moments, and the server once, until a run completes;
// then the reference worker consumes the source queue. Nothing is lost
// (every event has an effect, the DLQ is empty) and nothing is doubled
// (one effect per event: a resend the journal calls ambiguous is absorbed
// by the worker's inbox).
func TestE2ERandomKills(t *testing.T) {
	server := sqsServer(t)
	if testing.Short() {
		t.Skip("random kills take minutes")
	}
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	const n = 80
	var evs []event
	for i := range n {
		evs = append(evs, event{id: fmt.Sprintf("K%02d", i), body: fmt.Sprintf("k-%d", i)})
	}
	send(t, ctx, p.src, evs...)
	deadLetter(t, ctx, p, n)
	dir := t.TempDir()
	src := []string{"--source", p.sourceURL("lease_settle=200ms")}
	if code, out := dlqctlRun(t, dir, nil, append(src, "redrive", "plan", "--reason", "random kills", "--allow-disposition", "investigate",
		"--rate", "60", "--burst", "5", "--ramp", "5,10", "--settle", "0s", "--unverified-ok", "--out", "p.json")...); code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	}
	if code, out := dlqctlRun(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	journal := filepath.Join(dir, "p.journal")
	serverKilled := false
	kills, done := 0, false
	for attempt := 0; attempt < 40 && !done; attempt++ {
		args := append(append([]string{}, src...), "redrive", "apply", "p.json")
		if _, err := os.Stat(journal); err == nil {
			args = append(append([]string{}, src...), "redrive", "resume", "p.journal")
		}
		c := exec.Command("dlqctl", args...)
		c.Dir = dir
		c.Env = append(append(os.Environ(), sqstest.Env()...), "DLQCTL_APPROVAL_KEY=an-approval-key-long-enough-for-doctor")
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- c.Wait() }()
		// Kill at a random moment in the first 2.5 s (a run of 80 at 60/s
		// takes longer), or let the last attempts finish.
		var err error
		killAfter := time.Duration(rng.IntN(2500)) * time.Millisecond
		if kills >= 8 {
			killAfter = 5 * time.Minute
		}
		select {
		case err = <-exited:
		case <-time.After(killAfter):
			if !serverKilled && kills == 3 {
				// Once: the server goes down under the run, and comes back.
				serverKilled = true
				if err := server.Down(); err != nil {
					t.Fatal(err)
				}
				err = <-exited
				if err := server.Up(); err != nil {
					t.Fatal(err)
				}
				t.Logf("attempt %d (%s): server killed under it: %v", attempt, args[len(args)-2], err)
				continue
			}
			c.Process.Signal(syscall.SIGKILL)
			err = <-exited
			kills++
			t.Logf("attempt %d (%s): killed after %s", attempt, args[len(args)-2], killAfter)
			continue
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		t.Logf("attempt %d (%s): exit %d", attempt, args[len(args)-2], code)
		switch code {
		case 0:
			done = true
		case 1, 7:
			// In-flight messages of a killed process not visible yet, or
			// its lease not yet given up: try again shortly.
			time.Sleep(2 * time.Second)
		case 5:
			// A killed scan still hides messages from the staleness check.
			if !strings.Contains(out.String(), "stale") {
				t.Fatalf("exit 5: %s", out.String())
			}
			time.Sleep(5 * time.Second)
		default:
			t.Fatalf("%s: exit %d\n%s", args[len(args)-2], code, out.String())
		}
	}
	if !done {
		t.Fatalf("no run completed after %d kills", kills)
	}
	t.Logf("%d kills, server killed once: %v", kills, serverKilled)
	if got := count(t, ctx, p.dlq); got != 0 {
		t.Fatalf("%d left in the DLQ", got)
	}
	inbox := filepath.Join(dir, "inbox.db")
	runWorker(t, "--source", workerSource(t, p.srcName), "--inbox", "sqlite:"+inbox)
	rows := readInbox(t, inbox)
	for _, ev := range evs {
		if r := rows[ev.id]; r.effects != 1 {
			t.Errorf("%s: %d effects, want 1", ev.id, r.effects)
		}
	}
	if got := count(t, ctx, p.src); got != 0 {
		t.Errorf("%d left on the source after the worker", got)
	}
}
