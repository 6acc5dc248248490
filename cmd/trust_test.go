package cmd

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/redrive"
)

// The tests in this file run the real command in-process against a real
// directory queue (a copy of the sample incident) or a real redis-server,
// for the trust holes of the redrive path: each fails on a build that has
// the hole.

// cli runs dlqctl commands with an environment and a clock that moves on
// a minute per command, so that an approval can come after a halt.
type cli struct {
	t   *testing.T
	env map[string]string
	now time.Time
	dir string
}

func newCLI(t *testing.T, env map[string]string) *cli {
	return &cli{t: t, env: env, now: testNow, dir: t.TempDir()}
}

func (c *cli) factory(io *IOStreams, crash func(string)) *Factory {
	c.now = c.now.Add(time.Minute)
	now := c.now
	return &Factory{Deps: Deps{Backends: testBackends(), IO: io, Now: func() time.Time { return now }, Getenv: func(k string) string { return c.env[k] }, CrashHook: crash}}
}

func (c *cli) run(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	io, _, out, errOut := TestIO()
	code = Execute(context.Background(), c.factory(io, nil), args)
	return out.String(), errOut.String(), code
}

// must runs a command that has to exit with want.
func (c *cli) must(want int, args ...string) (stdout, stderr string) {
	c.t.Helper()
	stdout, stderr, code := c.run(args...)
	if code != want {
		c.t.Fatalf("dlqctl %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, stdout, stderr)
	}
	return stdout, stderr
}

// crashAt runs a command that dies at the nth journal step of a type,
// leaving the journal exactly as a crash there would: the goroutine ends
// on the spot (runtime.Goexit), and nothing after the step is written.
func (c *cli) crashAt(step string, n int, args ...string) {
	c.t.Helper()
	seen := 0
	crashed := false
	hook := func(s string) {
		if s == step {
			if seen++; seen == n {
				crashed = true
				runtime.Goexit()
			}
		}
	}
	io, _, _, errOut := TestIO()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Execute(context.Background(), c.factory(io, hook), args)
	}()
	<-done
	if !crashed {
		c.t.Fatalf("dlqctl %s never reached step %s #%d; stderr: %s", strings.Join(args, " "), step, n, errOut)
	}
}

// dirQueue copies the sample incident into a fresh queue folder.
func dirQueue(t *testing.T) string {
	root := filepath.Join(t.TempDir(), "q")
	for _, d := range []string{"error", "inbox"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src, err := filepath.Abs("../testdata/incident/error")
	if err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "error", f.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(files)
}

func runJSON(t *testing.T, out string) RunDoc {
	t.Helper()
	var d RunDoc
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("not a run document: %v\n%s", err, out)
	}
	return d
}

func readLines(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
}

