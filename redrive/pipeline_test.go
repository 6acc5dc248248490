package redrive

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// journalWatch is a fake mover for what no real backend can show: what the
// journal file held at the moment each call reached the backend. It wraps
// the fake queue and, on every Publish and Remove, reads the journal from
// disk and checks the write-ahead rule for each item; it also checks that
// no two mover calls overlap and that publishes come in plan order.
type journalWatch struct {
	*fakeQueue
	t       *testing.T
	path    string
	calls   atomic.Int32 // mover calls running now
	lastSeq int64        // highest seq published so far
	// beforePublish, when set, runs at the start of each Publish with
	// its items (a test holds a call there).
	beforePublish func(items []backend.MoveItem)
}

// onDisk is each entry's last step in the journal file as it is now.
func (w *journalWatch) onDisk() map[int64]string {
	recs, err := ReadJournal(w.path)
	if err != nil {
		w.t.Errorf("read the journal during a mover call: %v", err)
		return nil
	}
	steps := map[int64]string{}
	for _, r := range recs {
		if isStep(r.Type) {
			steps[r.Seq] = r.Type
		}
	}
	return steps
}

func (w *journalWatch) enter(what string) func() {
	if n := w.calls.Add(1); n != 1 {
		w.t.Errorf("%s while another mover call runs (%d at once): the backend must see one call at a time", what, n)
	}
	return func() { w.calls.Add(-1) }
}

func (w *journalWatch) Publish(ctx context.Context, items []backend.MoveItem, m backend.Markers) ([]backend.MoveResult, error) {
	defer w.enter("publish")()
	if w.beforePublish != nil {
		w.beforePublish(items)
	}
	steps := w.onDisk()
	for _, it := range items {
		if s := steps[it.Seq]; s != RecIntent && s != RecAmbiguous {
			w.t.Errorf("entry %d sent with its last step on disk %q: its intent must be synced before its publish", it.Seq, s)
		}
		if it.Seq <= w.lastSeq {
			w.t.Errorf("entry %d sent after entry %d: publishes must keep plan order", it.Seq, w.lastSeq)
		}
		w.lastSeq = it.Seq
	}
	return w.fakeQueue.Publish(ctx, items, m)
}

func (w *journalWatch) Remove(ctx context.Context, items []backend.MoveItem) ([]backend.MoveResult, error) {
	defer w.enter("remove")()
	steps := w.onDisk()
	for _, it := range items {
		if s := steps[it.Seq]; s != RecPublished {
			w.t.Errorf("entry %d removed with its last step on disk %q: its published record must be written before its removal", it.Seq, s)
		}
	}
	return w.fakeQueue.Remove(ctx, items)
}

func watchedEngine(t *testing.T, n int, atomic bool) (*Engine, *journalWatch, *fakeQueue) {
	q := newFakeQueue(n, atomic)
	journal := filepath.Join(t.TempDir(), "j")
	eng, _ := newEngine(t, q, journal)
	// Each journal write starts late, so that a call sent ahead of its
	// records would surely reach the fake before they are on disk.
	eng.Journal.now = func() time.Time {
		time.Sleep(5 * time.Millisecond)
		return time.Now()
	}
	w := &journalWatch{fakeQueue: q, t: t, path: journal}
	eng.Mover = w
	eng.Chunk = 4
	return eng, w, q
}

// Every publish finds its entries' intents in the journal file, every
// removal their published records, and no mover call overlaps another.
func TestPipelineKeepsTheWriteAheadRule(t *testing.T) {
	for _, atomic := range []bool{true, false} {
		t.Run(fmt.Sprintf("atomic=%v", atomic), func(t *testing.T) {
			eng, w, q := watchedEngine(t, 30, atomic)
			st, err := eng.Start("run1", q.planFor(t, []int{30}), "p", "fake", "t", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := eng.Run(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			if moved, _, _, _ := st.Counts(); moved != 30 || st.Status != StatusCompleted {
				t.Fatalf("moved %d, status %s; want 30, completed", moved, st.Status)
			}
			if w.lastSeq != 30 || q.publishCalls != 8 {
				t.Errorf("last entry sent %d in %d publishes, want 30 in 8 chunks of up to 4", w.lastSeq, q.publishCalls)
			}
			for id, n := range q.published {
				if n != 1 {
					t.Errorf("%s published %d times", id, n)
				}
			}
		})
	}
}

// The pipeline itself: each publish but the last is held until the next
// chunk's intents are in the journal file. An engine that waited for the
// round trip before journaling the next chunk would never get there.
func TestNextIntentsAreSyncedWhileAPublishIsInFlight(t *testing.T) {
	const n = 30
	eng, w, q := watchedEngine(t, n, true)
	w.beforePublish = func(items []backend.MoveItem) {
		next := items[len(items)-1].Seq + 1
		if next > n {
			return
		}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if s := w.onDisk()[next]; s == RecIntent {
				return
			}
		}
		w.t.Errorf("publish of entries %d–%d: the intent of entry %d, the next chunk's first, was not synced while it was in flight", items[0].Seq, next-1, next)
	}
	st, err := eng.Start("run1", q.planFor(t, []int{n}), "p", "fake", "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if moved, _, _, _ := st.Counts(); moved != n {
		t.Errorf("moved %d, want %d", moved, n)
	}
}

// Ctrl-C while a chunk is in flight and the next one's intents are synced:
// both are sent and journaled, nothing more; the journal holds no intent
// without its outcome, and resume moves the rest once.
func TestInterruptSendsEveryChunkWhoseIntentsAreSynced(t *testing.T) {
	for _, atomic := range []bool{true, false} {
		t.Run(fmt.Sprintf("atomic=%v", atomic), func(t *testing.T) {
			eng, w, q := watchedEngine(t, 30, atomic)
			ctx, cancel := context.WithCancel(context.Background())
			intents := 0
			eng.Crash = func(step string) {
				if step == RecIntent {
					if intents++; intents == 2 {
						cancel() // the second chunk's intents are synced, the first is in flight
					}
				}
			}
			plan := q.planFor(t, []int{30})
			st, _ := eng.Start("run1", plan, "p", "fake", "t", nil)
			if err := eng.Run(ctx, st); err == nil || st.Status != StatusInterrupted {
				t.Fatalf("err %v status %s, want interrupted", err, st.Status)
			}
			if moved, _, _, _ := st.Counts(); moved != 8 || w.lastSeq != 8 {
				t.Errorf("moved %d, last sent %d; want the 8 of the two chunks journaled before Ctrl-C", moved, w.lastSeq)
			}
			steps := w.onDisk()
			for seq, s := range steps {
				if s == RecIntent || s == RecPublished {
					t.Errorf("entry %d: the interrupted journal ends at %s", seq, s)
				}
			}
			recs, err := ReadJournal(w.path)
			if err != nil {
				t.Fatal(err)
			}
			st = Replay(plan, recs)
			eng2, _ := newEngine(t, q, w.path)
			eng2.Mover, eng2.Chunk = w, 4
			if err := eng2.Resume(st, "t", nil); err != nil {
				t.Fatal(err)
			}
			if err := eng2.Run(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			if moved, _, _, _ := st.Counts(); moved != 30 || len(q.dlq) != 0 {
				t.Errorf("after resume: moved %d, %d left in the DLQ", moved, len(q.dlq))
			}
			for id, n := range q.published {
				if n != 1 {
					t.Errorf("%s published %d times", id, n)
				}
			}
		})
	}
}
