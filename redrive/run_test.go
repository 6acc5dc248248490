package redrive_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/dir"
	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/redrive"
)

// These tests run plans through redrive.Runner alone, on a directory
// queue: no command line, no cobra, the same write-ahead sequence that
// apply and resume go through.

// dirSources opens dir: URLs; it counts what it opened.
type dirSources struct{ opened int }

func (d *dirSources) OpenSource(_ context.Context, url string) (backend.Source, error) {
	d.opened++
	root, ok := strings.CutPrefix(url, "dir:")
	if !ok {
		return nil, backend.Configf("not a dir: URL: %s", url)
	}
	return dirqueue.Open(root)
}

// noEffects fails a test whose run opens an effects store.
type noEffects struct{ t *testing.T }

func (n noEffects) OpenEffects(context.Context, string, string) (effects.Probe, error) {
	n.t.Error("an effects store was opened")
	return nil, errors.New("no effects store here")
}

var runKey = []byte("run-test-approval-key-0123456789abcdef")

// runQueue is a directory queue holding n transient failures with keys
// of their own, and a plan that redrives them all in batches of 2, 3, 5.
func runQueue(t *testing.T, n int) (root string, plan *redrive.Plan) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "q")
	if err := dirqueue.Init(root); err != nil {
		t.Fatal(err)
	}
	q, err := dirqueue.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for i := range n {
		payload := fmt.Appendf(nil, `{"order":%d}`, i)
		e := envelope.Envelope{ID: fmt.Sprintf("20261129T1000%02dZ-%04d", i, i), EventID: fmt.Sprintf("E%03d", i), Key: fmt.Sprintf("k%d", i),
			Fingerprint: envelope.ComputeFingerprint(payload), Origin: envelope.Origin{Backend: "dir", Topic: "orders"},
			DeadLetteredAt: at.Add(time.Duration(i) * time.Second), Attempts: 3, LastError: "timeout calling payments",
			PayloadEncoding: "json", Payload: payload}
		if _, err := q.Import(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	w := inspect.Walker{Source: q, Classifier: envelope.NewClassifier(envelope.DefaultRules()), Now: at.Add(time.Hour)}
	plan, err = redrive.BuildPlan(ctx, w, q, redrive.PlanRequest{Kind: redrive.KindRedrive, Reason: "run test", PlannedBy: "planner",
		Source: q.String(), Params: redrive.Params{Ramp: []int{2, 3, 5}, UnverifiedOK: true}}, at.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if plan.Entries.Len() != n {
		t.Fatalf("planned %d entries, want %d", plan.Entries.Len(), n)
	}
	return root, plan
}

func runner(t *testing.T, sources *dirSources, notes *bytes.Buffer, crash func(string)) redrive.Runner {
	return redrive.Runner{Sources: sources, Effects: noEffects{t}, Now: time.Now, Notes: notes, Crash: crash}
}

// files lists the names in dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// TestApplyThenResumeOnADirectoryQueue applies a plan until the run is
// interrupted (Ctrl-C) after its first moves, then resumes it from its
// journal:
// every entry ends in the inbox once, none is left in the DLQ, and the
// journal, chained with the approval key, says the run completed.
func TestApplyThenResumeOnADirectoryQueue(t *testing.T) {
	root, plan := runQueue(t, 10)
	journal := filepath.Join(t.TempDir(), "p.journal")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopAfterFirst := func(step string) {
		if step == redrive.RecPublished {
			cancel()
		}
	}
	var notes bytes.Buffer
	sources := &dirSources{}
	ran, err := runner(t, sources, &notes, stopAfterFirst).Apply(ctx, redrive.ApplyRequest{Plan: plan, PlanPath: "p.plan.json", JournalPath: journal,
		Source: "dir:" + root, Started: time.Now(), AppliedBy: "ops", Key: runKey})
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, notes.String())
	}
	if !errors.Is(ran.Err, redrive.ErrInterrupted) || ran.Release != nil {
		t.Fatalf("apply ended with %v (release: %v), want it interrupted", ran.Err, ran.Release)
	}
	moved, _, _, _ := ran.State.Counts()
	inbox, dlq := files(t, filepath.Join(root, "inbox")), files(t, filepath.Join(root, "error"))
	if moved == 0 || moved == 10 || len(inbox) != moved || len(dlq) != 10-moved {
		t.Fatalf("after the interrupt: %d moved, inbox %d, DLQ %d", moved, len(inbox), len(dlq))
	}
	if !strings.Contains(notes.String(), "journal "+journal) {
		t.Errorf("notes %q do not say where the journal is", notes.String())
	}

	// A second apply of the same plan is left to resume.
	_, err = runner(t, sources, &notes, nil).Apply(context.Background(), redrive.ApplyRequest{Plan: plan, PlanPath: "p.plan.json",
		JournalPath: journal, Source: "dir:" + root, Started: time.Now(), AppliedBy: "ops", Key: runKey})
	var started *redrive.StartedError
	if !errors.As(err, &started) || started.State == nil || started.State.RunID != ran.State.RunID || sources.opened != 1 {
		t.Fatalf("apply again: %v (opened %d sources), want the run started already", err, sources.opened)
	}

	r := runner(t, sources, &notes, nil)
	unlock, err := r.LockExistingJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	st, v, err := redrive.ReplayFile(journal, redrive.JournalKey(runKey, ran.State.RunID), plan)
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := r.Resume(context.Background(), redrive.ResumeRequest{State: st, JournalPath: journal, Source: "dir:" + root,
		Key: runKey, Verified: v, ResumedBy: "ops"})
	unlock()
	if err != nil || resumed.Err != nil || resumed.State.Status != redrive.StatusCompleted {
		t.Fatalf("resume: %v, run error %v, status %q", err, resumed.Err, resumed.State.Status)
	}
	if inbox, dlq := files(t, filepath.Join(root, "inbox")), files(t, filepath.Join(root, "error")); len(inbox) != 10 || len(dlq) != 0 {
		t.Errorf("after the resume: inbox %v, DLQ %v; want all 10 in the inbox", inbox, dlq)
	}
	final, _, err := redrive.ReplayFile(journal, redrive.JournalKey(runKey, ran.State.RunID), plan)
	if err != nil {
		t.Fatal(err)
	}
	if moved, gone, skipped, failed := final.Counts(); final.Status != redrive.StatusCompleted || moved != 10 || gone+skipped+failed != 0 {
		t.Errorf("the journal says %s: moved %d, gone %d, skipped %d, failed %d", final.Status, moved, gone, skipped, failed)
	}
}

