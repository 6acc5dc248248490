package redrive

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
)

// A plan whose entries carry bytes that are not UTF-8 reads back with the
// same bytes and the same digest.
func TestPlanWithNonUTF8IDsIsByteStable(t *testing.T) {
	p := testPlan()
	en := p.Entries.At(0)
	en.EventID, en.Key = "E\xff\xfe", "k\xc3"
	p.Entries.Set(0, en)
	p.Excluded = append(p.Excluded, Excluded{ID: "9", EventID: "X\xff", Why: "test"})
	if err := p.Seal(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "p.json")
	if err := WritePlan(path, p); err != nil {
		t.Fatal(err)
	}
	back, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if back.Entries.At(0).EventID != "E\xff\xfe" || back.Entries.At(0).Key != "k\xc3" || back.Excluded[len(back.Excluded)-1].EventID != "X\xff" {
		t.Errorf("bytes changed: %q %q", back.Entries.At(0).EventID, back.Entries.At(0).Key)
	}
	again := filepath.Join(t.TempDir(), "again.json")
	if err := WritePlan(again, back); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(path)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("a plan written again is not byte for byte the same")
	}
	// The exact form must agree with the readable one.
	bad := bytes.Replace(a, []byte("\"event_id\": \"E\uFFFD\""), []byte("\"event_id\": \"Z\uFFFD\""), 1)
	if bytes.Equal(bad, a) {
		t.Fatal("test edit found nothing to change")
	}
	os.WriteFile(path, bad, 0o600)
	if _, err := ReadPlan(path); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("a readable form edited apart from the exact one: %v", err)
	}
	// Text typed by the operator has no exact form: refused.
	p.Reason = "bad \xff"
	if err := p.Seal(); err == nil {
		t.Error("a reason that is not UTF-8 sealed")
	}
}

