package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The cases of this file hold every backend to "nothing lost, nothing
// twice" where ordinary operations put it at risk: the same event
// redriven twice in a short time, a second run through another spelling of
// the DLQ's URL, a destination that refuses one entry of a chunk, a scan
// killed halfway, and a lease holder paused past its lease.

// fastPlan are plan flags for a run without pauses.
var fastPlan = []string{"--rate", "0", "--unverified-ok", "--settle", "0s"}

// caseReRedrive: redrive, the consumer fails the event again (it is
// dead-lettered a second time, moments later), redrive again: the second
// redrive reaches the origin too. Nothing may take the second for a
// resend of the first.
func caseReRedrive(t *testing.T, srv *Target) {
	if srv.caps.Move == "" {
		return
	}
	fx := srv.Fresh(t)
	seed(t, fx, 3, "timeout", 1)
	first := t.TempDir()
	planAndApprove(t, first, fx, "redrive", fastPlan...)
	if code, out := RunCommand(t, first, nil, nil, "--source", fx.Source, "redrive", "apply", "p.json"); code != 0 {
		t.Fatalf("first redrive: exit %d\n%s", code, out)
	}
	// The same event, the same payload: dead-lettered again.
	seedAs(t, fx, 1, "timeout", 50, func(int) (string, int) { return "E002", 2 })
	second := t.TempDir()
	planAndApprove(t, second, fx, "redrive", fastPlan...)
	code, out := RunCommand(t, second, nil, nil, "--source", fx.Source, "-o", "json", "redrive", "apply", "p.json")
	if code != 0 {
		t.Fatalf("second redrive: exit %d\n%s", code, out)
	}
	if run := parseRun(t, out); run.Moved != 1 {
		t.Errorf("second redrive moved %d, want 1", run.Moved)
	}
	if n := dlqLen(t, fx); n != 0 {
		t.Errorf("%d entries left in the DLQ", n)
	}
	rows := consumeAll(t, fx, filepath.Join(second, "inbox.db"))
	if r := rows["E002"]; r.Attempts < 2 {
		t.Errorf("E002 reached the consumer %d times, want 2 (one per redrive): the second redrive was lost", r.Attempts)
	}
	for _, id := range []string{"E001", "E002", "E003"} {
		if r, ok := rows[id]; !ok || r.Effects != 1 {
			t.Errorf("%s: %+v, want one effect", id, r)
		}
	}
}

// caseAnotherURL: while a run holds the DLQ, a run of another plan made
// through another URL of the same DLQ is refused (exit 7); should a
// backend let it run, no event may reach the consumer twice.
func caseAnotherURL(t *testing.T, srv *Target) {
	if srv.caps.Move == "" {
		return
	}
	const n = 20
	fx := srv.Fresh(t)
	fps := seed(t, fx, n, "timeout", 1)
	a, b := t.TempDir(), t.TempDir()
	planAndApprove(t, a, fx, "redrive", "--rate", "4", "--burst", "1", "--ramp", "50", "--settle", "0s", "--unverified-ok")
	other := fx
	other.Source = fx.Alias
	planAndApprove(t, b, other, "redrive", fastPlan...)
	run := background(t, a, "--source", fx.Source, "redrive", "apply", "p.json")
	waitFor(t, "the run to start", func() bool {
		fi, err := os.Stat(filepath.Join(a, "p.journal"))
		return err == nil && fi.Size() > 0
	})
	code, out := RunCommand(t, b, nil, nil, "--source", fx.Alias, "redrive", "apply", "p.json")
	switch {
	case code == 7:
	case code == 2 && strings.Contains(out, strings.SplitN(fx.Alias, "?", 2)[0]):
		// Refused as written: the other URL names bookkeeping that is
		// not this DLQ's (Kafka: another state topic), and the refusal
		// says so. Nothing ran.
	case srv.caps.Lease:
		t.Errorf("a run through %s while another holds the DLQ: exit %d, want 7 (busy)\n%s", fx.Alias, code, out)
	case code != 0 && code != 6:
		t.Fatalf("a run through another URL: exit %d\n%s", code, out)
	}
	select {
	case <-run.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the first run did not end")
	}
	checkOnce(t, srv, fps, consumeAll(t, fx, filepath.Join(a, "inbox.db")))
}