// TestApplyRefusesBeforeMoving: a run on another source than its plan's,
// a stale plan and a journal another run holds are each refused with
// their own error, and nothing is moved or journaled.
func TestApplyRefusesBeforeMoving(t *testing.T) {
	root, plan := runQueue(t, 4)
	other, _ := runQueue(t, 1)
	request := func(journal, source string) redrive.ApplyRequest {
		return redrive.ApplyRequest{Plan: plan, PlanPath: "p.plan.json", JournalPath: journal, Source: source, Started: time.Now(), AppliedBy: "ops"}
	}
	r := runner(t, &dirSources{}, &bytes.Buffer{}, nil)
	journal := filepath.Join(t.TempDir(), "p.journal")

	_, err := r.Apply(context.Background(), request(journal, "dir:"+other))
	var ce *backend.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "the plan was made for dir:"+root) {
		t.Errorf("another source: %v", err)
	}

	gone := files(t, filepath.Join(root, "error"))[1]
	if err := os.Remove(filepath.Join(root, "error", gone)); err != nil {
		t.Fatal(err)
	}
	_, err = r.Apply(context.Background(), request(journal, "dir:"+root))
	var stale *redrive.StaleError
	if !errors.As(err, &stale) || len(stale.Missing) != 1 || stale.Missing[0].ID+".json" != gone {
		t.Errorf("stale plan: %v", err)
	}

	lock, err := redrive.LockJournal(journal, backend.ThisProcess("other-run", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	_, err = r.Apply(context.Background(), request(journal, "dir:"+root))
	var busy *backend.BusyError
	if !errors.As(err, &busy) {
		t.Errorf("held journal: %v", err)
	}

	if _, err := os.Stat(journal); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused run left a journal: %v", err)
	}
	if inbox := files(t, filepath.Join(root, "inbox")); len(inbox) != 0 {
		t.Errorf("a refused run moved %v", inbox)
	}
}