func writeLines(t *testing.T, path string, lines []string) {
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Hole 1 and 9: resume believed any key and any journal.
func TestResumeVerifiesTheApprovalAndTheJournal(t *testing.T) {
	q := dirQueue(t)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q, "DLQCTL_APPROVAL_KEY": "k-one-0123456789abcdef0123456789abcdef"})
	plan := filepath.Join(c.dir, "p.json")
	journal := filepath.Join(c.dir, "p.journal")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "12", "--ramp", "4", "--rate", "0", "--settle", "0s", "--reason", "psp fixed", "--out", plan)
	c.must(0, "redrive", "approve", plan, "--by", "bob")
	c.crashAt("published", 1, "redrive", "apply", plan)
	inbox, errDir := filepath.Join(q, "inbox"), filepath.Join(q, "error")
	if n := countFiles(t, inbox); n != 4 {
		t.Fatalf("after the crash the inbox has %d entries, want 4", n)
	}
	dlqBefore := countFiles(t, errDir)
	lines := readLines(t, journal)

	// Another key: refused, nothing moved.
	c.env["DLQCTL_APPROVAL_KEY"] = "k-two-0123456789abcdef0123456789abcdef"
	_, stderr := c.must(ExitApproval, "redrive", "resume", journal)
	if !strings.Contains(stderr, "signature does not verify") {
		t.Errorf("resume with another key: %s", stderr)
	}
	delete(c.env, "DLQCTL_APPROVAL_KEY")
	c.must(ExitApproval, "redrive", "resume", journal)
	c.env["DLQCTL_APPROVAL_KEY"] = "k-one-0123456789abcdef0123456789abcdef"

	// The approval taken out of the run-start record.
	noApproval := filepath.Join(c.dir, "no-approval.journal")
	edited := append([]string(nil), lines...)
	edited[0] = regexp.MustCompile(`,"approval":\{[^}]*\}`).ReplaceAllString(edited[0], "")
	if edited[0] == lines[0] {
		t.Fatal("the run-start record has no approval to take out")
	}
	writeLines(t, noApproval, edited)
	_, stderr = c.must(ExitApproval, "redrive", "resume", noApproval)
	if !strings.Contains(stderr, "does not verify") {
		t.Errorf("resume of a journal without its approval: %s", stderr)
	}

	// Forged published steps for entries still in the DLQ: resume must not
	// delete them without publishing.
	var plain redrive.Plan
	b, _ := os.ReadFile(plan)
	if err := json.Unmarshal(b, &plain); err != nil {
		t.Fatal(err)
	}
	var start struct {
		RunID string `json:"run_id"`
	}
	json.Unmarshal([]byte(lines[0]), &start)
	forged := filepath.Join(c.dir, "forged.journal")
	f := append([]string(nil), lines...)
	f[len(f)-1] += "\n"
	for _, en := range plain.Entries.Slice()[4:7] {
		rec, _ := json.Marshal(redrive.Record{Type: redrive.RecPublished, At: testNow, RunID: start.RunID, Seq: en.Seq, ID: en.ID, EventID: en.EventID, DestID: "x"})
		f = append(f, string(rec)+"\n")
	}
	f[len(f)-1] = strings.TrimSuffix(f[len(f)-1], "\n")
	writeLines(t, forged, f)
	c.must(ExitApproval, "redrive", "resume", forged)

	// A hand-written journal: the same plan and approval, no signature.
	hand := filepath.Join(c.dir, "hand.journal")
	unsigned := regexp.MustCompile(`,"mac":"[^"]*"`).ReplaceAllString(lines[0], "")
	writeLines(t, hand, []string{strings.TrimSuffix(unsigned, "\n")})
	_, stderr = c.must(ExitApproval, "redrive", "resume", hand)
	if !strings.Contains(stderr, "not signed") {
		t.Errorf("resume of a hand-written journal: %s", stderr)
	}
	if n := countFiles(t, errDir); n != dlqBefore {
		t.Fatalf("refused resumes changed the DLQ: %d entries, want %d", n, dlqBefore)
	}
	if n := countFiles(t, inbox); n != 4 {
		t.Fatalf("refused resumes changed the inbox: %d entries, want 4", n)
	}

	// The right key: the run completes, from the journal's source.
	delete(c.env, "DLQCTL_SOURCE")
	out, _ := c.must(0, "-o", "json", "redrive", "resume", journal)
	if d := runJSON(t, out); d.Moved != 12 || d.Status != redrive.StatusCompleted {
		t.Errorf("resumed run: status %s, moved %d; want completed, 12", d.Status, d.Moved)
	}
	if n := countFiles(t, inbox); n != 12 {
		t.Errorf("inbox has %d entries, want 12", n)
	}
}