// caseRefusedInChunk: the destination refuses one entry of a chunk: that
// entry is a failure of its own (exit 6, named), the rest of the chunk
// moves, and the refused entry stays in the DLQ.
func caseRefusedInChunk(t *testing.T, srv *Target) {
	if srv.caps.Move == "" {
		return
	}
	if srv.Refuse == nil {
		t.Fatalf("%s: the conformance harness has no way to make a destination refuse one entry (server.Refuse): add one", srv.name)
	}
	fx := srv.Fresh(t)
	seed(t, fx, 5, "timeout", 1)
	odd := fx
	odd.Origin = fx.Origin + "-refusing"
	seed(t, odd, 1, "timeout", 6)
	dir := t.TempDir()
	planAndApprove(t, dir, fx, "redrive", append([]string{"--ramp", "10", "--burst", "10"}, fastPlan...)...)
	raw, err := os.ReadFile(filepath.Join(dir, "p.json"))
	if err != nil {
		t.Fatal(err)
	}
	var plan struct {
		Entries []struct {
			ID      string `json:"id"`
			EventID string `json:"event_id"`
			Dest    string `json:"dest"`
		} `json:"entries"`
	}
	mustJSON(t, raw, &plan)
	refusedID, refusedSeq := "", 0
	for i, e := range plan.Entries {
		if e.EventID == "E006" {
			refusedID, refusedSeq = e.ID, i+1
			srv.Refuse(t, fx, e.Dest, e.ID)
		}
	}
	if len(plan.Entries) != 6 || refusedID == "" {
		t.Fatalf("the plan holds %d entries, want 6 with E006: %s", len(plan.Entries), raw)
	}
	code, out := RunCommand(t, dir, nil, nil, "--source", fx.Source, "-o", "json", "redrive", "apply", "p.json")
	if code != 6 {
		t.Fatalf("apply with one refused entry: exit %d, want 6\n%s", code, out)
	}
	var doc struct {
		Moved  int `json:"moved"`
		Failed int `json:"failed"`
	}
	i := strings.Index(out, "{\n")
	if i < 0 || json.NewDecoder(strings.NewReader(out[i:])).Decode(&doc) != nil {
		t.Fatalf("no run document in:\n%s", out)
	}
	if doc.Moved != 5 || doc.Failed != 1 {
		t.Errorf("moved %d, failed %d; want 5 and 1\n%s", doc.Moved, doc.Failed, out)
	}
	journal, err := os.ReadFile(filepath.Join(dir, "p.journal"))
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, line := range strings.Split(string(journal), "\n") {
		named = named || strings.Contains(line, `"type":"failed"`) && strings.Contains(line, fmt.Sprintf(`"seq":%d,`, refusedSeq))
	}
	if !named {
		t.Errorf("the journal names no failure of entry %d (%s):\n%s", refusedSeq, refusedID, journal)
	}
	if n := dlqLen(t, fx); n != 1 {
		t.Errorf("%d entries left in the DLQ, want the refused one", n)
	}
}

// caseKilledScan: stats and list killed (SIGKILL) in the middle of their
// read leave the DLQ as it was: the counts after are the true ones, and a
// redrive then moves every entry once.
func caseKilledScan(t *testing.T, srv *Target) {
	const n = 60
	fx := srv.Fresh(t)
	fps := seed(t, fx, n, "timeout", 1)
	dir := t.TempDir()
	for i, cmd := range []string{"stats", "list", "stats", "list"} {
		p := background(t, dir, "--source", fx.Source, cmd)
		time.Sleep(time.Duration(100+150*i) * time.Millisecond)
		p.kill9()
	}
	// A backend whose scans hide what they read (SQS: a visibility
	// timeout) counts what a killed scan still hides as not seen; the two
	// together are the DLQ, and the hidden entries come back by themselves.
	if seen, hidden := dlqLenSeen(t, fx); seen+hidden != n {
		t.Errorf("stats after killed scans counts %d (and %d not seen), want %d", seen, hidden, n)
	}
	deadline := time.Now().Add(90 * time.Second)
	for seen, _ := dlqLenSeen(t, fx); seen != n; seen, _ = dlqLenSeen(t, fx) {
		if time.Now().After(deadline) {
			t.Fatalf("entries hidden by the killed scans never came back: %d of %d seen", seen, n)
		}
		time.Sleep(time.Second)
	}
	if srv.caps.Move == "" {
		return
	}
	planAndApprove(t, dir, fx, "redrive", fastPlan...)
	code, out := RunCommand(t, dir, nil, nil, "--source", fx.Source, "-o", "json", "redrive", "apply", "p.json")
	if code != 0 {
		t.Fatalf("apply after killed scans: exit %d\n%s", code, out)
	}
	if run := parseRun(t, out); run.Moved != n {
		t.Errorf("moved %d after killed scans, want %d", run.Moved, n)
	}
	checkOnce(t, srv, fps, consumeAll(t, fx, filepath.Join(dir, "inbox.db")))
}

