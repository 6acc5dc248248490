package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/dir"
	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/internal/crashhook"
	"github.com/dlqctl/dlqctl/internal/workertest"
)

// asDLQCTL makes the test binary act as the dlqctl command, so that the
// crash cases can kill a real process at a journal step.
const asDLQCTL = "DLQCTL_CONFORMANCE_AS_DLQCTL"

// Suite is the conformance suite for one backend. A backend's
// conformance_test.go makes it in a package-level variable with For and
// calls its Run from TestConformance:
//
//	var suite = conformance.For(kafkadlq.Registration())
//
//	func TestConformance(t *testing.T) {
//		suite.Run(t, func(t *testing.T) *conformance.Target { … })
//	}
type Suite struct {
	reg backend.Registration
}

// For is the suite for the backend reg. It also makes the test binary act
// as the dlqctl command when the suite starts it as a child (RunCommand,
// with the DLQCTL_TEST_CRASH hook): made in a package-level variable, it
// runs before the binary's TestMain could start servers, and the child
// holds the same backends as the suite. It does not return then.
func For(reg backend.Registration) Suite {
	s := Suite{reg: reg}
	if os.Getenv(asDLQCTL) == "1" {
		os.Exit(cmd.MainWith(&cmd.Factory{Deps: cmd.Deps{IO: cmd.SystemIO(), Now: time.Now, Getenv: os.Getenv,
			Build: cmd.BuildInfo{Version: "test"}, Backends: s.backends(), CrashHook: crashhook.Parse(os.Getenv("DLQCTL_TEST_CRASH"))}}))
	}
	return s
}

// backends is the registry the suite's dlqctl holds: the backend under
// test and the directory queue, which holds the sample incident that the
// read-back case imports.
func (s Suite) backends() *backend.Registry {
	if s.reg.Name == "dir" {
		return backend.NewRegistry(s.reg)
	}
	return backend.NewRegistry(dirqueue.Registration(), s.reg)
}