// emptyInbox makes an effects store whose consumer has recorded nothing.
func emptyInbox(t *testing.T, path string) *sql.DB {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE inbox(event_id TEXT PRIMARY KEY, fingerprint TEXT, status TEXT, attempts INTEGER, effects INTEGER)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// Hole 1 (--past-gate) and hole 5: going on past a gate needs a fresh
// approval, and the ramp starts again at its first size.
func TestPastGateNeedsAFreshApprovalAndRestartsTheRamp(t *testing.T) {
	q := dirQueue(t)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q, "DLQCTL_APPROVAL_KEY": "k-one-0123456789abcdef0123456789abcdef"})
	plan, journal, stderr, db := haltedRun(t, c)
	if !strings.Contains(stderr, "resume "+journal+" --past-gate") {
		t.Errorf("the gate's message does not give the resume command with --past-gate: %s", stderr)
	}
	catchUp(t, db, plan)
	_, stderr = c.must(ExitGate, "redrive", "resume", journal)
	if !strings.Contains(stderr, "--past-gate") {
		t.Errorf("resume of a halted run without --past-gate: %s", stderr)
	}
	_, stderr = c.must(ExitApproval, "redrive", "resume", journal, "--past-gate")
	if !strings.Contains(stderr, "fresh approval") {
		t.Errorf("--past-gate under the approval the run started with: %s", stderr)
	}
	if n := countFiles(t, filepath.Join(q, "inbox")); n != 2 {
		t.Fatalf("a refused --past-gate moved entries: inbox %d, want 2", n)
	}
	c.must(0, "redrive", "approve", plan, "--by", "carol")
	c.must(0, "redrive", "resume", journal, "--past-gate")
	out, _ := c.must(0, "-o", "json", "redrive", "status", journal)
	d := runJSON(t, out)
	var sizes []int
	for _, b := range d.Batches {
		sizes = append(sizes, b.Size)
	}
	if want := []int{2, 2, 5, 3}; !equalInts(sizes, want) {
		t.Errorf("batch sizes %v, want %v: after a failed gate the ramp starts again", sizes, want)
	}
	if d.Moved != 12 {
		t.Errorf("moved %d, want 12", d.Moved)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Hole 7: a failed entry is tried again by resume --retry-failed; apply
// keeps exit 6.
func TestResumeRetriesFailedEntries(t *testing.T) {
	q := dirQueue(t)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q, "DLQCTL_APPROVAL_KEY": "k-one-0123456789abcdef0123456789abcdef"})
	dest := filepath.Join(q, "elsewhere")
	if err := os.Mkdir(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(c.dir, "p.json")
	journal := filepath.Join(c.dir, "p.journal")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "5", "--to", dest, "--rate", "0", "--settle", "0s", "--reason", "r", "--out", plan)
	c.must(0, "redrive", "approve", plan, "--by", "bob")
	os.Remove(dest) // the destination is missing at apply: every move fails
	_, stderr := c.must(ExitPartial, "redrive", "apply", plan)
	if !strings.Contains(stderr, "--retry-failed") {
		t.Errorf("exit 6 does not say how to retry: %s", stderr)
	}
	c.must(0, "redrive", "resume", journal) // complete: nothing to resume without --retry-failed
	if err := os.Mkdir(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	c.must(0, "redrive", "resume", journal, "--retry-failed")
	if n := countFiles(t, dest); n != 5 {
		t.Errorf("destination has %d entries after --retry-failed, want 5", n)
	}
	out, _ := c.must(0, "-o", "json", "redrive", "status", journal)
	if d := runJSON(t, out); d.Moved != 5 || d.Failed != 0 {
		t.Errorf("status: moved %d, failed %d; want 5, 0", d.Moved, d.Failed)
	}
}

