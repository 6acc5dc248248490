package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// smallDLQ is a dir: DLQ holding the first n entries of the incident.
func smallDLQ(t *testing.T, n int) (root string) {
	t.Helper()
	root = t.TempDir()
	for _, d := range []string{"error", "inbox"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob("../testdata/incident/error/*.json")
	copied := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if !strings.Contains(string(b), `"psp: 503`) || copied == n {
			continue
		}
		if err := os.WriteFile(filepath.Join(root, "error", filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		copied++
	}
	return root
}

// TestOneStepWithoutEffectsDoesNotWait: without --effects nothing settles,
// so after its last batch the run does not sit out the settle time; it
// says how to look later. reconcile --journal then shows the DLQ sizes the
// run recorded (not today's 0→0), and with only a source it names the
// events that came back.
func TestOneStepWithoutEffectsDoesNotWait(t *testing.T) {
	root := smallDLQ(t, 3)
	src := "dir:" + root
	plan := filepath.Join(root, "p.json")
	start := time.Now()
	out, errOut, code := run(t, nil, "--source", src, "redrive", "--category", "transient", "--reason", "r",
		"--settle", "1m", "--yes", "--out", plan)
	if code != 0 {
		t.Fatalf("redrive exit %d:\n%s%s", code, out, errOut)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the one-step redrive took %s: it waited the settle time after its last batch", took)
	}
	journal := strings.TrimSuffix(plan, ".json") + ".journal"
	if !strings.Contains(out, "check later\t3 unverified: a reconcile shows any that came back to the DLQ\nreconcile\tdlqctl reconcile --journal "+journal+"\n") {
		t.Errorf("the summary does not say how to check the unverified events later:\n%s", out)
	}
	if _, err := os.Stat(journal + ".lock"); !os.IsNotExist(err) {
		t.Errorf("the journal's lock file outlived the run: %v", err)
	}
	// One of them comes back to the DLQ.
	back, _ := filepath.Glob(filepath.Join(root, "inbox", "*"))
	b, _ := os.ReadFile(back[0])
	if err := os.WriteFile(filepath.Join(root, "error", "29991231T000000Z-0001.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, nil, "--source", src, "reconcile", "--journal", journal)
	if code != 0 {
		t.Fatalf("reconcile exit %d:\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "\t3→0\tre-dead-lettered\tre-dead-lettered=1 unverified=2") {
		t.Errorf("reconcile --journal lost the run's DLQ sizes or the event that came back:\n%s", out)
	}
	// As the summary prints it: the run's own source.
	if out, errOut, code = run(t, nil, "reconcile", "--journal", journal); code != 0 || !strings.Contains(out, "re-dead-lettered=1 unverified=2") {
		t.Errorf("reconcile --journal without a source: exit %d, %s%s", code, out, errOut)
	}
	if _, errOut, code = run(t, nil, "reconcile", "--event-id", "E1"); code != 2 || !strings.Contains(errOut, "--source") {
		t.Errorf("reconcile without effects or source: exit %d, %s", code, errOut)
	}
}

// TestResolveSummarySaysWhereEntriesWent: a resolve moves nothing: its
// summary says how many were resolved and that the journal archives them,
// and its batch table has its own columns, without reconciliation.
func TestResolveSummarySaysWhereEntriesWent(t *testing.T) {
	root := smallDLQ(t, 2)
	plan := filepath.Join(root, "r.json")
	out, errOut, code := run(t, nil, "--source", "dir:"+root, "resolve", "--category", "transient",
		"--allow-disposition", "redrive", "--reason", "r", "--yes", "--out", plan)
	if code != 0 {
		t.Fatalf("resolve exit %d:\n%s%s", code, out, errOut)
	}
	journal := strings.TrimSuffix(plan, ".json") + ".journal"
	for _, want := range []string{"BATCH\tSIZE\tRESOLVED\tDLQ\n1\t2\t2\t2→0\n",
		"Resolve complete! 2 resolved, 0 remaining in ", "; archived in " + journal + ".\n", "resolved\t2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("resolve output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "VERDICTS") || strings.Contains(out, "moved") {
		t.Errorf("resolve output speaks of moves or verdicts:\n%s", out)
	}
}

// TestCtrlCSummaryCountsUnreconciledMoves: a run stopped while it waits
// for a batch to settle says how many of its moves are not reconciled yet
// (the resume reconciles them first).
func TestCtrlCSummaryCountsUnreconciledMoves(t *testing.T) {
	root := smallDLQ(t, 4)
	io, _, out, errOut := TestIO()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(1500*time.Millisecond, cancel)
	f := &Factory{Deps: Deps{Backends: testBackends(), IO: io, Now: time.Now, Getenv: func(string) string { return "" }}}
	code := Execute(ctx, f, []string{"--source", "dir:" + root, "redrive", "--category", "transient", "--ramp", "2",
		"--unverified-ok", "--rate", "0", "--settle", "1m", "--reason", "r", "--yes", "--out", filepath.Join(root, "p.json")})
	if code != ExitInterrupted {
		t.Fatalf("exit %d, want %d:\n%s%s", code, ExitInterrupted, out, errOut)
	}
	for _, want := range []string{"Redrive interrupted! 2 moved (2 not yet reconciled), 2 remaining", "not reconciled\t2: the resume reconciles them first"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the summary lacks %q:\n%s\n%s", want, out, errOut)
		}
	}
}

// TestQuarantineSummaryReadsAsWhatHappened: the summary names only what
// happened; "acked 0 deleted" read as if something had been deleted.
func TestQuarantineSummaryReadsAsWhatHappened(t *testing.T) {
	rep := backend.QuarantineReport{Stream: "orders", DLQ: "orders-dlq", Moved: make([]backend.QuarantinedEntry, 3)}
	if got := quarantineSummary(rep); got != "moved 3 entries into orders-dlq" {
		t.Errorf("summary %q", got)
	}
	rep.Skipped, rep.AckedDeleted = 1, 2
	got := quarantineSummary(rep)
	for _, want := range []string{"1 not moved: acked, claimed or delivered again", "2 only acked: already deleted from orders, there was nothing to move"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
}
