package conformance

import (
	"fmt"
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
// chunk's intents; from there the run and the broker take turns, one
// exchange at a time — the run sends while the broker is frozen, the
// broker answers while the run is frozen — until the origin has taken a
// publish of that chunk: its answer then sits unread in the run's socket.
// It is taken away there and both ends of every connection between them
// are cut. The run ends
// within a bound (no hang), journals no entry as refused (its outcome is
// unknown, not failed), and, resumed, puts every event on the origin once
// — or more only where the journal records a resend of unknown outcome.
func caseConnDrop(t *testing.T, srv *Target) {
	need(t, srv, "PID", srv.PID != nil)
	need(t, srv, "Published", srv.Published != nil)
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
	cutOncePublished(t, srv, fx, pid)
	if err := testproc.Thaw(pid); err != nil {
		t.Fatal(err)
	}
	cpu := testproc.CPUTime(pid)
	code, out, ended := run.wait(connDropBound)
	if !ended {
		spent := testproc.CPUTime(pid) - cpu
		run.kill()
		t.Fatalf("the run did not end within %s of losing its connection to the broker (a hang, %s of processor time spent meanwhile)\n%s",
			connDropBound, spent, tail(out))
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
		if !completes(t, dir, fx, "resume after the lost connection", n, "resume", "p.journal") {
			t.FailNow()
		}
	}
	if l := dlqLen(t, fx); l != 0 {
		t.Errorf("%d entries left in the DLQ", l)
	}
	ambiguous := eventsWith(entries, journalSteps(t, filepath.Join(dir, "p.journal")), "ambiguous")
	checkOnceOutsideAmbiguous(t, fx, fps, consumeAll(t, fx, filepath.Join(dir, "inbox.db")), ambiguous)
}

// cutOncePublished steps the stopped run (pid) and the broker in turns
// until the origin has taken a publish, then takes the broker's answers
// out of the run's sockets and cuts every connection between them; the
// run is left stopped, the broker running.
func cutOncePublished(t *testing.T, srv *Target, fx Fixture, pid int) {
	t.Helper()
	before := srv.Published(t, fx)
	broker := srv.PID()
	frozen := false
	freeze := func(p int) {
		if err := testproc.Freeze(p); err != nil {
			t.Fatal(err)
		}
	}
	thaw := func(p int) {
		if err := testproc.Thaw(p); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if frozen {
			testproc.Thaw(broker)
		}
	})
	freeze(broker)
	frozen = true
	for round := 1; ; round++ {
		if round > 30 {
			t.Fatalf("no publish reached the origin in 30 exchanges between the run and the broker")
		}
		thaw(pid)
		if !unreadSettles(t, pid, broker, 10*time.Second, func(_, server testproc.TCPConn) int { return server.RxQueue }) {
			t.Fatalf("exchange %d: the run sent nothing more to the broker within 10 s", round)
		}
		freeze(pid)
		thaw(broker)
		frozen = false
		unreadSettles(t, pid, broker, 3*time.Second, func(client, _ testproc.TCPConn) int { return client.RxQueue })
		published := srv.Published(t, fx) > before
		freeze(broker)
		frozen = true
		if published {
			break
		}
	}
	ends, _, err := testproc.Between(pid, broker)
	if err != nil {
		t.Fatal(err)
	}
	// The answers wait in the run's sockets: taken away and the
	// connections cut, they never reach it.
	lost, err := testproc.Drain(pid, ends)
	if err != nil {
		t.Fatal(err)
	}
	if err := testproc.Cut(ends); err != nil {
		t.Fatal(err)
	}
	t.Logf("a publish reached the origin; the run's connections are cut with %d bytes of answers unread", lost)
	thaw(broker)
	frozen = false
}

// unreadSettles waits up to bound until the bytes unread at one end
// (unread gives them for a connection between client and server) of
// the connections between client and server are more than none and have
// stopped growing.
func unreadSettles(t *testing.T, client, server int, bound time.Duration, unread func(c, s testproc.TCPConn) int) bool {
	t.Helper()
	last, since := -1, time.Now()
	for deadline := time.Now().Add(bound); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		cs, ss, err := testproc.Between(client, server)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for i := range cs {
			total += unread(cs[i], ss[i])
		}
		if total != last {
			last, since = total, time.Now()
		}
		if total > 0 && time.Since(since) >= 150*time.Millisecond {
			return true
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
	// The other plan takes the same entries (a plan of only the newest
	// would take nothing: their keys have older entries in the DLQ), so
	// a run of it would race the first for each.
	planAndApprove(t, other, fx, "redrive", slow...)
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
	completes(t, dir, fx, "resume of the first run", -1, "resume", "p.journal")
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

// caseBookkeepingDestination: nothing dlqctl keeps in the broker is a
// redrive's destination: named with --to, the plan is refused (exit 2);
// named as the origin by a dead letter (anyone who can dead-letter can
// name one), the entry is left out of the plan as refused, and the rest
// is planned.
func caseBookkeepingDestination(t *testing.T, srv *Target) {
	need(t, srv, "Bookkeeping", srv.Bookkeeping != nil)
	fx := srv.Fresh(t)
	seed(t, fx, 2, "timeout", 1)
	// A run first: the records it keeps exist from then on.
	first := t.TempDir()
	planAll(t, first, fx)
	if !completes(t, first, fx, "a first redrive", 2, "apply", "p.json") {
		t.FailNow()
	}
	names := srv.Bookkeeping(fx)
	seed(t, fx, 1, "timeout", 10)
	for i, name := range names {
		hostile := fx
		hostile.Origin = name
		seed(t, hostile, 1, "timeout", 20+i)
		dir := t.TempDir()
		code, out := RunCommand(t, dir, nil, nil, "--source", fx.Source, "redrive", "plan", "--reason", "x", "--out", "to.json", "--to", name)
		if code != 2 {
			t.Errorf("plan --to %s (dlqctl's own): exit %d, want 2 (refused)\n%s", name, code, tail(out))
		}
	}
	dir := t.TempDir()
	args := append([]string{"--source", fx.Source, "redrive", "plan", "--reason", "conformance", "--out", "p.json"}, fastPlan...)
	if code, out := RunCommand(t, dir, nil, nil, args...); code != 0 {
		t.Fatalf("redrive plan: exit %d\n%s", code, out)
	}
	plan := readPlan(t, filepath.Join(dir, "p.json"))
	for _, e := range plan.Entries {
		if e.EventID != "E010" {
			t.Errorf("%s is planned to %s, which is dlqctl's own", e.EventID, e.Dest)
		}
	}
	refused := map[string]bool{}
	for _, x := range plan.Excluded {
		refused[x.EventID] = strings.Contains(x.Why, "refused")
	}
	for i, name := range names {
		if id := fmt.Sprintf("E%03d", 20+i); !refused[id] {
			t.Errorf("%s, dead-lettered from %s (dlqctl's own), is not left out of the plan as refused", id, name)
		}
	}
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
	if !completes(t, dir, fx, "apply", -1, "apply", "p.json") {
		t.FailNow()
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