// Hole 8: Ctrl-C at the yes prompt exits 130 at once.
func TestCtrlCAtThePromptExitsAtOnce(t *testing.T) {
	q := dirQueue(t)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q})
	in, w := io.Pipe()
	defer w.Close()
	io, _, _, errOut := TestIO()
	io.In, io.InTTY, io.ErrTTY = in, true, true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Execute(ctx, c.factory(io, nil), []string{"redrive", "--category", "transient", "--max", "2", "--reason", "r", "--out", filepath.Join(c.dir, "p.json")})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(errOut.String(), `Only "yes" is accepted`) {
		if time.Now().After(deadline) {
			t.Fatalf("no prompt: %s", errOut)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitInterrupted {
			t.Errorf("exit %d at Ctrl-C, want %d", code, ExitInterrupted)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Ctrl-C at the prompt did not end the command")
	}
	if n := countFiles(t, filepath.Join(q, "inbox")); n != 0 {
		t.Errorf("inbox has %d entries, want 0", n)
	}
}

// Issue 9: the resume command printed after Ctrl-C runs as printed, in a
// fresh shell without DLQCTL_SOURCE.
func TestPrintedResumeCommandRunsAsPrinted(t *testing.T) {
	q := dirQueue(t)
	keys := filepath.Join(t.TempDir(), "keys")
	os.Mkdir(keys, 0o700)
	os.WriteFile(filepath.Join(keys, "bob.key"), []byte("bob-secret-key-0123456789abcdef0123456789\n"), 0o600)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q})
	plan := filepath.Join(c.dir, "p.json")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "8", "--ramp", "2", "--rate", "4", "--burst", "1", "--settle", "0s", "--reason", "r", "--out", plan)
	c.must(0, "redrive", "approve", plan, "--by", "bob", "--keys-dir", keys)
	io, _, _, errOut := TestIO()
	ctx, cancel := context.WithCancel(context.Background())
	// Ctrl-C once the first entry has reached its destination: the run
	// is then surely under way, with entries left for the resume.
	onStep := func(step string) {
		if step == redrive.RecPublished {
			cancel()
		}
	}
	if code := Execute(ctx, c.factory(io, onStep), []string{"redrive", "apply", plan, "--keys-dir", keys}); code != ExitInterrupted {
		t.Fatalf("exit %d, want 130; stderr: %s", code, errOut)
	}
	m := regexp.MustCompile(`Resume with:\n  (.*)`).FindStringSubmatch(errOut.String())
	if m == nil {
		t.Fatalf("no resume command: %s", errOut)
	}
	args := strings.Fields(m[1])
	if args[0] != "dlqctl" {
		t.Fatalf("resume command %q", m[1])
	}
	fresh := newCLI(t, map[string]string{})
	fresh.now = c.now
	out, stderr := fresh.must(0, append([]string{"-o", "json"}, args[1:]...)...)
	if d := runJSON(t, out); d.Moved != 8 {
		t.Errorf("moved %d, want 8; stderr: %s", d.Moved, stderr)
	}
}

// Hole 13: per-approver keys enforce who approved by key, not by name.
func TestKeysDirHoldsApproversToTheirOwnKeys(t *testing.T) {
	q := dirQueue(t)
	keys := filepath.Join(t.TempDir(), "keys")
	os.Mkdir(keys, 0o700)
	os.WriteFile(filepath.Join(keys, "alice.key"), []byte("alice-key-0123456789abcdef0123456\n"), 0o600)
	os.WriteFile(filepath.Join(keys, "bob.key"), []byte("bob-key-0123456789abcdef012345678\n"), 0o600)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q})
	plan := filepath.Join(c.dir, "p.json")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "3", "--rate", "0", "--settle", "0s", "--reason", "r", "--by", "alice", "--out", plan)
	// alice signs with her own key under bob's name.
	c.must(0, "redrive", "approve", plan, "--by", "bob", "--key-file", filepath.Join(keys, "alice.key"))
	_, stderr := c.must(ExitApproval, "redrive", "apply", plan, "--keys-dir", keys, "--require-distinct-approver")
	if !strings.Contains(stderr, "approval by bob: signature does not verify") {
		t.Errorf("an approval under a borrowed name: %s", stderr)
	}
	c.must(0, "redrive", "approve", plan, "--by", "bob", "--keys-dir", keys)
	c.must(0, "redrive", "apply", plan, "--keys-dir", keys, "--require-distinct-approver")
}

// Hole 13: --rate NaN/Inf and an absurd --burst are usage errors.
func TestRateAndBurstAreChecked(t *testing.T) {
	q := dirQueue(t)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q})
	for _, args := range [][]string{{"--rate", "NaN"}, {"--rate", "Inf"}, {"--rate", "-Inf"}, {"--burst", "100000000"}} {
		_, stderr := c.must(ExitUsage, append([]string{"redrive", "plan", "--reason", "r", "--out", filepath.Join(c.dir, "p.json")}, args...)...)
		if !strings.Contains(stderr, args[0]) {
			t.Errorf("%v: %s", args, stderr)
		}
	}
}

