package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bgDlqctl is the real command running in the background.
type bgDlqctl struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
}

func startDlqctl(t *testing.T, dir string, args ...string) *bgDlqctl {
	t.Helper()
	c := exec.Command("dlqctl", args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "DLQCTL_TEST_NOW=", "DLQCTL_APPROVAL_KEY=k")
	b := &bgDlqctl{cmd: c, out: &bytes.Buffer{}, done: make(chan struct{})}
	c.Stdout, c.Stderr = b.out, b.out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.Wait(); close(b.done) }()
	t.Cleanup(func() {
		c.Process.Kill()
		<-b.done
	})
	return b
}

// kill9 ends the run as a crash would.
func (b *bgDlqctl) kill9(t *testing.T) {
	t.Helper()
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.done
}

// waitFor polls until cond holds, failing the test after 20s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// movedSome is true once the run has journaled a first removal, so that
// it certainly holds its journal and the DLQ.
func movedSome(journal string) func() bool {
	return func() bool {
		b, _ := os.ReadFile(journal)
		return bytes.Contains(b, []byte(`"type":"removed"`))
	}
}

func guardPlan(t *testing.T, dir string, src []string, out string, extra ...string) {
	t.Helper()
	args := append(append([]string{}, src...), "redrive", "plan", "--reason", "guards", "--rate", "4", "--burst", "1",
		"--ramp", "50", "--settle", "0s", "--unverified-ok", "--out", out)
	if code, o := dlqctlProc(t, dir, nil, append(args, extra...)...); code != 0 {
		t.Fatalf("plan: %d %s", code, o)
	}
	if code, o := dlqctlProc(t, dir, nil, "redrive", "approve", out, "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, o)
	}
}

func wantBusy(t *testing.T, what string, code int, out string, says ...string) {
	t.Helper()
	if code != 7 {
		t.Fatalf("%s: exit %d, want 7 (busy)\n%s", what, code, out)
	}
	for _, s := range says {
		if !strings.Contains(out, s) {
			t.Errorf("%s: output does not say %q:\n%s", what, s, out)
		}
	}
}