// Target is one backend's real server, as the suite drives it.
type Target struct {
	name string
	caps backend.Capabilities
	// backends are what the suite's dlqctl holds (Suite.backends).
	backends *backend.Registry
	// Fresh makes a new, empty DLQ.
	Fresh func(t *testing.T) Fixture
	// Down and Up, when set, take the server down and bring it back.
	Down, Up func() error
	// Missing, when set, names a DLQ that does not exist (where fresh
	// creates its DLQ up front); else a fresh, never-written one is used.
	Missing func(t *testing.T) string
	// Unordered: the backend keeps no order among entries written within
	// one millisecond, so a read-back compares its list as a set (SQS).
	Unordered bool
	// Outage is added to the source URL's query in the restart case, so
	// that the client gives up on a server that is down instead of riding
	// it out (Pulsar: ?timeout=).
	Outage string
	// Refuse makes the destination dest refuse the entry entryID that a
	// plan sends there (dir: a file of its name in the inbox; Redis: dest
	// is a key of another type; Pulsar: dest is terminated), for the case
	// of one refused entry in a chunk. nil: no way is known here.
	Refuse func(t *testing.T, fx Fixture, dest, entryID string)
	// HolderKeepsLease, when set, says why this backend's lease stays
	// with a run that is stopped but alive on this host (dir: the flock
	// lives with the process; SQS: a live PID keeps its tag). The
	// paused-holder case then requires the other run to be refused, and
	// tries it for pausedRefusedFor instead of waiting for a takeover.
	HolderKeepsLease string

	// The battery's hooks (battery.go). A case whose hook is missing
	// fails, unless NotApplicable declares it (where mayNotApply allows).

	// Kill ends the server with SIGKILL, as a crash does (no clean
	// shutdown); Up brings it back with what it had stored.
	Kill func() error
	// PID is the server's process ID now (it changes over a restart).
	PID func() int
	// Published counts what fx's origin has taken in so far (a stream's
	// or topic's messages, a queue's depth); asked while the run is
	// frozen, it tells that a publish has reached the broker.
	Published func(t *testing.T, fx Fixture) int
	// Held counts the dead letters the broker itself would still hand
	// out from fx's DLQ, whatever dlqctl's own records say (a RabbitMQ
	// queue's messages, a Pulsar subscription's backlog, a stream's
	// messages). nil where a removal is dlqctl's record alone (Kafka: a
	// record stays in its topic; the state topic says it was moved).
	Held func(t *testing.T, fx Fixture) int
	// Churn, when set, applies the broker's own housekeeping to fx now,
	// as its defaults would in time: retention and compaction of the
	// DLQ and of what dlqctl keeps beside it (Pulsar: unload and trim
	// the topics).
	Churn func(t *testing.T, fx Fixture)
	// Recreate deletes fx's DLQ and makes it again, empty, the way an
	// operator does with the broker's own tools (dlqctl's records beside
	// it are left as they are).
	Recreate func(t *testing.T, fx Fixture)
	// Deduplicating, when set, makes a fresh DLQ whose origin drops a
	// publish it takes for a duplicate (SQS: FIFO queues; Pulsar:
	// deduplication on), for the case of a DLQ made again. nil: Fresh's
	// origin does already (NATS: every stream has a duplicate window), or
	// the broker has no such thing.
	Deduplicating func(t *testing.T) Fixture
	// Snapshot is what the broker holds in fx's DLQ: one line per
	// message in the broker's order, with its delivery count (a delivery
	// count, a receive count) written deliveries=N where the broker keeps
	// one, and lines for the broker's state of the DLQ that a read could
	// change (consumers, groups, cursors). Lines name messages by what a
	// twin DLQ seeded alike shares (event ID, position), never by an ID
	// the broker made. It may cost (a RabbitMQ queue is read by
	// delivering): the read cases take it once, at the end.
	Snapshot func(t *testing.T, fx Fixture) []string
	// ReadCost, on a broker that cannot be read at all without raising a
	// delivery count, says so (SQS: a receive); mayCostReads lists who
	// may.
	ReadCost string
	// Limited makes a fresh DLQ with the lowest delivery limit the
	// broker allows on it (a RabbitMQ quorum queue's delivery limit, an
	// SQS DLQ's own redrive policy).
	Limited func(t *testing.T) Fixture
	// Native writes copies byte-identical dead letters of e into fx's
	// DLQ in the broker's own form, as a producer or the broker's
	// dead-lettering would: not through import, which marks each entry
	// with its id and reads the DLQ first.
	Native func(t *testing.T, fx Fixture, e envelope.Envelope, copies int)
	// Seed, when set, is how the cases put their envelopes into a DLQ of
	// this target: a shape that dlqctl import does not write (a Kafka
	// share group's dead letters, which hold only headers and stand for
	// a record of their origin topic). nil: dlqctl import.
	Seed func(t *testing.T, fx Fixture, es []envelope.Envelope)
	// TwoPointers makes a fresh DLQ holding two entries that point at
	// one message (two advisories about one stream message, two
	// share-group dead letters about one record), and returns it with
	// that message's event ID; its Consume sees only what is published
	// after the hook returns.
	TwoPointers func(t *testing.T) (Fixture, string)
	// Forge writes, as a plain producer would (not dlqctl), a record of
	// dlqctl's bookkeeping in the broker saying that fx's entry entryID
	// was removed.
	Forge func(t *testing.T, fx Fixture, entryID string)
	// Bookkeeping names, as a redrive's destination would name them,
	// what dlqctl keeps in the broker for fx's DLQ: a state topic, a
	// record topic or queue, a lease key, queue or subject.
	Bookkeeping func(fx Fixture) []string
	// NotApplicable names battery cases that cannot arise on this
	// backend, each with the reason.
	NotApplicable map[string]string
	// Shape, where a backend reads DLQs of several shapes and this
	// target's fixtures have one of them (RabbitMQ: "stream"), names it:
	// mayNotApply may allow a declaration to that shape alone.
	Shape string
}

// Fixture is one empty DLQ and the origin its entries go back to.
type Fixture struct {
	Source string
	// Origin is the topic or stream named in the seeded envelopes.
	Origin string
	// Consume are the reference worker's flags to consume the origin.
	Consume []string
	// ImportFlags are extra flags that import needs here (dir: --init).
	ImportFlags []string
	// Self is the DLQ itself written as a redrive destination (--to).
	Self string
	// Alias is another source URL of the same DLQ (another spelling of
	// its host, path, topic or bookkeeping).
	Alias string

	// worker is the reference worker built with this backend's mode alone
	// (set by Suite.Run).
	worker workertest.Build
	// seed is the Target's Seed (set by Suite.Run).
	seed func(t *testing.T, fx Fixture, es []envelope.Envelope)
}

// Run runs the suite's backend through every case, on the server that
// start brings up (or reuses) for it. start may skip the test (a Java
// server under -short) and must fail it loudly when its server is missing.
func (s Suite) Run(t *testing.T, start func(t *testing.T) *Target) {
	srv := start(t)
	srv.name, srv.caps, srv.backends = s.reg.Name, s.reg.Capabilities, s.backends()
	fresh, worker := srv.Fresh, workertest.Only(s.reg.Name)
	srv.Fresh = func(t *testing.T) Fixture {
		fx := fresh(t)
		fx.worker, fx.seed = worker, srv.Seed
		return fx
	}
	runCases(t, srv, suiteCases())
}