// Hole 13: a journal whose run-start record was torn by a crash: resume
// and apply agree that it is safe to start again, and apply does.
func TestTornRunStartStartsAgain(t *testing.T) {
	q := dirQueue(t)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q, "DLQCTL_APPROVAL_KEY": "k-0123456789abcdef0123456789abcdef"})
	plan := filepath.Join(c.dir, "p.json")
	journal := filepath.Join(c.dir, "p.journal")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "3", "--rate", "0", "--settle", "0s", "--reason", "r", "--out", plan)
	c.must(0, "redrive", "approve", plan, "--by", "bob")
	os.WriteFile(journal, []byte(`{"type":"run-start","at":"2026-11-29T12:00:00Z","run_id":"2026`), 0o600)
	_, stderr := c.must(ExitUsage, "redrive", "resume", journal)
	if !strings.Contains(stderr, "safe to start again") {
		t.Errorf("resume of a torn run-start: %s", stderr)
	}
	_, stderr = c.must(0, "redrive", "apply", plan)
	if !strings.Contains(stderr, "starting the run again") {
		t.Errorf("apply over a torn run-start: %s", stderr)
	}
	if n := countFiles(t, filepath.Join(q, "inbox")); n != 3 {
		t.Errorf("inbox has %d entries, want 3", n)
	}
}

func seedRedis(t *testing.T, rdb *redis.Client, stream string, eventIDs ...string) {
	ctx := context.Background()
	for _, id := range eventIDs {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{
			"event_id", id, "payload", `{"n":1}`, "last_error", "timeout calling payments", "origin_stream", "orders", "key", "k-" + id,
		}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// Hole 9: an entry someone deleted from the DLQ (XTRIM, XDEL) while the
// run was down is not counted as moved: the destination is asked first.
func TestResumeDoesNotCountATrimmedEntryAsMoved(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	seedRedis(t, rdb, "dlq", "E1", "E2", "E3", "E4")
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": srv.URL(0, "dlq"), "DLQCTL_APPROVAL_KEY": "k-0123456789abcdef0123456789abcdef"})
	plan := filepath.Join(c.dir, "p.json")
	journal := filepath.Join(c.dir, "p.journal")
	c.must(0, "redrive", "plan", "--category", "transient", "--ramp", "2", "--rate", "0", "--settle", "0s", "--reason", "r", "--out", plan)
	c.must(0, "redrive", "approve", plan, "--by", "bob")
	c.crashAt("intent", 2, "redrive", "apply", plan)
	ctx := context.Background()
	left, err := rdb.XRange(ctx, "dlq", "-", "+").Result()
	if err != nil || len(left) != 2 {
		t.Fatalf("after the crash the DLQ holds %d entries (%v), want 2", len(left), err)
	}
	rdb.XDel(ctx, "dlq", left[0].ID) // someone else removes one
	_, stderr := c.must(ExitPartial, "redrive", "resume", journal)
	out, _ := c.must(0, "-o", "json", "redrive", "status", journal)
	d := runJSON(t, out)
	if d.Moved != 3 || d.Gone != 1 {
		t.Errorf("moved %d, gone %d; want 3 moved, 1 gone (stderr: %s)", d.Moved, d.Gone, stderr)
	}
	if n, _ := rdb.XLen(ctx, "orders").Result(); n != 3 {
		t.Errorf("orders has %d entries, want 3", n)
	}
}

// Hole 10: an event ID that is not valid UTF-8 plans, approves, applies
// and resumes.
func TestNonUTF8EventIDPlansAppliesAndResumes(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	seedRedis(t, rdb, "dlq", "E\xff1", "E\xfe\xff2", "ok-3")
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": srv.URL(0, "dlq"), "DLQCTL_APPROVAL_KEY": "k-0123456789abcdef0123456789abcdef"})
	plan := filepath.Join(c.dir, "p.json")
	journal := filepath.Join(c.dir, "p.journal")
	// Redis reads such an event ID as malformed; a plan takes it when told.
	c.must(0, "redrive", "plan", "--include-quarantined", "--ramp", "1", "--rate", "0", "--settle", "0s", "--reason", "r", "--out", plan)
	c.must(0, "redrive", "approve", plan, "--by", "bob")
	c.crashAt("published", 2, "redrive", "apply", plan)
	c.must(0, "redrive", "resume", journal)
	ctx := context.Background()
	msgs, err := rdb.XRange(ctx, "orders", "-", "+").Result()
	if err != nil || len(msgs) != 3 {
		t.Fatalf("orders holds %d entries (%v), want 3", len(msgs), err)
	}
	for i, want := range []string{"E\xff1", "E\xfe\xff2", "ok-3"} {
		if got := msgs[i].Values["event_id"]; got != want {
			t.Errorf("entry %d: event_id %q, want %q", i, got, want)
		}
	}
}

// Hole 1 for resolve: resolve resume checks the approval as apply does.
func TestResolveResumeVerifiesTheApproval(t *testing.T) {
	q := dirQueue(t)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q, "DLQCTL_APPROVAL_KEY": "k-one-0123456789abcdef0123456789abcdef"})
	plan := filepath.Join(c.dir, "r.json")
	journal := filepath.Join(c.dir, "r.journal")
	c.must(0, "resolve", "plan", "--category", "missing-reference", "--max", "6", "--ramp", "3", "--reason", "deleted upstream", "--out", plan)
	c.must(0, "resolve", "approve", plan, "--by", "bob")
	c.crashAt("removed", 1, "resolve", "apply", plan)
	errDir := filepath.Join(q, "error")
	before := countFiles(t, errDir)
	c.env["DLQCTL_APPROVAL_KEY"] = "k-two-0123456789abcdef0123456789abcdef"
	c.must(ExitApproval, "resolve", "resume", journal)
	if n := countFiles(t, errDir); n != before {
		t.Fatalf("a refused resolve resume changed the DLQ: %d entries, want %d", n, before)
	}
	c.env["DLQCTL_APPROVAL_KEY"] = "k-one-0123456789abcdef0123456789abcdef"
	c.must(ExitUsage, "redrive", "resume", journal) // the journal of a resolve run
	out, _ := c.must(0, "-o", "json", "resolve", "resume", journal)
	if d := runJSON(t, out); d.Moved != 6 {
		t.Errorf("moved %d, want 6", d.Moved)
	}
}