// pausedTakeoverBound is how long the paused-holder case gives another run
// to take a stopped holder's lease over, well past the leases that lapse
// (Redis, NATS and Kafka: 30 s after the last renewal). pausedRefusedFor is
// how long it tries where the backend says a live holder keeps its lease
// (Target.HolderKeepsLease): every try then meets the same holder, stopped,
// so more tries would assert nothing more.
const (
	pausedTakeoverBound = 75 * time.Second
	pausedRefusedFor    = 8 * time.Second
)

// casePausedHolder: a run stopped (SIGSTOP) past its lease while another
// run takes the DLQ over must not carry on moving when it wakes: every
// event reaches the consumer once. A backend whose lease a paused holder
// keeps (an flock lives with the process) refuses the other run instead,
// which is as safe.
func casePausedHolder(t *testing.T, srv *Target) {
	if srv.caps.Move == "" || !srv.caps.Lease {
		return
	}
	const n = 30
	fx := srv.Fresh(t)
	fps := seed(t, fx, n, "timeout", 1)
	a, b := t.TempDir(), t.TempDir()
	planAndApprove(t, a, fx, "redrive", "--rate", "4", "--burst", "1", "--ramp", "50", "--settle", "0s", "--unverified-ok")
	planAndApprove(t, b, fx, "redrive", fastPlan...)
	run := background(t, a, "--source", fx.Source, "redrive", "apply", "p.json")
	waitFor(t, "the run to move", func() bool {
		fi, err := os.Stat(filepath.Join(a, "p.journal"))
		return err == nil && fi.Size() > 2000
	})
	if err := run.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The other run tries until the paused holder's lease lapses.
	var code int
	var out string
	tries := pausedTakeoverBound
	if srv.HolderKeepsLease != "" {
		tries = pausedRefusedFor
	}
	deadline := time.Now().Add(tries)
	for {
		code, out = RunCommand(t, b, nil, nil, "--source", fx.Source, "redrive", "apply", "p.json", "--skip-missing")
		if code != 7 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	switch {
	case code == 7:
		t.Logf("%s: the paused holder kept its lease for %s; the other run was refused throughout", srv.name, tries)
	case srv.HolderKeepsLease != "":
		t.Errorf("the other run was not refused (exit %d) while the paused holder lives, and %s\n%s", code, srv.HolderKeepsLease, out)
	case code == 0, code == 6:
	default:
		t.Errorf("the run that took over: exit %d\n%s", code, out)
	}
	if err := run.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-run.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the paused run did not end after SIGCONT")
	}
	t.Logf("the woken holder ended with exit %d", run.cmd.ProcessState.ExitCode())
	// Whatever neither run moved (a holder that stopped when it found its
	// lease lost) is moved now by a run of its own; then every event must
	// have reached the consumer once.
	if l := dlqLen(t, fx); l != 0 {
		c := t.TempDir()
		planAndApprove(t, c, fx, "redrive", fastPlan...)
		if code, out := RunCommand(t, c, nil, nil, "--source", fx.Source, "redrive", "apply", "p.json"); code != 0 {
			t.Errorf("the run after both: exit %d\n%s", code, out)
		}
	}
	checkOnce(t, srv, fps, consumeAll(t, fx, filepath.Join(a, "inbox.db")))
	if l := dlqLen(t, fx); l != 0 {
		t.Errorf("%d entries left in the DLQ", l)
	}
}

// dlqLenSeen is stats' total, and the entries it reports it could not see
// (backend.not_seen; 0 where a scan sees everything).
func dlqLenSeen(t *testing.T, fx Fixture) (seen, hidden int) {
	t.Helper()
	code, out := RunCommand(t, t.TempDir(), nil, nil, "--source", fx.Source, "stats", "-o", "json")
	if code != 0 {
		t.Fatalf("stats: exit %d\n%s", code, out)
	}
	var s struct {
		Total   int             `json:"total"`
		Backend json.RawMessage `json:"backend"`
	}
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("stats printed no JSON: %s", out)
	}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&s); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var extras struct {
		NotSeen int `json:"not_seen"`
	}
	json.Unmarshal(s.Backend, &extras) // a backend section of another shape has none
	return s.Total, extras.NotSeen
}
