package conformance

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/internal/workertest"
)

// caseBrokerCrash: the broker is killed (SIGKILL) moments after one run
// completed and while another is in the middle of its moves, then
// restarted. Nothing either journal records as removed is counted,
// planned or moved again; stats says how many removed entries the broker
// handed back (backend.came_back), where it holds any; the run in the
// middle resumes to completion; dlqctl's records of the removals survive
// the broker's own housekeeping too (Churn); and every event reached its
// consumer once, or more only where a journal records a resend of unknown
// outcome.
//
// One restart answers every question: the completed run ends a moment
// before the kill, while the other is moving.
func caseBrokerCrash(t *testing.T, srv *Target) {
	need(t, srv, "Kill", srv.Kill != nil && srv.Up != nil)
	done, mid := srv.Fresh(t), srv.Fresh(t)
	fpsDone := seed(t, done, 20, "timeout", 1)
	mid.Source += srv.Outage
	fpsMid := seed(t, mid, 60, "timeout", 101)
	doneDir, midDir := t.TempDir(), t.TempDir()
	planAll(t, doneDir, done)
	// 60 entries at 5/s: the run is still moving when the other ends.
	planAndApprove(t, midDir, mid, "redrive", "--rate", "5", "--burst", "1", "--ramp", "10,20", "--settle", "0s", "--unverified-ok")
	midEntries := planEntries(t, filepath.Join(midDir, "p.json"))
	run := startRun(t, midDir, nil, "--source", mid.Source, "redrive", "apply", "p.json")
	waitFor(t, "the run to journal its first removals", func() bool { return countSteps(filepath.Join(midDir, "p.journal"), "removed") >= 3 })
	if !completes(t, doneDir, done, "the run before the crash", len(fpsDone), "apply", "p.json") {
		t.FailNow()
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	code, out, ended := run.wait(90 * time.Second)
	took := time.Since(killed).Round(100 * time.Millisecond)
	if !ended {
		t.Errorf("the run in the middle did not end within 90 s of the broker's crash (a hang)\n%s", out)
		run.kill()
	}
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the run in the middle ended with exit %d, %s after the crash", code, took)
	checkGone(t, srv, "the completed run's", done)
	if code == 0 {
		t.Errorf("the run in the middle completed before the broker's crash: nothing was asked of a crash mid-run")
	} else {
		completes(t, midDir, mid, "resume after the broker's crash", -1, "resume", "p.journal")
	}
	checkGone(t, srv, "the resumed run's", mid)
	if srv.Churn != nil {
		srv.Churn(t, done)
		srv.Churn(t, mid)
		checkGone(t, srv, "after the broker's retention and compaction, the completed run's", done)
		checkGone(t, srv, "after the broker's retention and compaction, the resumed run's", mid)
	}
	rows := consumeAllOf(t, []Fixture{done, mid}, []string{filepath.Join(doneDir, "inbox.db"), filepath.Join(midDir, "inbox.db")})
	checkOnceOutsideAmbiguous(t, done, fpsDone, rows[0], nil)
	ambiguous := eventsWith(midEntries, journalSteps(t, filepath.Join(midDir, "p.journal")), "ambiguous")
	checkOnceOutsideAmbiguous(t, mid, fpsMid, rows[1], ambiguous)
}

// checkGone: every entry of fx was removed by a journaled run, so stats
// counts none, a new plan takes none, and where the broker itself still
// holds some (a crash rolled their removal back), stats says so.
func checkGone(t *testing.T, srv *Target, whose string, fx Fixture) {
	t.Helper()
	s := stats(t, fx)
	if s.Total != 0 {
		t.Errorf("%s DLQ: stats counts %d entries, want 0: entries a journal records as removed are counted again", whose, s.Total)
	}
	if srv.Held != nil {
		held := srv.Held(t, fx)
		cb, said := s.cameBack()
		switch {
		case held > 0 && !said:
			t.Errorf("%s DLQ: the broker hands out %d entries that a journal records as removed, and stats says nothing of them (backend.came_back)", whose, held)
		case held > 0 && cb != held:
			t.Errorf("%s DLQ: the broker hands out %d entries that a journal records as removed; stats says %d came back", whose, held, cb)
		case held == 0 && said && cb != 0:
			t.Errorf("%s DLQ: stats says %d entries came back; the broker holds none", whose, cb)
		}
	}
	if entries := planOnly(t, fx); len(entries) != 0 {
		t.Errorf("%s DLQ: a new plan takes %d entries that a journal records as removed: %v", whose, len(entries), entries)
	}
}

// planOnly plans every entry of fx (nothing is approved or applied) and
// returns what the plan takes.
func planOnly(t *testing.T, fx Fixture) []planEntry {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"--source", fx.Source, "redrive", "plan", "--reason", "conformance", "--out", "p.json"}, fastPlan...)
	if code, out := RunCommand(t, dir, nil, nil, args...); code != 0 {
		t.Fatalf("redrive plan: exit %d\n%s", code, out)
	}
	// A selection that takes nothing writes no plan.
	if _, err := os.Stat(filepath.Join(dir, "p.json")); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return planEntries(t, filepath.Join(dir, "p.json"))
}