// TestOneRunAtATime: while a run holds its journal and its DLQ, a second
// apply of the same journal, the same plan with another journal, another
// plan over the same DLQ, an import and a concurrent resume are all
// refused with exit 7, naming the holder, and change nothing. After
// kill -9 the run's own resume takes over at once and completes.
func TestOneRunAtATime(t *testing.T) {
	const n = 25
	for name, mk := range map[string]func(*testing.T, int) crashBackend{"dir": dirBackend, "redis": redisBackend} {
		t.Run(name, func(t *testing.T) {
			b := mk(t, n)
			dir := t.TempDir()
			src := []string{"--source", b.source}
			guardPlan(t, dir, src, "p.json")
			guardPlan(t, dir, src, "other.json", "--max", "3")
			host, _ := os.Hostname()

			run := startDlqctl(t, dir, append(src, "redrive", "apply", "p.json")...)
			waitFor(t, "the first removal", movedSome(filepath.Join(dir, "p.journal")))
			pid := run.cmd.Process.Pid

			code, out := dlqctlProc(t, dir, nil, append(src, "redrive", "apply", "p.json")...)
			wantBusy(t, "second apply, same journal", code, out, "journal p.journal is held by", host, "nothing was changed")
			if !strings.Contains(out, "pid "+itoa(pid)) {
				t.Errorf("refusal does not name the holder's pid %d:\n%s", pid, out)
			}
			code, out = dlqctlProc(t, dir, nil, append(src, "redrive", "apply", "p.json", "--journal", "p2.journal")...)
			wantBusy(t, "same plan, another journal", code, out, "DLQ "+b.source+" is held by run ", "pid "+itoa(pid))
			if _, err := os.Stat(filepath.Join(dir, "p2.journal")); err == nil {
				t.Errorf("a refused apply created its journal")
			}
			code, out = dlqctlProc(t, dir, nil, append(src, "redrive", "apply", "other.json")...)
			wantBusy(t, "another plan, same DLQ", code, out, "is held by run ")
			code, out = dlqctlProc(t, dir, nil, append(src, "redrive", "resume", "p.journal")...)
			wantBusy(t, "resume while the run lives", code, out, "journal p.journal is held by")

			// import refuses while the run holds the DLQ
			exp := filepath.Join(dir, "x.ndjson")
			os.WriteFile(exp, []byte(`{"schema":"dlqctl.envelope/v1","id":"20261129T100099Z-9999","event_id":"EX","payload_encoding":"json","payload":{},"origin":{"topic":"orders"},"last_error":"timeout"}`+"\n"), 0o644)
			before := b.dlqLen(t)
			code, out = dlqctlProc(t, dir, nil, append(src, "import", exp)...)
			wantBusy(t, "import during a run", code, out, "is held by run ")

			run.kill9(t)
			if got := b.dlqLen(t); got > before {
				t.Errorf("the refused import added entries: %d in the DLQ, %d before", got, before)
			}
			if name == "redis" {
				// The dead run's lease lives until its TTL for any other run …
				code, out = dlqctlProc(t, dir, nil, append(src, "redrive", "apply", "other.json", "--journal", "o2.journal")...)
				wantBusy(t, "another run right after a crash", code, out, "is held by run ")
			}
			// … but its own resume takes it over at once.
			res := startDlqctl(t, dir, append(src, "redrive", "resume", "p.journal", "-o", "json")...)
			waitFor(t, "the resume to start moving", func() bool { return strings.Contains(res.out.String(), "resuming run") })
			code, out = dlqctlProc(t, dir, nil, append(src, "redrive", "resume", "p.journal")...)
			wantBusy(t, "concurrent resume", code, out, "journal p.journal is held by")
			<-res.done
			if res.cmd.ProcessState.ExitCode() != 0 {
				t.Fatalf("resume after kill -9: exit %d\n%s", res.cmd.ProcessState.ExitCode(), res.out)
			}
			d := parseRun(t, res.out.String())
			if d.Status != "completed" || d.Moved != n {
				t.Errorf("after resume: %s, moved %d; want completed, %d", d.Status, d.Moved, n)
			}
			seen := map[string]int{}
			for _, id := range b.delivered(t) {
				seen[id]++
			}
			for id, c := range seen {
				if c != 1 {
					t.Errorf("%s reached the destination %d times", id, c)
				}
			}
			if len(seen) != n || b.dlqLen(t) != 0 {
				t.Errorf("%d events delivered, %d left in the DLQ; want %d and 0", len(seen), b.dlqLen(t), n)
			}
			// Released at the end: the next run may start.
			code, out = dlqctlProc(t, dir, nil, append(src, "import", exp)...)
			if code != 0 {
				t.Errorf("import after the run: exit %d\n%s", code, out)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestPulsarOneRunAtATime: on a real broker the DLQ lease (an exclusive
// consumer on SUB-lease) refuses another run and an import while a run
// holds the DLQ, naming it, and a resume right after kill -9 takes it.
func TestPulsarOneRunAtATime(t *testing.T) {
	const n = 12
	dir := t.TempDir()
	origin := originTopic(t, false)
	dlq := e2eTopic(t, "public/default", "dlq")
	seedDLQ(t, dlq, origin, pulsarEvents("L", n))
	src := pulsarSource(dlq, "")
	planAndApprove(t, dir, src, "--reason", "lease", "--rate", "3", "--burst", "1", "--ramp", "50", "--settle", "0s", "--unverified-ok")

	run := startDlqctl(t, dir, "--source", src, "redrive", "apply", "p.json")
	waitFor(t, "the first removal", movedSome(filepath.Join(dir, "p.journal")))
	pid := run.cmd.Process.Pid
	code, out := dlqctlProc(t, dir, nil, "--source", src, "redrive", "apply", "p.json", "--journal", "p2.journal")
	wantBusy(t, "same plan, another journal", code, out, "is held by run ", "pid "+itoa(pid))
	exp := filepath.Join(dir, "x.ndjson")
	os.WriteFile(exp, []byte(`{"schema":"dlqctl.envelope/v1","id":"x-1","event_id":"EX","payload_encoding":"json","payload":{},"origin":{"topic":"orders"},"last_error":"timeout"}`+"\n"), 0o644)
	code, out = dlqctlProc(t, dir, nil, "--source", src, "import", exp)
	wantBusy(t, "import during a run", code, out, "is held by run ")

	run.kill9(t)
	code, out = dlqctlProc(t, dir, nil, "--source", src, "-o", "json", "redrive", "resume", "p.journal")
	if code != 0 {
		t.Fatalf("resume right after kill -9: exit %d\n%s", code, out)
	}
	if d := parseRun(t, out); d.Status != "completed" || d.Moved != n {
		t.Errorf("after resume: %s, moved %d; want completed, %d", d.Status, d.Moved, n)
	}
	for id, c := range copiesOn(t, origin) {
		if c < 1 {
			t.Errorf("%s never reached the origin", id)
		}
	}
	if len(copiesOn(t, origin)) != n {
		t.Errorf("%d events on the origin, want %d", len(copiesOn(t, origin)), n)
	}
	// Released: an import may write again.
	if code, out := dlqctlProc(t, dir, nil, "--source", src, "import", exp); code != 0 {
		t.Errorf("import after the run: exit %d\n%s", code, out)
	}
}

// TestPulsarCheckMissingTopic: check on a DLQ topic that does not exist
// is exit 2 naming it; --allow-missing reads it as empty.
func TestPulsarCheckMissingTopic(t *testing.T) {
	dir := t.TempDir()
	src := pulsarSource(e2eTopic(t, "public/default", "typo"), "")
	code, out := dlqctlProc(t, dir, nil, "--source", src, "check", "--max-total", "0")
	if code != 2 || !strings.Contains(out, "does not exist") || !strings.Contains(out, "typo") {
		t.Errorf("check on a missing topic: exit %d, want 2 naming it\n%s", code, out)
	}
	src = pulsarSource(e2eTopic(t, "public/default", "typo"), "")
	code, out = dlqctlProc(t, dir, nil, "--source", src, "check", "--max-total", "0", "--allow-missing")
	if code != 0 || !strings.Contains(out, "ok: 0 entries") {
		t.Errorf("check --allow-missing: exit %d, want 0\n%s", code, out)
	}
}
