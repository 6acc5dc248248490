package dirqueue

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

var markers = backend.Markers{RunID: "run-1"}

func newQueue(t *testing.T) *Queue {
	t.Helper()
	root := t.TempDir()
	if err := Init(root); err != nil {
		t.Fatal(err)
	}
	q, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// put writes an entry into error/ and returns it as dlqctl reads it.
func put(t *testing.T, q *Queue, id, payload string, carried bool, redriveCount int) envelope.Envelope {
	t.Helper()
	e := envelope.Envelope{
		ID: id, EventID: "E-" + id, PayloadEncoding: envelope.EncodingJSON, Payload: []byte(payload),
		Origin: envelope.Origin{Backend: "dir", Topic: "orders"}, Attempts: 3, LastError: "timeout",
		RedriveCount: redriveCount, Properties: map[string]string{"tenant": "acme"},
	}
	if carried {
		e.Fingerprint = envelope.ComputeFingerprint([]byte(payload))
	}
	if _, err := q.Import(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	got, err := q.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func item(seq int64, e envelope.Envelope, dest string) backend.MoveItem {
	return backend.MoveItem{Seq: seq, ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint, Dest: dest}
}

func readFile(t *testing.T, path string) (envelope.Envelope, map[string]json.RawMessage) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	return envelope.DecodeFile(strings.TrimSuffix(filepath.Base(path), ext), data), raw
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func TestPublishMovesToInbox(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t)
	a := put(t, q, "0001-a", `{"n":1}`, true, 0)
	b := put(t, q, "0002-b", `{"n":2}`, false, 4)
	inbox := q.DefaultDest("anything")
	if inbox != filepath.Join(q.root, "inbox") || !q.Atomic() {
		t.Fatalf("DefaultDest = %s, Atomic %v", inbox, q.Atomic())
	}

	res, err := q.Publish(ctx, []backend.MoveItem{item(1, a, inbox), item(2, b, "")}, markers)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"0001-a.json", "0002-b.json"} {
		if res[i].Err != nil || !res[i].Removed || res[i].DestID != want {
			t.Errorf("result %d = %+v, want %s moved", i, res[i], want)
		}
		if exists(filepath.Join(q.root, "error", want)) {
			t.Errorf("error/%s is still there", want)
		}
	}

	got, _ := readFile(t, filepath.Join(inbox, "0001-a.json"))
	wantProps := map[string]string{"tenant": "acme", "dlqctl_run_id": "run-1", "dlqctl_seq": "1", "dlqctl_redriven_from": "0001-a"}
	if got.RedriveCount != 1 || !reflect.DeepEqual(got.Properties, wantProps) || got.EventID != a.EventID ||
		got.Fingerprint != a.Fingerprint || got.FingerprintComputed || string(got.Payload) != `{"n":1}` || got.Attempts != 3 {
		t.Errorf("inbox/0001-a.json = %+v", got)
	}
	got, raw := readFile(t, filepath.Join(inbox, "0002-b.json"))
	if got.RedriveCount != 5 || got.Properties["dlqctl_seq"] != "2" || !got.FingerprintComputed {
		t.Errorf("inbox/0002-b.json = %+v", got)
	}
	if _, ok := raw["fingerprint"]; ok {
		t.Error("a computed fingerprint was written into the moved file")
	}
	if tail, err := q.Tail(ctx); err != nil || tail != "" {
		t.Errorf("Tail of an empty DLQ = %q, %v", tail, err)
	}

	// Moved already: gone, and nothing is moved twice.
	res, err = q.Publish(ctx, []backend.MoveItem{item(1, a, inbox)}, markers)
	if err != nil || !errors.Is(res[0].Err, backend.ErrNotFound) {
		t.Errorf("second publish = %+v, %v; want ErrNotFound", res, err)
	}
}

func TestPublishChangedAndMalformed(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t)
	a := put(t, q, "a", `{"n":1}`, true, 0)
	b := put(t, q, "b", `{"n":2}`, false, 0)
	bad := filepath.Join(q.root, "error", "c.json")
	if err := os.WriteFile(bad, []byte(`{"event_id": 5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, id := range []string{"a", "b", "c"} {
		before[id], _ = os.ReadFile(q.path(id))
	}

	ia, ib := item(1, a, ""), item(2, b, "")
	ia.Fingerprint = "sha256:0000"
	// A computed fingerprint is checked against the payload as it is now.
	ib.Fingerprint = envelope.ComputeFingerprint([]byte(`{"n":3}`))
	res, err := q.Publish(ctx, []backend.MoveItem{ia, ib, {Seq: 3, ID: "c"}}, markers)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if !errors.Is(res[i].Err, backend.ErrChanged) {
			t.Errorf("item %d = %+v, want ErrChanged", i, res[i])
		}
	}
	if res[2].Err == nil || !strings.Contains(res[2].Err.Error(), "malformed") {
		t.Errorf("malformed item = %+v", res[2])
	}
	for id, data := range before {
		if now, _ := os.ReadFile(q.path(id)); string(now) != string(data) {
			t.Errorf("error/%s.json changed", id)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(q.root, "inbox")); len(ents) != 0 {
		t.Errorf("inbox has %d files", len(ents))
	}

	// Upper-case hex in the plan still matches.
	ia.Fingerprint = strings.ToUpper(a.Fingerprint)
	if res, err := q.Publish(ctx, []backend.MoveItem{ia}, markers); err != nil || res[0].Err != nil {
		t.Errorf("case-insensitive fingerprint: %+v, %v", res, err)
	}
}

func TestPublishNeverClobbersTheInbox(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t)
	a := put(t, q, "a", `{"n":1}`, true, 0)
	inboxFile := filepath.Join(q.root, "inbox", "a.json")
	if err := os.WriteFile(inboxFile, []byte("the consumer has not taken me yet"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(q.path("a"))
	res, err := q.Publish(ctx, []backend.MoveItem{item(1, a, "")}, markers)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "already has a.json") || res[0].Removed {
		t.Errorf("result = %+v, want an 'already has a.json' error", res[0])
	}
	if now, _ := os.ReadFile(inboxFile); string(now) != "the consumer has not taken me yet" {
		t.Error("the inbox file was replaced")
	}
	if now, _ := os.ReadFile(q.path("a")); string(now) != string(before) {
		t.Error("the DLQ file got markers for a move that could not happen")
	}

	// The rename itself refuses too, when the name appears after the check.
	if err := renameNoReplace(q.path("a"), inboxFile); !errors.Is(err, fs.ErrExist) {
		t.Errorf("renameNoReplace onto an existing file = %v, want ErrExist", err)
	}
	if !exists(q.path("a")) {
		t.Error("the source went away")
	}
}

// A crash between the two renames leaves the DLQ file with this run's
// markers: the resumed run moves it without raising redrive_count again.
func TestPublishAfterCrashBetweenRenames(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t)
	a := put(t, q, "a", `{"n":1}`, true, 2)
	b := put(t, q, "b", `{"n":2}`, true, 2)
	for _, e := range []envelope.Envelope{a, b} {
		data, err := MarshalFile(withMarkers(e, item(7, e, ""), markers))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(q.path(e.ID), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := q.Get(ctx, "a"); got.RedriveCount != 3 || got.Fingerprint != a.Fingerprint {
		t.Fatalf("marked DLQ file = %+v", got)
	}
	res, err := q.Publish(ctx, []backend.MoveItem{item(7, a, "")}, markers)
	if err != nil || res[0].Err != nil {
		t.Fatalf("resumed publish = %+v, %v", res, err)
	}
	if got, _ := readFile(t, filepath.Join(q.root, "inbox", "a.json")); got.RedriveCount != 3 {
		t.Errorf("redrive_count = %d after a resumed move, want 3 (raised once)", got.RedriveCount)
	}
	// Another run raises it.
	res, err = q.Publish(ctx, []backend.MoveItem{item(1, b, "")}, backend.Markers{RunID: "run-2"})
	if err != nil || res[0].Err != nil {
		t.Fatalf("publish = %+v, %v", res, err)
	}
	if got, _ := readFile(t, filepath.Join(q.root, "inbox", "b.json")); got.RedriveCount != 4 || got.Properties["dlqctl_run_id"] != "run-2" {
		t.Errorf("another run: redrive_count %d, run %q; want 4, run-2", got.RedriveCount, got.Properties["dlqctl_run_id"])
	}
}

// The rewrite never brings back a file that left the DLQ since it was read.
func TestRewriteOnlyIfPresent(t *testing.T) {
	q := newQueue(t)
	err := q.rewrite("gone", []byte("{}"), nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("rewrite of a missing file = %v, want ErrNotExist", err)
	}
	ents, _ := os.ReadDir(filepath.Join(q.root, "error"))
	if len(ents) != 0 {
		t.Errorf("error/ holds %v after a failed rewrite", ents)
	}
}

func TestPublishToAnotherFolder(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t)
	a := put(t, q, "a", `{"n":1}`, true, 0)
	b := put(t, q, "b", `{"n":2}`, true, 0)
	to := filepath.Join(t.TempDir(), "replay")
	if err := os.Mkdir(to, 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := q.Publish(ctx, []backend.MoveItem{item(1, a, to), item(2, b, filepath.Join(to, "missing"))}, markers)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || !exists(filepath.Join(to, "a.json")) {
		t.Errorf("--to folder: %+v", res[0])
	}
	if res[1].Err == nil || !strings.Contains(res[1].Err.Error(), "destination folder") || !exists(q.path("b")) {
		t.Errorf("missing --to folder: %+v", res[1])
	}

	// Another filesystem: the move cannot be one rename.
	other, err := os.MkdirTemp("/dev/shm", "dlqctl-move-")
	if err != nil {
		t.Skipf("no second filesystem to test EXDEV: %v", err)
	}
	defer os.RemoveAll(other)
	var s1, s2 syscall.Stat_t
	if syscall.Stat(other, &s1) != nil || syscall.Stat(q.root, &s2) != nil || s1.Dev == s2.Dev {
		t.Skip("/dev/shm is on the same filesystem as the test's temp folder")
	}
	before, _ := os.ReadFile(q.path("b"))
	res, err = q.Publish(ctx, []backend.MoveItem{item(2, b, other)}, markers)
	if err != nil || res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "same filesystem") {
		t.Errorf("cross-filesystem --to: %+v, %v", res, err)
	}
	if now, _ := os.ReadFile(q.path("b")); string(now) != string(before) {
		t.Error("the DLQ file changed for a move that could not happen")
	}
}

func TestRemoveAndTail(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t)
	put(t, q, "0001", `1`, true, 0)
	put(t, q, "0003", `3`, true, 0)
	put(t, q, "0002", `2`, true, 0)
	// Temporary files are not entries.
	if err := os.WriteFile(filepath.Join(q.root, "error", ".tmp-9999-x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if tail, err := q.Tail(ctx); err != nil || tail != "0003" {
		t.Errorf("Tail = %q, %v; want 0003", tail, err)
	}
	res, err := q.Remove(ctx, []backend.MoveItem{{ID: "0003"}, {ID: "0003"}, {ID: "../inbox/x"}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || !res[0].Removed || exists(q.path("0003")) {
		t.Errorf("remove present = %+v", res[0])
	}
	for _, r := range res[1:] {
		if !errors.Is(r.Err, backend.ErrNotFound) || r.Removed {
			t.Errorf("remove gone = %+v, want ErrNotFound", r)
		}
	}
	if tail, err := q.Tail(ctx); err != nil || tail != "0002" {
		t.Errorf("Tail after remove = %q, %v; want 0002", tail, err)
	}
}