// An approval that expired while the run was down is renewed by approving
// the plan again; resume finds the new one in the plan file.
func TestResumeAfterTheApprovalExpired(t *testing.T) {
	q := dirQueue(t)
	c := newCLI(t, map[string]string{"DLQCTL_SOURCE": "dir:" + q, "DLQCTL_APPROVAL_KEY": "k-one-0123456789abcdef0123456789abcdef"})
	plan := filepath.Join(c.dir, "p.json")
	journal := filepath.Join(c.dir, "p.journal")
	c.must(0, "redrive", "plan", "--category", "transient", "--max", "6", "--ramp", "3", "--rate", "0", "--settle", "0s", "--reason", "r", "--out", plan)
	c.must(0, "redrive", "approve", plan, "--by", "bob", "--ttl", "2m")
	c.crashAt("published", 1, "redrive", "apply", plan)
	c.now = c.now.Add(time.Hour)
	_, stderr := c.must(ExitApproval, "redrive", "resume", journal)
	if !strings.Contains(stderr, "expired") {
		t.Errorf("resume under an expired approval: %s", stderr)
	}
	c.must(0, "redrive", "approve", plan, "--by", "bob")
	out, _ := c.must(0, "-o", "json", "redrive", "resume", journal)
	if d := runJSON(t, out); d.Moved != 6 {
		t.Errorf("moved %d, want 6", d.Moved)
	}
	// The resume record names the approval it went on under.
	b, _ := os.ReadFile(journal)
	if !regexp.MustCompile(`"type":"resume"[^\n]*"approval":\{"by":"bob"`).Match(b) {
		t.Error("the resume record does not carry the fresh approval")
	}
}