// A chained journal verifies; any edit, a line taken out, another key,
// or unsigned lines added at its end do not. Lines a crash cut from the
// end of a group are left out, not refused.
func TestJournalChain(t *testing.T) {
	q := newFakeQueue(12, true)
	path := filepath.Join(t.TempDir(), "j")
	eng, _ := newEngine(t, q, path)
	key := JournalKey([]byte("k"), "run1")
	eng.Journal.Chain(key, "")
	st, err := eng.Start("run1", q.planFor(t, []int{5}), "p", "fake", "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	scan := func(name string, content []byte, key []byte) (Verified, int, error) {
		t.Helper()
		p := filepath.Join(t.TempDir(), name)
		os.WriteFile(p, content, 0o600)
		n := 0
		v, err := ScanJournal(p, key, func(Record) error { n++; return nil })
		return v, n, err
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty rest after the last newline
	v, n, err := scan("whole", data, key)
	if err != nil || n != len(lines) || v.Size != int64(len(data)) {
		t.Fatalf("a journal as written: %d of %d records, size %d of %d, %v", n, len(lines), v.Size, len(data), err)
	}
	for name, k := range map[string][]byte{"other key": JournalKey([]byte("other"), "run1"), "other run": JournalKey([]byte("k"), "run2")} {
		if _, _, err := scan(name, data, k); !errors.Is(err, ErrForged) {
			t.Errorf("%s: %v", name, err)
		}
	}
	join := func(ls [][]byte) []byte { return bytes.Join(ls, nil) }
	dropped := append(append([][]byte{}, lines[:3]...), lines[4:]...)
	if _, _, err := scan("dropped", join(dropped), key); !errors.Is(err, ErrForged) {
		t.Errorf("a line taken out: %v", err)
	}
	edited := append([][]byte{}, lines...)
	edited[3] = bytes.Replace(edited[3], []byte(`"type":"intent"`), []byte(`"type":"removed"`), 1)
	if _, _, err := scan("edited", join(edited), key); !errors.Is(err, ErrForged) {
		t.Errorf("an edited line: %v", err)
	}
	forged := append(append([]byte{}, data...), []byte(`{"type":"published","at":"2026-11-29T12:00:00Z","run_id":"run1","seq":3}`+"\n")...)
	if _, _, err := scan("forged", forged, key); !errors.Is(err, ErrForged) {
		t.Errorf("an unsigned record added at the end: %v", err)
	}
	// A crash in the middle of a group's write: its head is whole, its
	// MAC line torn. The group is left out.
	var groupStart int
	for i := len(lines) - 2; i >= 0; i-- {
		if bytes.Contains(lines[i], []byte(`"mac":`)) {
			groupStart = i + 1
			break
		}
	}
	torn := join(lines[:len(lines)-1])
	torn = append(torn, lines[len(lines)-1][:20]...)
	v, n, err = scan("torn", torn, key)
	if err != nil || n != groupStart {
		t.Errorf("a torn group: %d records believed, want %d; %v", n, groupStart, err)
	}
	if want := int64(len(join(lines[:groupStart]))); v.Size != want {
		t.Errorf("verified size %d, want %d", v.Size, want)
	}
	if _, _, err := scan("unsigned", data, nil); err != nil {
		t.Errorf("reading without a key: %v", err)
	}
}

// The ramp counts consecutive passed batches: after a failed gate it
// starts again at its first size.
func TestRampStartsAgainAfterAFailedGate(t *testing.T) {
	q := newFakeQueue(40, true)
	q.doubleEffect["E003"] = true
	eng, _ := newEngine(t, q, filepath.Join(t.TempDir(), "j"))
	st, err := eng.Start("run1", q.planFor(t, []int{2, 5, 10}), "p", "fake", "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	eng.Run(context.Background(), st) // batch 1 (2) passes, batch 2 (5) holds E003: halted
	if st.Status != StatusHalted {
		t.Fatalf("status %s, want halted", st.Status)
	}
	if err := eng.Run(context.Background(), st); err != nil { // going on past the gate
		t.Fatal(err)
	}
	var sizes []int
	for _, b := range st.Batches {
		sizes = append(sizes, b.Size)
	}
	want := []int{2, 5, 2, 5, 10, 10, 6}
	if len(sizes) != len(want) {
		t.Fatalf("batch sizes %v, want %v", sizes, want)
	}
	for i := range want {
		if sizes[i] != want[i] {
			t.Fatalf("batch sizes %v, want %v", sizes, want)
		}
	}
}

// shortMover answers fewer results than items: a backend bug that must
// not be read as "the rest succeeded".
type shortMover struct{ *fakeQueue }

func (m shortMover) Publish(ctx context.Context, items []backend.MoveItem, mk backend.Markers) ([]backend.MoveResult, error) {
	res, err := m.fakeQueue.Publish(ctx, items, mk)
	if len(res) > 1 {
		res = res[:len(res)-1]
	}
	return res, err
}

func TestABackendMustAnswerOneResultPerItem(t *testing.T) {
	q := newFakeQueue(4, true)
	eng, _ := newEngine(t, q, filepath.Join(t.TempDir(), "j"))
	eng.Mover = shortMover{q}
	st, err := eng.Start("run1", q.planFor(t, []int{4}), "p", "fake", "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = eng.Run(context.Background(), st)
	if err == nil || !strings.Contains(err.Error(), "3 results for 4 entries") {
		t.Fatalf("Run = %v", err)
	}
	if st.Status != StatusFailed {
		t.Errorf("status %s, want failed", st.Status)
	}
}

// A failed entry is tried again by a run told to (resume --retry-failed),
// once, before the entries not tried yet.
func TestRetryFailedTriesEachOnce(t *testing.T) {
	q := newFakeQueue(6, false)
	path := filepath.Join(t.TempDir(), "j")
	eng, _ := newEngine(t, q, path)
	eng.Mover = failing{q, map[string]bool{"E002": true}}
	p := q.planFor(t, []int{3})
	p.Params.UnverifiedOK = true
	st, err := eng.Start("run1", p, "p", "fake", "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	eng.Run(context.Background(), st)
	if _, _, _, failed := st.Counts(); failed != 1 {
		t.Fatalf("%d failed, want 1", failed)
	}
	recs, _ := ReadJournal(path)
	st = Replay(p, recs)
	if n := st.RetryFailed(); n != 1 {
		t.Fatalf("RetryFailed = %d, want 1", n)
	}
	eng.Mover = q
	if err := eng.Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if moved, _, _, failed := st.Counts(); moved != 6 || failed != 0 {
		t.Errorf("moved %d, failed %d; want 6, 0", moved, failed)
	}
}

// failing fails the publish of some events, each on its own.
type failing struct {
	*fakeQueue
	fail map[string]bool
}

func (f failing) Publish(ctx context.Context, items []backend.MoveItem, m backend.Markers) ([]backend.MoveResult, error) {
	var ok []backend.MoveItem
	for _, it := range items {
		if !f.fail[it.EventID] {
			ok = append(ok, it)
		}
	}
	res, err := f.fakeQueue.Publish(ctx, ok, m)
	if err != nil {
		return nil, err
	}
	out := make([]backend.MoveResult, len(items))
	j := 0
	for i, it := range items {
		if f.fail[it.EventID] {
			out[i].Err = errors.New("WRONGTYPE (injected)")
			continue
		}
		out[i] = res[j]
		j++
	}
	return out, nil
}