// suiteCases are the suite's cases, in the order they run; the battery is
// the last.
func suiteCases() []batteryCase {
	return []batteryCase{
		{"read-back", caseReadBack},
		{"missing-dlq", caseMissingDLQ},
		{"redrive-with-consumer", caseRedriveWithConsumer},
		{"gates", caseGates},
		{"per-key-order", casePerKeyOrder},
		{"stale-plan", caseStalePlan},
		{"resolve", caseResolve},
		{"crash-matrix", caseCrashMatrix},
		{"one-run-at-a-time", caseOneRunAtATime},
		{"restart-mid-apply", caseRestartMidApply},
		{"refused-destination", caseRefusedDestination},
		{"re-redrive", caseReRedrive},
		{"another-url", caseAnotherURL},
		{"refused-in-chunk", caseRefusedInChunk},
		{"killed-scan", caseKilledScan},
		{"paused-holder", casePausedHolder},
		{"battery", runBattery},
	}
}

// caseMissingDLQ: check on a DLQ that does not exist (a typo in a CI
// job's URL) is a usage error naming it, never a green check; with
// --allow-missing it reads as empty on purpose.
func caseMissingDLQ(t *testing.T, srv *Target) {
	var source string
	if srv.Missing != nil {
		source = srv.Missing(t)
	} else {
		source = srv.Fresh(t).Source
	}
	code, out := RunCommand(t, t.TempDir(), nil, nil, "--source", source, "check", "--max-total", "0")
	if code != 2 || !strings.Contains(out, "does not exist") {
		t.Errorf("check on a DLQ that does not exist: exit %d, want 2 saying so\n%s", code, out)
	}
	code, out = RunCommand(t, t.TempDir(), nil, nil, "--source", source, "check", "--max-total", "0", "--allow-missing")
	if code != 0 {
		t.Errorf("check --allow-missing on a DLQ that does not exist: exit %d, want 0\n%s", code, out)
	}
}

// seed imports n envelopes into fx's DLQ: events E001…, keys k0…k4, all
// failing with lastError (so their category follows from it), bound for
// fx.Origin. It returns each event's fingerprint.
func seed(t *testing.T, fx Fixture, n int, lastError string, first int) map[string]string {
	t.Helper()
	return seedAs(t, fx, n, lastError, first, func(i int) (string, int) { return fmt.Sprintf("E%03d", i), i })
}

// seedAs is seed with the event ID and payload (order number) of the ith
// envelope given by eventOf: the same event dead-lettered twice is two
// entries of one event ID and payload.
func seedAs(t *testing.T, fx Fixture, n int, lastError string, first int, eventOf func(int) (string, int)) map[string]string {
	t.Helper()
	return seedAt(t, fx, n, lastError, first, eventOf, time.Now().UTC().Add(-time.Hour))
}

// seedAt is seedAs with the first dead-letter time given: two DLQs
// seeded at the same base hold the same envelopes.
func seedAt(t *testing.T, fx Fixture, n int, lastError string, first int, eventOf func(int) (string, int), base time.Time) map[string]string {
	t.Helper()
	var in bytes.Buffer
	var es []envelope.Envelope
	fps := map[string]string{}
	for i := first; i < first+n; i++ {
		eventID, order := eventOf(i)
		payload := []byte(fmt.Sprintf(`{"order":%d}`, order))
		e := envelope.Envelope{
			ID: fmt.Sprintf("%d-0", 1700000000000+i), EventID: eventID,
			Fingerprint: envelope.ComputeFingerprint(payload), Payload: payload, PayloadEncoding: "json",
			ContentType: "application/json", Key: fmt.Sprintf("k%d", i%5),
			Origin:    envelope.Origin{Topic: fx.Origin},
			LastError: lastError, Attempts: 3,
			DeadLetteredAt: base.Add(time.Duration(i) * time.Second),
		}
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		in.Write(b)
		in.WriteByte('\n')
		fps[e.EventID] = e.Fingerprint
		es = append(es, e)
	}
	if fx.seed != nil {
		fx.seed(t, fx, es)
		return fps
	}
	args := append([]string{"--source", fx.Source, "import"}, fx.ImportFlags...)
	if code, out := RunCommand(t, t.TempDir(), in.Bytes(), nil, args...); code != 0 {
		t.Fatalf("import: exit %d\n%s", code, out)
	}
	return fps
}