// countSteps counts the journal records of type step in path (0 when
// there is no journal yet).
func countSteps(path, step string) int {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(raw), `"type":"`+step+`"`)
}

// bgRun is dlqctl running in the background, its output kept.
type bgRun struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startRun starts dlqctl in dir with the extra environment env; wrap,
// when given, is a command line that runs it (a PID namespace).
func startRun(t *testing.T, dir string, env []string, args ...string) *bgRun {
	t.Helper()
	return startWrapped(t, dir, env, nil, args...)
}

func startWrapped(t *testing.T, dir string, env, wrap []string, args ...string) *bgRun {
	t.Helper()
	line := append(append(append([]string{}, wrap...), os.Args[0]), args...)
	c := exec.Command(line[0], line[1:]...)
	c.Dir = dir
	c.Env = append(os.Environ(), append([]string{asDLQCTL + "=1", "DLQCTL_APPROVAL_KEY=conformance-approval-key-0123456789abcdef"}, env...)...)
	r := &bgRun{cmd: c, out: &lockedBuffer{}, done: make(chan struct{})}
	c.Stdout, c.Stderr = r.out, r.out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.Wait(); close(r.done) }()
	t.Cleanup(r.kill)
	return r
}

// wait waits up to bound for the run to end, and returns its exit code
// (137 when a signal killed it) and output; ended is false on a timeout.
func (r *bgRun) wait(bound time.Duration) (code int, out string, ended bool) {
	select {
	case <-r.done:
	case <-time.After(bound):
		return -1, r.out.String(), false
	}
	code = r.cmd.ProcessState.ExitCode()
	if code == -1 {
		code = 137
	}
	return code, r.out.String(), true
}

// kill ends the run with SIGKILL (waking it first, should it be stopped)
// and waits for it.
func (r *bgRun) kill() {
	r.cmd.Process.Signal(syscall.SIGKILL)
	r.cmd.Process.Signal(syscall.SIGCONT)
	<-r.done
}

// consumeAllOf is consumeAll of several fixtures at once, one worker
// each.
func consumeAllOf(t *testing.T, fxs []Fixture, inboxes []string) []map[string]workertest.Row {
	t.Helper()
	workers := make([]*workertest.Worker, len(fxs))
	for i, fx := range fxs {
		workers[i] = fx.worker.Start(t, append(append([]string{}, fx.Consume...), "--inbox", "sqlite:"+inboxes[i], "--until-idle", "3s")...)
	}
	rows := make([]map[string]workertest.Row, len(fxs))
	for i, w := range workers {
		if err := w.Wait(); err != nil {
			t.Fatalf("worker: %v\n%s", err, w.Output())
		}
		rows[i] = workertest.ReadInbox(t, inboxes[i])
	}
	return rows
}
