package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/internal/testproc"
)

// connDropBound is how long a run may take to end once its connection to
// the broker is gone.
const connDropBound = 60 * time.Second

// caseConnDrop: the connection to the broker drops while publishes await
// their confirmation. The run is stopped right after it journaled a
// chunk's intents; the broker is frozen, the run sends its publishes,
// and once they have reached the broker it is the run's turn to be
// frozen while the broker answers; then both ends of every connection
// between them are cut, with the answers unread. The run ends within a
// bound (no hang), journals no entry as refused (its outcome is unknown,
// not failed), and, resumed, puts every event on the origin once — or
// more only where the journal records a resend of unknown outcome.
func caseConnDrop(t *testing.T, srv *Target) {
	need(t, srv, "PID", srv.PID != nil)
	const n = 30
	fx := srv.Fresh(t)
	fps := seed(t, fx, n, "timeout", 1)
	dir := t.TempDir()
	planAndApprove(t, dir, fx, "redrive", "--rate", "0", "--burst", "10", "--ramp", "5,10", "--settle", "0s", "--unverified-ok")
	entries := planEntries(t, filepath.Join(dir, "p.json"))
	run := startRun(t, dir, []string{"DLQCTL_TEST_CRASH=intent:2:stop"}, "--source", fx.Source, "redrive", "apply", "p.json")
	pid := run.cmd.Process.Pid
	waitFor(t, "the run to stop after its second write of intents", func() bool {
		select {
		case <-run.done:
			_, out, _ := run.wait(0)
			t.Fatalf("the run ended before its second write of intents:\n%s", out)
		default:
		}
		return testproc.ProcState(pid) == 'T'
	})
	broker := srv.PID()
	if err := testproc.Freeze(broker); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := testproc.Thaw(broker); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(thaw)
	if err := testproc.Thaw(pid); err != nil {
		t.Fatal(err)
	}
	sent := waitConns(t, pid, broker, func(_, server testproc.TCPConn) bool { return server.RxQueue > 0 })
	if !sent {
		thaw()
		t.Fatalf("the run sent nothing to the broker within 10 s of journaling its intents")
	}
	if err := testproc.Freeze(pid); err != nil {
		t.Fatal(err)
	}
	thaw()
	if !waitConns(t, pid, broker, func(client, _ testproc.TCPConn) bool { return client.RxQueue > 0 }) {
		t.Logf("the broker's answer had not reached the run within 10 s: the connections are cut with the publishes unanswered")
	}
	ends, _, err := testproc.Between(pid, broker)
	if err != nil {
		t.Fatal(err)
	}
	if err := testproc.Cut(ends); err != nil {
		t.Fatal(err)
	}
	if err := testproc.Thaw(pid); err != nil {
		t.Fatal(err)
	}
	code, out, ended := run.wait(connDropBound)
	if !ended {
		run.kill()
		t.Fatalf("the run did not end within %s of losing its connection to the broker (a hang)\n%s", connDropBound, tail(out))
	}
	t.Logf("after the cut the run ended with exit %d", code)
	steps := journalSteps(t, filepath.Join(dir, "p.journal"))
	for id := range eventsWith(entries, steps, "failed") {
		t.Errorf("%s journaled as failed (a refusal by the broker) after a lost connection: its outcome is unknown", id)
	}
	if code != 0 {
		if !strings.Contains(out, "resume") {
			t.Errorf("apply that lost its connection: exit %d without the resume command\n%s", code, tail(out))
		}
		code, out = RunCommand(t, dir, nil, nil, "--source", fx.Source, "-o", "json", "redrive", "resume", "p.journal")
		if code != 0 {
			t.Fatalf("resume after the lost connection: exit %d\n%s", code, out)
		}
		if d := parseRun(t, out); d.Status != "completed" || d.Moved != n {
			t.Errorf("resume after the lost connection: %s, moved %d; want completed, %d", d.Status, d.Moved, n)
		}
	}
	if l := dlqLen(t, fx); l != 0 {
		t.Errorf("%d entries left in the DLQ", l)
	}
	ambiguous := eventsWith(entries, journalSteps(t, filepath.Join(dir, "p.journal")), "ambiguous")
	checkOnceOutsideAmbiguous(t, fx, fps, consumeAll(t, fx, filepath.Join(dir, "inbox.db")), ambiguous)
}

// waitConns waits up to 10 s until some connection between client and
// server satisfies cond (given the client's end and the server's).
func waitConns(t *testing.T, client, server int, cond func(c, s testproc.TCPConn) bool) bool {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		cs, ss, err := testproc.Between(client, server)
		if err != nil {
			t.Fatal(err)
		}
		for i := range cs {
			if cond(cs[i], ss[i]) {
				return true
			}
		}
	}
	return false
}

func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}