// RunCommand runs dlqctl as its own process in dir, with stdin and the
// extra environment env, and returns its exit code and combined output; a
// process killed by a signal (a crash hook's SIGKILL) returns 137. The
// process is this test binary, which the backend's suite variable (For)
// makes the dlqctl command (with the DLQCTL_TEST_CRASH hook), so a
// backend's own crash tests use it too.
func RunCommand(t *testing.T, dir string, stdin []byte, env []string, args ...string) (int, string) {
	t.Helper()
	c := exec.Command(os.Args[0], args...)
	c.Dir = dir
	c.Env = append(os.Environ(), append([]string{asDLQCTL + "=1", "DLQCTL_APPROVAL_KEY=conformance-approval-key-0123456789abcdef"}, env...)...)
	c.Stdin = bytes.NewReader(stdin)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		if ee.ExitCode() == -1 {
			return 137, out.String() // killed by a signal
		}
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

// planAndApprove writes p.json in dir for fx with the given plan flags and
// approves it.
func planAndApprove(t *testing.T, dir string, fx Fixture, kind string, flags ...string) {
	t.Helper()
	args := append([]string{"--source", fx.Source, kind, "plan", "--reason", "conformance", "--out", "p.json"}, flags...)
	if code, out := RunCommand(t, dir, nil, nil, args...); code != 0 {
		t.Fatalf("%s plan: exit %d\n%s", kind, code, out)
	}
	if code, out := RunCommand(t, dir, nil, nil, kind, "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("%s approve: exit %d\n%s", kind, code, out)
	}
}

type runDoc struct {
	Status   string         `json:"status"`
	Moved    int            `json:"moved"`
	HaltedBy string         `json:"halted_by"`
	Verdicts map[string]int `json:"verdicts"`
	Batches  []struct {
		Size     int            `json:"size"`
		Gate     string         `json:"gate"`
		Verdicts map[string]int `json:"verdicts"`
	} `json:"batches"`
}

func parseRun(t *testing.T, out string) runDoc {
	t.Helper()
	var d runDoc
	// The document starts on a line of its own; notes on stderr come first.
	i := strings.Index(out, "{\n")
	if i > 0 && out[i-1] != '\n' {
		i = strings.Index(out, "\n{\n") + 1
	}
	if i < 0 {
		t.Fatalf("no run document in:\n%s", out)
	}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&d); err != nil {
		t.Fatalf("%v in:\n%s", err, out)
	}
	return d
}

