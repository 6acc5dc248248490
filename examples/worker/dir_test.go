package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dirqueue "github.com/dlqctl/dlqctl/backends/dir"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/redrive"
)

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range ents {
		names = append(names, de.Name())
	}
	slices.Sort(names)
	return names
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDirSQLite(t *testing.T) {
	root := t.TempDir()
	if err := dirqueue.Init(root); err != nil {
		t.Fatal(err)
	}
	evs := orderEvents(5)
	for i, ev := range evs {
		e := envelope.Envelope{
			ID: "msg-" + ev.id, EventID: ev.id, PayloadEncoding: envelope.EncodingJSON, Payload: []byte(ev.payload),
			Origin: envelope.Origin{Backend: "dir"}, Properties: map[string]string{"tenant": "acme"},
		}
		if ev.carry {
			e.Fingerprint = ev.fingerprint()
		}
		if ev.id == "E2" {
			// Back from an earlier trip through the DLQ, with its hint.
			e.ErrorClass, e.LastError, e.RedriveCount = "schema", "cannot parse amount", 1
		}
		data, err := dirqueue.MarshalFile(e)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, "inbox", "msg-"+string(rune('a'+i))+".json"), data)
	}
	writeFile(t, filepath.Join(root, "inbox", "msg-z-bad.json"), []byte("{not json"))
	// Older DLQ entries, one dead-lettered a moment ago.
	older := []string{"20261129T091644Z-0151.json", time.Now().UTC().Add(-time.Second).Format(dlqNameTime) + "-E9.json"}
	for _, name := range older {
		writeFile(t, filepath.Join(root, "error", name), []byte(`{"event_id":"old","payload":{}}`))
	}
	db := filepath.Join(t.TempDir(), "consumer.db")

	r := mustRun(t, 0, "--source", "dir:"+root, "--inbox", "sqlite:"+db, "--until-idle", "300ms",
		"--fail", "E2", "--fail-error", "order order-2 not found", "--log")
	if !strings.Contains(r.stdout, "processed=6 applied=4 absorbed=0 conflict=0 failed=2") {
		t.Errorf("stdout: %s\nstderr: %s", r.stdout, r.stderr)
	}

	if left := listDir(t, filepath.Join(root, "inbox")); len(left) != 0 {
		t.Errorf("inbox still holds %v", left)
	}
	if done := listDir(t, filepath.Join(root, "done")); !slices.Equal(done, []string{"msg-a.json", "msg-c.json", "msg-d.json", "msg-e.json"}) {
		t.Errorf("done/ = %v", done)
	}
	errs := listDir(t, filepath.Join(root, "error"))
	if len(errs) != 4 || !slices.Equal(errs[:2], older) {
		t.Fatalf("error/ = %v, want the older two first, then two new", errs)
	}
	var failed, bad envelope.Envelope
	for _, name := range errs[2:] {
		data, err := os.ReadFile(filepath.Join(root, "error", name))
		if err != nil {
			t.Fatal(err)
		}
		e := envelope.DecodeFile(strings.TrimSuffix(name, ".json"), data)
		if e.Malformed != "" {
			bad = e
		} else {
			failed = e
		}
	}
	switch {
	case failed.EventID != "E2" || failed.LastError != "order order-2 not found" || failed.Attempts != 1:
		t.Errorf("dead-lettered E2: event_id=%s last_error=%q attempts=%d", failed.EventID, failed.LastError, failed.Attempts)
	case failed.Fingerprint != evs[1].fingerprint() || string(failed.Payload) != evs[1].payload:
		t.Errorf("dead-lettered E2: fingerprint %s payload %s", failed.Fingerprint, failed.Payload)
	case failed.ErrorClass != "" || failed.RedriveCount != 1 || failed.Properties["tenant"] != "acme" || failed.DeadLetteredAt.IsZero():
		t.Errorf("dead-lettered E2: %+v", failed)
	case !strings.HasSuffix(failed.ID, "-E2"):
		t.Errorf("dead-lettered E2 named %s", failed.ID)
	}
	if bad.Malformed == "" || string(bad.Raw) != "{not json" {
		t.Errorf("the malformed inbox file in error/: %+v", bad)
	}

	// dlqctl finds entries dead-lettered during a batch after the DLQ's
	// tail from before it: the new names sort after the older ones.
	q, err := dirqueue.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	var after []string
	err = q.Scan(context.Background(), strings.TrimSuffix(older[1], ".json"), func(e envelope.Envelope) error {
		after = append(after, e.EventID)
		return nil
	})
	if err != nil || len(after) != 2 || !slices.Contains(after, "E2") {
		t.Errorf("entries after the old tail: %v, %v", after, err)
	}

	wants := map[string]want{}
	for _, ev := range evs {
		wants[ev.id] = want{attempts: 1, effects: 1, status: statusDone, fingerprint: ev.fingerprint(), verdict: redrive.VerdictApplied}
	}
	wants["E2"] = want{attempts: 1, effects: 0, status: statusFailed, fingerprint: evs[1].fingerprint(), verdict: redrive.VerdictReDeadLettered, back: true}
	checkInbox(t, "sqlite:"+db, wants)
	if log := sqliteEffectsLog(t, db); sum(log) != 4 || log["E2"] != 0 {
		t.Errorf("effects_log: %v", log)
	}

	// The redrive of E2, once fixed: same event_id and fingerprint, so the
	// inbox counts a second attempt and the one effect.
	e2 := filepath.Join(root, "error", failed.ID+".json")
	if err := os.Rename(e2, filepath.Join(root, "inbox", failed.ID+".json")); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "--source", "dir:"+root, "--inbox", "sqlite:"+db, "--until-idle", "300ms")
	checkInbox(t, "sqlite:"+db, map[string]want{
		"E2": {attempts: 2, effects: 1, status: statusDone, fingerprint: evs[1].fingerprint(), verdict: redrive.VerdictAbsorbedDuplicate},
	})
}

// TestStop: --max stops after N messages; SIGTERM stops receiving and
// exits 0 with the rest left in the inbox.
func TestStop(t *testing.T) {
	root := t.TempDir()
	if err := dirqueue.Init(root); err != nil {
		t.Fatal(err)
	}
	for _, ev := range orderEvents(5) {
		data, err := dirqueue.MarshalFile(envelope.Envelope{ID: ev.id, EventID: ev.id, PayloadEncoding: envelope.EncodingJSON, Payload: []byte(ev.payload)})
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, "inbox", ev.id+".json"), data)
	}
	inbox := "sqlite:" + filepath.Join(t.TempDir(), "consumer.db")

	r := mustRun(t, 0, "--source", "dir:"+root, "--inbox", inbox, "--max", "2")
	if !strings.Contains(r.stdout, "processed=2 applied=2") || len(listDir(t, filepath.Join(root, "inbox"))) != 3 {
		t.Errorf("--max 2: %s, inbox %v", r.stdout, listDir(t, filepath.Join(root, "inbox")))
	}

	// No --until-idle: it runs until the signal.
	cmd := exec.Command(workerBin, "--source", "dir:"+root, "--inbox", inbox)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(listDir(t, filepath.Join(root, "inbox"))) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
	if !strings.Contains(stdout.String(), "processed=3 applied=3") {
		t.Errorf("after SIGTERM: %s", stdout.String())
	}
}