// casePIDNamespace: while a run holds the DLQ, a second run started in
// another PID namespace on the same host (same host name: Kubernetes
// hostNetwork pods, docker --uts=host), where the holder's PID is not
// visible, is refused (exit 7): a resume of a copy of the live run's
// journal (the same run ID) and a run of another plan alike. Whatever
// ran, every event reaches the consumer once, or more only where a
// journal records a resend of unknown outcome.
func casePIDNamespace(t *testing.T, srv *Target) {
	wrap, err := testproc.PIDNamespace()
	if err != nil {
		t.Fatalf("a second run in another PID namespace cannot be started on this machine: %v", err)
	}
	const n = 25
	fx := srv.Fresh(t)
	fps := seed(t, fx, n, "timeout", 1)
	dir, copied, other := t.TempDir(), t.TempDir(), t.TempDir()
	// 25 entries at 2/s: the run lives through both tries below.
	slow := []string{"--rate", "2", "--burst", "1", "--ramp", "50", "--settle", "0s", "--unverified-ok"}
	planAndApprove(t, dir, fx, "redrive", slow...)
	// The other plan takes the newest entries: the run reaches them last.
	planAndApprove(t, other, fx, "redrive", append(slow, "--event-id", "E024", "--event-id", "E025")...)
	run := startRun(t, dir, nil, "--source", fx.Source, "redrive", "apply", "p.json")
	waitFor(t, "the run to journal its first intents", func() bool { return countSteps(filepath.Join(dir, "p.journal"), "intent") > 0 })
	for _, f := range []string{"p.json", "p.journal"} {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(copied, f), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, try := range []struct{ what, dir, cmd string }{
		{"a run of another plan", other, "apply p.json"},
		{"a resume of a copy of the live run's journal (its run ID)", copied, "resume p.journal"},
	} {
		args := append([]string{"--source", fx.Source, "redrive"}, strings.Fields(try.cmd)...)
		r := startWrapped(t, try.dir, nil, wrap, args...)
		code, out, ended := r.wait(2 * time.Minute)
		if !ended {
			r.kill()
		}
		if code != 7 {
			t.Errorf("%s, started in another PID namespace with the same host name while the run lives: exit %d, want 7 (busy)\n%s", try.what, code, tail(out))
		}
	}
	select {
	case <-run.done:
		t.Logf("the first run ended before it was killed: %s", firstLine(run.out.String()))
	default:
		run.kill()
	}
	code, out := RunCommand(t, dir, nil, nil, "--source", fx.Source, "-o", "json", "redrive", "resume", "p.journal")
	if code != 0 {
		t.Errorf("resume of the first run: exit %d\n%s", code, tail(out))
	}
	entries := planEntries(t, filepath.Join(dir, "p.json"))
	ambiguous := map[string]bool{}
	for _, j := range []string{filepath.Join(dir, "p.journal"), filepath.Join(copied, "p.journal")} {
		for id := range eventsWith(entries, journalSteps(t, j), "ambiguous") {
			ambiguous[id] = true
		}
	}
	if l := dlqLen(t, fx); l != 0 {
		// What the refused tries left (a run killed with its lease lost
		// to another) is moved now, so the consumer's count is whole.
		c := t.TempDir()
		planAll(t, c, fx)
		if code, out := RunCommand(t, c, nil, nil, "--source", fx.Source, "redrive", "apply", "p.json"); code != 0 {
			t.Errorf("the run after both: exit %d\n%s", code, tail(out))
		}
	}
	checkOnceOutsideAmbiguous(t, fx, fps, consumeAll(t, fx, filepath.Join(dir, "inbox.db")), ambiguous)
}

// caseForgedRecord: a record of removals that dlqctl did not write (any
// producer can write to the record's topic or queue) hides nothing: stats
// counts the entry, a plan takes it, apply moves it, and the consumer
// receives it once.
func caseForgedRecord(t *testing.T, srv *Target) {
	need(t, srv, "Forge", srv.Forge != nil)
	const n = 6
	fx := srv.Fresh(t)
	fps := seed(t, fx, n, "timeout", 1)
	var victim string
	for _, it := range listItems(t, fx) {
		if it.EventID == "E003" {
			victim = it.ID
		}
	}
	if victim == "" {
		t.Fatal("E003 is not listed")
	}
	srv.Forge(t, fx, victim)
	if l := dlqLen(t, fx); l != n {
		t.Errorf("stats counts %d entries after a forged record of removing %s (E003), want %d", l, victim, n)
	}
	dir := t.TempDir()
	if got := len(planAll(t, dir, fx)); got != n {
		t.Errorf("the plan takes %d entries after a forged record of removing %s (E003), want %d", got, victim, n)
	}
	code, out := RunCommand(t, dir, nil, nil, "--source", fx.Source, "-o", "json", "redrive", "apply", "p.json")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	if l := dlqLen(t, fx); l != 0 {
		// What the plan left out is moved by a run of its own: the
		// consumer's count then tells whether it was lost.
		c := t.TempDir()
		planAll(t, c, fx)
		RunCommand(t, c, nil, nil, "--source", fx.Source, "redrive", "apply", "p.json")
	}
	if srv.Held != nil {
		if h := srv.Held(t, fx); h != 0 {
			t.Errorf("the broker still holds %d entries", h)
		}
	}
	checkOnceOutsideAmbiguous(t, fx, fps, consumeAll(t, fx, filepath.Join(dir, "inbox.db")), nil)
}

type listItem struct {
	ID      string `json:"id"`
	EventID string `json:"event_id"`
}

func listItems(t *testing.T, fx Fixture) []listItem {
	t.Helper()
	code, out := RunCommand(t, t.TempDir(), nil, nil, "--source", fx.Source, "list", "--limit", "0", "-o", "json")
	if code != 0 {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	var l struct {
		Items []listItem `json:"items"`
	}
	mustJSONString(t, out, &l)
	return l.Items
}