// dlqLen is the DLQ's entry count, read through dlqctl stats.
func dlqLen(t *testing.T, fx Fixture) int {
	t.Helper()
	code, out := RunCommand(t, t.TempDir(), nil, nil, "--source", fx.Source, "stats", "-o", "json")
	if code != 0 {
		t.Fatalf("stats: exit %d\n%s", code, out)
	}
	var s struct {
		Total int `json:"total"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &s); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return s.Total
}

// consumeAll runs the reference worker over the origin until it is idle
// and returns its inbox.
func consumeAll(t *testing.T, fx Fixture, inbox string) map[string]workertest.Row {
	t.Helper()
	return consumeAllOf(t, []Fixture{fx}, []string{inbox})[0]
}

// checkOnce checks that every seeded event produced exactly one effect,
// with its original fingerprint; on an atomic backend it was also
// received exactly once.
func checkOnce(t *testing.T, srv *Target, fps map[string]string, rows map[string]workertest.Row) {
	t.Helper()
	if len(rows) != len(fps) {
		t.Errorf("%d events reached the consumer, want %d", len(rows), len(fps))
	}
	for id, fp := range fps {
		r, ok := rows[id]
		switch {
		case !ok:
			t.Errorf("%s never reached the consumer", id)
		case r.Effects != 1:
			t.Errorf("%s: %d effects, want 1", id, r.Effects)
		case r.Fingerprint != "" && r.Fingerprint != fp:
			t.Errorf("%s: the consumer saw fingerprint %s, the DLQ had %s", id, r.Fingerprint, fp)
		case srv.caps.Move == "atomic" && r.Attempts != 1:
			t.Errorf("%s: received %d times on an atomic backend, want 1", id, r.Attempts)
		}
	}
}

// caseRedriveWithConsumer: plan → approve → apply with the reference
// consumer running and reconciling through its inbox: every batch passes,
// every event has one effect and keeps its fingerprint.
func caseRedriveWithConsumer(t *testing.T, srv *Target) {
	if srv.caps.Move == "" {
		checkRefused(t, srv, "redrive")
		return
	}
	fx := srv.Fresh(t)
	fps := seed(t, fx, 30, "timeout calling payments", 1)
	dir := t.TempDir()
	inbox := filepath.Join(dir, "inbox.db")
	fx.worker.StartReady(t, append(append([]string{}, fx.Consume...), "--inbox", "sqlite:"+inbox)...)
	planAndApprove(t, dir, fx, "redrive", "--effects", "sqlite:"+inbox, "--settle", "20s", "--rate", "1000",
		"--burst", "10", "--ramp", "5,10")
	code, out := RunCommand(t, dir, nil, nil, "--source", fx.Source, "-o", "json", "redrive", "apply", "p.json")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	run := parseRun(t, out)
	if run.Status != "completed" || run.Moved != len(fps) {
		t.Fatalf("status %s, moved %d; want completed, %d\n%s", run.Status, run.Moved, len(fps), out)
	}
	if len(run.Batches) < 3 || run.Batches[0].Size != 5 || run.Batches[1].Size != 10 {
		t.Errorf("batches did not follow the ramp 5,10: %+v", run.Batches)
	}
	for _, b := range run.Batches {
		if b.Gate != "pass" {
			t.Errorf("batch gate %q, want pass: %+v", b.Gate, b)
		}
	}
	if n := dlqLen(t, fx); n != 0 {
		t.Errorf("%d entries left in the DLQ", n)
	}
	checkOnce(t, srv, fps, workertest.ReadInbox(t, inbox))
}

// caseGates: a consumer that dead-letters one event again, or applies its
// effect twice, fails the first batch's gate: apply exits 3 naming it,
// and no later batch starts.
func caseGates(t *testing.T, srv *Target) {
	if srv.caps.Move == "" {
		return
	}
	for _, c := range []struct{ gate, flag string }{
		{"re-dead-lettered", "--fail"},
		{"duplicate-effect", "--double-effect"},
	} {
		t.Run(c.gate, func(t *testing.T) {
			if c.gate == "re-dead-lettered" && !srv.caps.Tail {
				t.Skipf("%s declares no re-dead-letter check (Tail)", srv.name)
			}
			fx := srv.Fresh(t)
			seed(t, fx, 20, "timeout", 1)
			dir := t.TempDir()
			inbox := filepath.Join(dir, "inbox.db")
			fx.worker.StartReady(t, append(append([]string{}, fx.Consume...), "--inbox", "sqlite:"+inbox, c.flag, "E003")...)
			planAndApprove(t, dir, fx, "redrive", "--effects", "sqlite:"+inbox, "--settle", "15s", "--rate", "1000",
				"--ramp", "5,10")
			code, out := RunCommand(t, dir, nil, nil, "--source", fx.Source, "-o", "json", "redrive", "apply", "p.json")
			if code != 3 {
				t.Fatalf("apply: exit %d, want 3\n%s", code, out)
			}
			run := parseRun(t, out)
			if run.HaltedBy != c.gate || len(run.Batches) != 1 || run.Moved != 5 {
				t.Errorf("halted by %q after %d batches, moved %d; want %s after 1 batch of 5", run.HaltedBy, len(run.Batches), run.Moved, c.gate)
			}
		})
	}
}

// casePerKeyOrder: an entry whose key has an older entry that stays in the
// DLQ is held back, naming that entry; the plan keeps each key's entries
// in dead-letter order.
func casePerKeyOrder(t *testing.T, srv *Target) {
	if srv.caps.Move == "" {
		return
	}
	fx := srv.Fresh(t)
	// E001…E003 (keys k1…k3) fail on a schema change and stay behind; the
	// transients E011…E020 (keys k1,k2,k3,k4,k0,…) come later.
	seed(t, fx, 3, "schema validation failed: missing field amount", 1)
	seed(t, fx, 10, "timeout", 11)
	dir := t.TempDir()
	planAndApprove(t, dir, fx, "redrive", "--rate", "0", "--unverified-ok", "--settle", "0s")
	plan := readPlan(t, filepath.Join(dir, "p.json"))
	keyOf := func(eventID string) int {
		var i int
		fmt.Sscanf(eventID, "E%d", &i)
		return i % 5
	}
	held := map[string]bool{}
	for _, x := range plan.Excluded {
		if x.HeldBy != "" {
			held[x.EventID] = true
		}
	}
	var planned []string
	for _, e := range plan.Entries {
		planned = append(planned, e.EventID)
		if k := keyOf(e.EventID); k >= 1 && k <= 3 {
			t.Errorf("%s (key k%d) was planned although the key's older E00%d stays in the DLQ", e.EventID, k, k)
		}
	}
	for i := 11; i <= 20; i++ {
		id := fmt.Sprintf("E%03d", i)
		if k := keyOf(id); k >= 1 && k <= 3 && !held[id] {
			t.Errorf("%s (key k%d) is not in excluded[] with held_by", id, k)
		}
	}
	if want := []string{"E014", "E015", "E019", "E020"}; fmt.Sprint(planned) != fmt.Sprint(want) {
		t.Errorf("planned %v, want %v (keys k4 and k0, in dead-letter order)", planned, want)
	}
}

// caseStalePlan: a plan whose entries were moved by another plan is stale
// at apply (exit 5) and moves nothing.
func caseStalePlan(t *testing.T, srv *Target) {
	if srv.caps.Move == "" {
		return
	}
	fx := srv.Fresh(t)
	seed(t, fx, 6, "timeout", 1)
	first, second := t.TempDir(), t.TempDir()
	planAndApprove(t, first, fx, "redrive", "--rate", "0", "--unverified-ok", "--settle", "0s")
	planAndApprove(t, second, fx, "redrive", "--rate", "0", "--unverified-ok", "--settle", "0s")
	if code, out := RunCommand(t, second, nil, nil, "--source", fx.Source, "redrive", "apply", "p.json"); code != 0 {
		t.Fatalf("apply of the second plan: exit %d\n%s", code, out)
	}
	code, out := RunCommand(t, first, nil, nil, "--source", fx.Source, "redrive", "apply", "p.json")
	if code != 5 || !strings.Contains(out, "stale") {
		t.Fatalf("apply of a plan whose entries are gone: exit %d, want 5 naming it stale\n%s", code, out)
	}
}

// caseResolve: resolve takes resolve-disposition entries out of the DLQ,
// each archived whole in the journal first; the rest stay.
func caseResolve(t *testing.T, srv *Target) {
	if !srv.caps.Resolve {
		checkRefused(t, srv, "resolve")
		return
	}
	fx := srv.Fresh(t)
	seed(t, fx, 4, "order not found", 1)
	seed(t, fx, 3, "timeout", 10)
	dir := t.TempDir()
	planAndApprove(t, dir, fx, "resolve")
	code, out := RunCommand(t, dir, nil, nil, "--source", fx.Source, "-o", "json", "resolve", "apply", "p.json")
	if code != 0 {
		t.Fatalf("resolve apply: exit %d\n%s", code, out)
	}
	if run := parseRun(t, out); run.Status != "completed" || run.Moved != 4 {
		t.Errorf("resolve: status %s, moved %d; want completed, 4", run.Status, run.Moved)
	}
	if n := dlqLen(t, fx); n != 3 {
		t.Errorf("%d entries left in the DLQ, want the 3 transients", n)
	}
	journal, err := os.ReadFile(filepath.Join(dir, "p.journal"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		if !bytes.Contains(journal, []byte(fmt.Sprintf(`{"order":%d}`, i))) {
			t.Errorf("the journal has no archived payload of E%03d", i)
		}
	}
}

// caseCrashMatrix kills dlqctl (SIGKILL) right after each kind of journal
// step, then resumes: nothing is lost, every event has one effect, and an
// atomic backend delivered nothing twice.
func caseCrashMatrix(t *testing.T, srv *Target) {
	if srv.caps.Move == "" {
		return
	}
	const n = 12
	for _, step := range []string{"batch-start:1", "intent:1", "intent:3", "published:1", "published:4", "batch-end:1"} {
		t.Run(step, func(t *testing.T) {
			fx := srv.Fresh(t)
			fps := seed(t, fx, n, "timeout", 1)
			dir := t.TempDir()
			planAndApprove(t, dir, fx, "redrive", "--rate", "100000", "--burst", "4", "--ramp", "3,5",
				"--settle", "0s", "--unverified-ok")
			code, out := RunCommand(t, dir, nil, []string{"DLQCTL_TEST_CRASH=" + step}, "--source", fx.Source, "redrive", "apply", "p.json")
			if code != 137 {
				t.Fatalf("apply did not crash at %s: exit %d\n%s", step, code, out)
			}
			code, out = RunCommand(t, dir, nil, nil, "--source", fx.Source, "-o", "json", "redrive", "resume", "p.journal")
			if code != 0 {
				t.Fatalf("resume: exit %d\n%s", code, out)
			}
			if run := parseRun(t, out); run.Status != "completed" || run.Moved != n {
				t.Errorf("after resume: status %s, moved %d; want completed, %d", run.Status, run.Moved, n)
			}
			if l := dlqLen(t, fx); l != 0 {
				t.Errorf("%d entries left in the DLQ", l)
			}
			checkOnce(t, srv, fps, consumeAll(t, fx, filepath.Join(dir, "inbox.db")))
		})
	}
}

// caseRestartMidApply takes the server down while a redrive runs: apply
// exits 1 with the resume command; with the server back, resume
// completes, and every event has one effect.
func caseRestartMidApply(t *testing.T, srv *Target) {
	if srv.caps.Move == "" || srv.Down == nil {
		t.Logf("%s: no restart harness here; the backend's own tests cover a restart", srv.name)
		return
	}
	fx := srv.Fresh(t)
	fps := seed(t, fx, 60, "timeout", 1)
	fx.Source += srv.Outage
	dir := t.TempDir()
	planAndApprove(t, dir, fx, "redrive", "--rate", "40", "--burst", "2", "--ramp", "10,20", "--settle", "0s", "--unverified-ok")
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := RunCommand(t, dir, nil, nil, "--source", fx.Source, "redrive", "apply", "p.json")
		done <- result{code, out}
	}()
	// Down once the run has journaled past its start (60 entries at 40/s
	// take 1.5 s): a backend whose lease settles first (SQS) starts later.
	journal := filepath.Join(dir, "p.journal")
	var first int64
	waitFor(t, "the run to journal past its start", func() bool {
		fi, err := os.Stat(journal)
		if err != nil || fi.Size() == 0 {
			return false
		}
		if first == 0 {
			first = fi.Size()
		}
		return fi.Size() > first
	})
	if err := srv.Down(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != 1 || !strings.Contains(r.out, "resume p.journal") {
		t.Fatalf("apply with the server Down exit %d, want 1 with the resume command\n%s", r.code, r.out)
	}
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	if code, out := RunCommand(t, dir, nil, nil, "--source", fx.Source, "redrive", "resume", "p.journal"); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	if l := dlqLen(t, fx); l != 0 {
		t.Errorf("%d entries left in the DLQ", l)
	}
	checkOnce(t, srv, fps, consumeAll(t, fx, filepath.Join(dir, "inbox.db")))
}

// caseOneRunAtATime: while a run holds its journal and its DLQ, a second
// apply of the same journal, the same plan with another journal, another
// plan over the same DLQ, a concurrent resume and an import are refused
// with exit 7 naming the holder, and change nothing. After kill -9 the
// run's own resume takes its lease over at once and completes.
func caseOneRunAtATime(t *testing.T, srv *Target) {
	if srv.caps.Move == "" {
		return
	}
	const n = 25
	fx := srv.Fresh(t)
	fps := seed(t, fx, n, "timeout", 1)
	dir := t.TempDir()
	// 25 entries at 2/s: the run lives through every refusal below.
	slow := []string{"--rate", "2", "--burst", "1", "--ramp", "50", "--settle", "0s", "--unverified-ok"}
	planAndApprove(t, dir, fx, "redrive", slow...)
	other := t.TempDir()
	planAndApprove(t, other, fx, "redrive", append(slow, "--max", "3")...)
	src := []string{"--source", fx.Source}
	if !srv.caps.Lease {
		code, out := RunCommand(t, dir, nil, nil, append(src, "redrive", "apply", "p.json")...)
		if code != 0 || !strings.Contains(out, "has no DLQ lease") {
			t.Errorf("%s declares no lease: apply must say that nothing guards the DLQ: exit %d\n%s", srv.name, code, out)
		}
		return
	}
	run := background(t, dir, append(src, "redrive", "apply", "p.json")...)
	// The run holds its journal and its lease once the journal has a
	// record (polling the DLQ instead would, on SQS, hide its messages
	// from the run).
	waitFor(t, "the run to start", func() bool {
		fi, err := os.Stat(filepath.Join(dir, "p.journal"))
		return err == nil && fi.Size() > 0
	})
	pid := fmt.Sprint(run.cmd.Process.Pid)
	busy := func(what, wd string, args []string, says ...string) {
		t.Helper()
		code, out := RunCommand(t, wd, nil, nil, args...)
		if code != 7 {
			t.Fatalf("%s: exit %d, want 7 (busy)\n%s", what, code, out)
		}
		for _, s := range append(says, "nothing was changed") {
			if !strings.Contains(out, s) {
				t.Errorf("%s: the refusal does not say %q:\n%s", what, s, out)
			}
		}
	}
	busy("second apply, same journal", dir, append(src, "redrive", "apply", "p.json"), "journal p.journal is held by", "pid "+pid)
	busy("same plan, another journal", dir, append(src, "redrive", "apply", "p.json", "--journal", "p2.journal"), "is held by run ")
	if _, err := os.Stat(filepath.Join(dir, "p2.journal")); err == nil {
		t.Errorf("a refused apply created its journal")
	}
	busy("another plan, same DLQ", other, append(src, "redrive", "apply", "p.json"), "is held by run ")
	busy("resume while the run lives", dir, append(src, "redrive", "resume", "p.journal"), "journal p.journal is held by")
	before := dlqLen(t, fx)
	if srv.caps.Import {
		var one bytes.Buffer
		e := envelope.Envelope{ID: "1800000000000-0", EventID: "EX", Payload: []byte(`{}`), PayloadEncoding: "json",
			Origin: envelope.Origin{Topic: fx.Origin}, LastError: "timeout"}
		b, _ := e.MarshalJSON()
		one.Write(append(b, '\n'))
		code, out := RunCommand(t, dir, one.Bytes(), nil, append(src, "import")...)
		if code != 7 {
			t.Errorf("import during a run: exit %d, want 7\n%s", code, out)
		}
	}
	run.kill9()
	if got := dlqLen(t, fx); got > before {
		t.Errorf("the refused import added entries: %d in the DLQ, %d before", got, before)
	}
	// The crashed run's own resume takes the lease over at once.
	code, out := RunCommand(t, dir, nil, nil, append(src, "-o", "json", "redrive", "resume", "p.journal")...)
	if code != 0 {
		t.Fatalf("resume after kill -9: exit %d\n%s", code, out)
	}
	if d := parseRun(t, out); d.Status != "completed" || d.Moved != n {
		t.Errorf("after resume: %s, moved %d; want completed, %d", d.Status, d.Moved, n)
	}
	checkOnce(t, srv, fps, consumeAll(t, fx, filepath.Join(dir, "inbox.db")))
}

// bgProc is dlqctl running in the background.
type bgProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func background(t *testing.T, dir string, args ...string) *bgProc {
	t.Helper()
	c := exec.Command(os.Args[0], args...)
	c.Dir = dir
	c.Env = append(os.Environ(), asDLQCTL+"=1", "DLQCTL_APPROVAL_KEY=conformance-approval-key-0123456789abcdef")
	b := &bgProc{cmd: c, done: make(chan struct{})}
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
func (b *bgProc) kill9() {
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.done
}

// waitFor polls until cond holds, failing the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkRefused: a backend that declares it cannot do kind refuses it with
// a usage error (exit 2) and changes nothing.
func checkRefused(t *testing.T, srv *Target, kind string) {
	fx := srv.Fresh(t)
	seed(t, fx, 2, "timeout", 1)
	code, out := RunCommand(t, t.TempDir(), nil, nil, "--source", fx.Source, kind, "plan", "--reason", "x", "--out", "p.json")
	if code != 2 {
		t.Errorf("%s on %s, which declares it cannot: exit %d, want 2\n%s", kind, srv.name, code, out)
	}
	if n := dlqLen(t, fx); n != 2 {
		t.Errorf("a refused %s changed the DLQ: %d entries, want 2", kind, n)
	}
}

// caseRefusedDestination: the DLQ itself is never a destination. As --to
// it is a usage error (exit 2) before anything is planned; as the origin a
// dead letter names (anyone who can dead-letter can name one) the entry is
// left out of the plan with the reason, and the rest is planned; the
// approver's view lists every destination with its count.
func caseRefusedDestination(t *testing.T, srv *Target) {
	if srv.caps.Move == "" {
		return
	}
	fx := srv.Fresh(t)
	seed(t, fx, 3, "timeout", 1)
	hostile := fx
	hostile.Origin = fx.Self
	seed(t, hostile, 1, "timeout", 4)
	dir := t.TempDir()
	code, out := RunCommand(t, dir, nil, nil, "--source", fx.Source, "redrive", "plan", "--reason", "x", "--out", "to.json", "--to", fx.Self)
	if code != 2 || !strings.Contains(out, "refused") {
		t.Errorf("plan --to the DLQ itself: exit %d, want 2 saying it is refused\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "to.json")); err == nil {
		t.Errorf("a refused --to wrote a plan")
	}
	planAndApprove(t, dir, fx, "redrive", "--rate", "0", "--unverified-ok", "--settle", "0s")
	plan := readPlan(t, filepath.Join(dir, "p.json"))
	refused := false
	for _, x := range plan.Excluded {
		refused = refused || x.EventID == "E004" && strings.Contains(x.Why, "refused")
	}
	for _, e := range plan.Entries {
		if strings.HasSuffix(e.Dest, fx.Self) {
			t.Errorf("%s planned to %s, the DLQ itself", e.EventID, e.Dest)
		}
	}
	// A backend whose destination does not follow the origin (dir: the
	// inbox) plans E004 to a safe place instead.
	if !refused && len(plan.Entries) != 4 {
		t.Errorf("E004, dead-lettered from the DLQ itself, is neither refused nor planned elsewhere: %+v", plan)
	}
	code, out = RunCommand(t, dir, nil, nil, "redrive", "show", "p.json")
	if code != 0 || !strings.Contains(strings.ToUpper(out), "DESTINATION\tENTRIES") && !strings.Contains(out, "Destinations") {
		t.Errorf("redrive show: exit %d, want the destinations listed\n%s", code, out)
	}
	code, out = RunCommand(t, dir, nil, nil, "--source", fx.Source, "-o", "json", "redrive", "apply", "p.json")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	if n := dlqLen(t, fx); refused && n != 1 || !refused && n != 0 {
		t.Errorf("%d entries left in the DLQ after apply (E004 refused: %v)", n, refused)
	}
}
