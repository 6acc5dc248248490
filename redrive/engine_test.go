package redrive

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/envelope"
)

// fakeQueue is an in-memory DLQ and destination for fault injection the
// real backends cannot do on cue: a crash between two steps, a publish that
// fails, a mover that is not atomic. Its consumer applies each published
// event at once and records attempts and effects like a real inbox.
type fakeQueue struct {
	mu        sync.Mutex
	atomic    bool
	dlq       []envelope.Envelope
	next      int
	published map[string]int // event ID → times published
	failOn    map[string]bool
	// consumer behaviour per event ID
	doubleEffect map[string]bool
	redead       map[string]bool
	inbox        map[string]*effects.Record
	publishCalls int
	probeCalls   int
}

func newFakeQueue(n int, atomic bool) *fakeQueue {
	q := &fakeQueue{atomic: atomic, published: map[string]int{}, failOn: map[string]bool{},
		doubleEffect: map[string]bool{}, redead: map[string]bool{}, inbox: map[string]*effects.Record{}}
	for i := 1; i <= n; i++ {
		q.add(fmt.Sprintf("E%03d", i))
	}
	return q
}

func (q *fakeQueue) add(eventID string) {
	q.next++
	payload := []byte(`{"e":"` + eventID + `"}`)
	q.dlq = append(q.dlq, envelope.Envelope{ID: fmt.Sprintf("%06d", q.next), EventID: eventID,
		Fingerprint: envelope.ComputeFingerprint(payload), Payload: payload, PayloadEncoding: "json", Key: "k" + eventID[len(eventID)-1:],
		Origin: envelope.Origin{Topic: "orders"}})
}

func (q *fakeQueue) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	q.mu.Lock()
	snapshot := append([]envelope.Envelope(nil), q.dlq...)
	q.mu.Unlock()
	for _, e := range snapshot {
		if e.ID <= after {
			continue
		}
		if err := fn(e); err != nil {
			if errors.Is(err, backend.ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

func (q *fakeQueue) Get(ctx context.Context, id string) (envelope.Envelope, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range q.dlq {
		if e.ID == id {
			return e, nil
		}
	}
	return envelope.Envelope{}, backend.ErrNotFound
}

func (q *fakeQueue) Len(ctx context.Context) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int64(len(q.dlq)), nil
}
func (q *fakeQueue) String() string { return "fake" }
func (q *fakeQueue) Close() error   { return nil }
func (q *fakeQueue) Tail(ctx context.Context) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return fmt.Sprintf("%06d", q.next), nil
}
func (q *fakeQueue) Atomic() bool                     { return q.atomic }
func (q *fakeQueue) DefaultDest(origin string) string { return origin }

func (q *fakeQueue) remove(id string) bool {
	for i, e := range q.dlq {
		if e.ID == id {
			q.dlq = append(q.dlq[:i], q.dlq[i+1:]...)
			return true
		}
	}
	return false
}

func (q *fakeQueue) Publish(ctx context.Context, items []backend.MoveItem, m backend.Markers) ([]backend.MoveResult, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.publishCalls++
	out := make([]backend.MoveResult, len(items))
	for i, it := range items {
		if q.failOn[it.EventID] {
			return nil, errors.New("connection reset (injected)")
		}
		found := false
		for _, e := range q.dlq {
			found = found || e.ID == it.ID
		}
		if !found {
			out[i].Err = backend.ErrNotFound
			continue
		}
		q.published[it.EventID]++
		q.consume(it.EventID, it.Fingerprint)
		out[i].DestID = "d-" + it.ID
		if q.atomic {
			q.remove(it.ID)
			out[i].Removed = true
		}
	}
	return out, nil
}

// consume is the fake consumer: an idempotent inbox.
func (q *fakeQueue) consume(eventID, fp string) {
	r := q.inbox[eventID]
	if r == nil {
		r = &effects.Record{EventID: eventID, Fingerprint: fp}
		q.inbox[eventID] = r
	}
	r.Attempts++
	if q.redead[eventID] {
		q.add(eventID)
		return
	}
	if r.Effects == 0 {
		r.Effects = 1
		if q.doubleEffect[eventID] {
			r.Effects = 2
		}
	}
}

func (q *fakeQueue) Remove(ctx context.Context, items []backend.MoveItem) ([]backend.MoveResult, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]backend.MoveResult, len(items))
	for i, it := range items {
		if !q.remove(it.ID) {
			out[i].Err = backend.ErrNotFound
		}
	}
	return out, nil
}

// Records makes the fake queue its own effects probe.
func (q *fakeQueue) Records(ctx context.Context, ids []string) (map[string]effects.Record, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.probeCalls++
	out := map[string]effects.Record{}
	for _, id := range ids {
		if r, ok := q.inbox[id]; ok {
			out[id] = *r
		}
	}
	return out, nil
}

func (q *fakeQueue) planFor(t *testing.T, ramp []int) *Plan {
	p := &Plan{Schema: PlanSchema, Kind: KindRedrive, Reason: "test", PlannedBy: "t", Source: "fake",
		Params: Params{Ramp: ramp, Settle: Duration(time.Second)}}
	for i, e := range q.dlq {
		p.Entries.Append(Entry{Seq: int64(i + 1), ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint, Key: e.Key, Dest: "orders"})
	}
	if err := p.Seal(); err != nil {
		t.Fatal(err)
	}
	return p
}

type recorder struct{ batches []BatchReport }

func (r *recorder) Progress(done, total int) {}
func (r *recorder) BatchDone(b BatchReport)  { r.batches = append(r.batches, b) }

// clock is a fake clock that Sleep advances.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }
func (c *clock) sleep(ctx context.Context, d time.Duration) error {
	c.t = c.t.Add(d)
	return ctx.Err()
}

func newEngine(t *testing.T, q *fakeQueue, journal string) (*Engine, *recorder) {
	j, err := CreateJournal(journal, time.Now)
	if err != nil {
		j, err = OpenJournal(journal, time.Now)
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { j.Close() })
	c := &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	rec := &recorder{}
	return &Engine{Source: q, Mover: q, Probe: probeOf{q}, Journal: j, Now: c.now, Sleep: c.sleep, Observer: rec}, rec
}

// probeOf adapts the fake queue to effects.Probe.
type probeOf struct{ q *fakeQueue }

func (p probeOf) Records(ctx context.Context, ids []string) (map[string]effects.Record, error) {
	return p.q.Records(ctx, ids)
}
func (p probeOf) String() string { return "fake-effects" }
func (p probeOf) Close() error   { return nil }

func TestRunRampsAndReconciles(t *testing.T) {
	q := newFakeQueue(75, true)
	eng, rec := newEngine(t, q, filepath.Join(t.TempDir(), "j"))
	st, err := eng.Start("run1", q.planFor(t, []int{10, 50, 200}), "p", "fake", "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if st.Status != StatusCompleted {
		t.Fatalf("status %s (%s)", st.Status, st.HaltedBy)
	}
	var sizes []int
	for _, b := range rec.batches {
		sizes = append(sizes, b.Size)
		if b.Verdicts[VerdictApplied] != b.Size || b.Effects != int64(b.Size) || b.DLQAfter != b.DLQBefore-int64(b.Size) {
			t.Errorf("batch %d: %+v", b.Index, b)
		}
	}
	if fmt.Sprint(sizes) != "[10 50 15]" {
		t.Errorf("batch sizes %v, want [10 50 15]", sizes)
	}
	if q.probeCalls != 3 {
		t.Errorf("%d probe round trips for 3 batches that settled at once, want 3", q.probeCalls)
	}
	for id, n := range q.published {
		if n != 1 {
			t.Errorf("%s published %d times", id, n)
		}
	}
	if len(q.dlq) != 0 {
		t.Errorf("%d entries left in the DLQ", len(q.dlq))
	}
}

func TestFailedGateStopsBeforeTheNextBatch(t *testing.T) {
	cases := map[string]func(q *fakeQueue){
		GateDuplicateEffect: func(q *fakeQueue) { q.doubleEffect["E005"] = true },
		GateReDeadLettered:  func(q *fakeQueue) { q.redead["E003"] = true },
	}
	for gate, setup := range cases {
		t.Run(gate, func(t *testing.T) {
			q := newFakeQueue(40, true)
			setup(q)
			eng, rec := newEngine(t, q, filepath.Join(t.TempDir(), "j"))
			st, _ := eng.Start("run1", q.planFor(t, []int{10, 50}), "p", "fake", "t", nil)
			if err := eng.Run(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			if st.Status != StatusHalted || st.HaltedBy != gate {
				t.Fatalf("status %s halted by %q, want halted by %s", st.Status, st.HaltedBy, gate)
			}
			if len(rec.batches) != 1 {
				t.Fatalf("%d batches ran; the next batch must not start after a failed gate", len(rec.batches))
			}
			total := 0
			for _, n := range q.published {
				total += n
			}
			if total != 10 {
				t.Errorf("%d events published, want only the first batch's 10", total)
			}
		})
	}
}

func TestPendingAfterSettleStopsTheRun(t *testing.T) {
	q := newFakeQueue(10, true)
	eng, _ := newEngine(t, q, filepath.Join(t.TempDir(), "j"))
	eng.Probe = probeOf{&fakeQueue{inbox: map[string]*effects.Record{}}} // a consumer that records nothing
	st, _ := eng.Start("run1", q.planFor(t, []int{5}), "p", "fake", "t", nil)
	if err := eng.Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if st.HaltedBy != GatePending {
		t.Fatalf("halted by %q, want pending", st.HaltedBy)
	}
}

func TestUnverifiedStaysAtTheFirstBatchSize(t *testing.T) {
	q := newFakeQueue(25, true)
	eng, rec := newEngine(t, q, filepath.Join(t.TempDir(), "j"))
	eng.Probe = nil
	st, _ := eng.Start("run1", q.planFor(t, []int{10, 50}), "p", "fake", "t", nil)
	if err := eng.Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, b := range rec.batches {
		sizes = append(sizes, b.Size)
		if b.Verdicts[VerdictUnverified] != b.Size {
			t.Errorf("batch %d verdicts %v, want all unverified", b.Index, b.Verdicts)
		}
	}
	if fmt.Sprint(sizes) != "[10 10 5]" {
		t.Errorf("batch sizes %v without effects, want [10 10 5]", sizes)
	}
}

// crashAfter panics out of the engine at the nth journal step of a type,
// as a SIGKILL there would leave it.
type crash struct{ step string }

func crashAfter(step string, n int) func(string) {
	seen := 0
	return func(s string) {
		if s == step {
			seen++
			if seen == n {
				panic(crash{step})
			}
		}
	}
}

func runUntilCrash(eng *Engine, st *State) (crashed bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crash); !ok {
				panic(r)
			}
			crashed = true
		}
	}()
	eng.Run(context.Background(), st)
	return false
}

// TestCrashAtEveryStepThenResume kills the run after each kind of journal
// step in turn and resumes from the journal: every entry ends up moved
// exactly once, with exactly one effect.
func TestCrashAtEveryStepThenResume(t *testing.T) {
	for _, atomic := range []bool{true, false} {
		for _, step := range []string{RecBatchStart, RecIntent, RecPublished, RecRemoved, RecBatchEnd} {
			if atomic && step == RecRemoved {
				continue // atomic movers journal removed with published
			}
			for _, n := range []int{1, 2} {
				name := fmt.Sprintf("atomic=%v/%s#%d", atomic, step, n)
				t.Run(name, func(t *testing.T) {
					q := newFakeQueue(30, atomic)
					journal := filepath.Join(t.TempDir(), "j")
					eng, _ := newEngine(t, q, journal)
					eng.Chunk = 4
					eng.Crash = crashAfter(step, n)
					st, _ := eng.Start("run1", q.planFor(t, []int{10}), "p", "fake", "t", nil)
					if !runUntilCrash(eng, st) {
						t.Fatalf("never reached %s #%d", step, n)
					}
					recs, err := ReadJournal(journal)
					if err != nil {
						t.Fatal(err)
					}
					st = Replay(st.Plan, recs)
					eng2, _ := newEngine(t, q, journal)
					if err := eng2.Resume(st, "t", nil); err != nil {
						t.Fatal(err)
					}
					if err := eng2.Run(context.Background(), st); err != nil {
						t.Fatal(err)
					}
					if st.Status != StatusCompleted {
						t.Fatalf("after resume: %s %s", st.Status, st.HaltedBy)
					}
					if len(q.dlq) != 0 {
						t.Errorf("%d entries still in the DLQ", len(q.dlq))
					}
					var twice []string
					for id, n := range q.published {
						if n > 1 && atomic {
							twice = append(twice, id)
						}
					}
					sort.Strings(twice)
					if len(twice) > 0 {
						t.Errorf("moved twice by an atomic mover: %v", twice)
					}
					for id, r := range q.inbox {
						if r.Effects != 1 {
							t.Errorf("%s has %d effects", id, r.Effects)
						}
					}
					if len(q.inbox) != 30 {
						t.Errorf("%d events reached the consumer, want 30", len(q.inbox))
					}
					moved, gone, skipped, failed := st.Counts()
					if moved != 30 || gone+skipped+failed != 0 {
						t.Errorf("counts moved=%d gone=%d skipped=%d failed=%d", moved, gone, skipped, failed)
					}
				})
			}
		}
	}
}

func TestNonAtomicResumeResendsAnUnknownOutcomeAsAmbiguous(t *testing.T) {
	q := newFakeQueue(8, false)
	journal := filepath.Join(t.TempDir(), "j")
	eng, _ := newEngine(t, q, journal)
	eng.Chunk = 4
	eng.Crash = crashAfter(RecIntent, 1)
	st, _ := eng.Start("run1", q.planFor(t, []int{8}), "p", "fake", "t", nil)
	runUntilCrash(eng, st)
	recs, _ := ReadJournal(journal)
	st = Replay(st.Plan, recs)
	eng2, rec := newEngine(t, q, journal)
	eng2.Resume(st, "t", nil)
	if err := eng2.Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	recs, _ = ReadJournal(journal)
	ambiguous := 0
	for _, r := range recs {
		if r.Type == RecAmbiguous {
			ambiguous++
		}
	}
	if ambiguous != 4 {
		t.Errorf("%d ambiguous records, want the 4 of the chunk in flight", ambiguous)
	}
	// The fake consumer saw the chunk once (the crash came before the
	// send), so nothing was absorbed; verdicts stay applied.
	if got := rec.batches[len(rec.batches)-1].Verdicts[VerdictApplied]; got != 8 {
		t.Errorf("verdicts %v", rec.batches[len(rec.batches)-1].Verdicts)
	}
}

func TestBackendErrorStopsTheRunResumably(t *testing.T) {
	q := newFakeQueue(20, true)
	q.failOn["E012"] = true
	journal := filepath.Join(t.TempDir(), "j")
	eng, _ := newEngine(t, q, journal)
	eng.Chunk = 5
	st, _ := eng.Start("run1", q.planFor(t, []int{10}), "p", "fake", "t", nil)
	err := eng.Run(context.Background(), st)
	if err == nil || !strings.Contains(err.Error(), "injected") || st.Status != StatusFailed {
		t.Fatalf("err %v status %s, want the injected failure", err, st.Status)
	}
	q.failOn = map[string]bool{}
	recs, _ := ReadJournal(journal)
	st = Replay(st.Plan, recs)
	eng2, _ := newEngine(t, q, journal)
	eng2.Resume(st, "t", nil)
	if err := eng2.Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if len(q.dlq) != 0 || st.Status != StatusCompleted {
		t.Errorf("after resume: %d left, status %s", len(q.dlq), st.Status)
	}
	for id, n := range q.published {
		if n != 1 {
			t.Errorf("%s published %d times", id, n)
		}
	}
}

func TestInterruptFinishesTheChunkInFlight(t *testing.T) {
	q := newFakeQueue(30, true)
	journal := filepath.Join(t.TempDir(), "j")
	eng, _ := newEngine(t, q, journal)
	eng.Chunk = 4
	ctx, cancel := context.WithCancel(context.Background())
	eng.Crash = func(step string) {
		if step == RecIntent {
			cancel() // Ctrl-C while the first chunk is being sent
		}
	}
	st, _ := eng.Start("run1", q.planFor(t, []int{10}), "p", "fake", "t", nil)
	err := eng.Run(ctx, st)
	if !errors.Is(err, ErrInterrupted) || st.Status != StatusInterrupted {
		t.Fatalf("err %v status %s", err, st.Status)
	}
	if moved, _, _, _ := st.Counts(); moved != 4 {
		t.Errorf("moved %d, want the 4 of the chunk in flight", moved)
	}
}

func TestRateLimitHoldsOverARun(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a second")
	}
	q := newFakeQueue(60, true)
	eng, _ := newEngine(t, q, filepath.Join(t.TempDir(), "j"))
	eng.Limiter = rate.NewLimiter(100, 10)
	st, _ := eng.Start("run1", q.planFor(t, []int{60}), "p", "fake", "t", nil)
	start := time.Now()
	if err := eng.Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	// 60 entries at 100/s with a burst of 10 need at least 0.5 s.
	if d := time.Since(start); d < 450*time.Millisecond {
		t.Errorf("60 entries at 100/s took %s: the limiter did not hold", d)
	}
}

// The batch-end record keeps every count but lists only the events whose
// verdict needs a look, so that a large run's journal stays small.
func TestBatchEndListsOnlyNotableEvents(t *testing.T) {
	q := newFakeQueue(10, true)
	q.doubleEffect["E005"] = true
	journal := filepath.Join(t.TempDir(), "j")
	eng, rec := newEngine(t, q, journal)
	st, _ := eng.Start("run1", q.planFor(t, []int{10}), "p", "fake", "t", nil)
	if err := eng.Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if len(rec.batches) != 1 || len(rec.batches[0].Events) != 10 {
		t.Fatalf("the observer must see every event's verdict: %+v", rec.batches)
	}
	recs, err := ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	var end *BatchReport
	for _, r := range recs {
		if r.Type == RecBatchEnd {
			end = r.Batch
		}
	}
	if end == nil {
		t.Fatal("no batch-end record")
	}
	if len(end.Events) != 1 || end.Events[0].EventID != "E005" || end.Events[0].Verdict == VerdictApplied {
		t.Errorf("batch-end events %+v, want only E005's", end.Events)
	}
	if end.Verdicts[VerdictApplied] != 9 || end.UniqueEvents != 10 || end.Gate != GateDuplicateEffect {
		t.Errorf("batch-end counts %+v, want 9 applied of 10 and the duplicate-effect gate", end)
	}
}

// tailCrash crashes the run at its n-th tail read: between two batches,
// after the first one's end and last results were held for the next write
// and before that write.
type tailCrash struct {
	*fakeQueue
	n, calls int
}

func (q *tailCrash) Tail(ctx context.Context) (string, error) {
	q.calls++
	if q.calls == q.n {
		panic(crash{"tail"})
	}
	return q.fakeQueue.Tail(ctx)
}

// TestCrashBeforeTheHeldWriteThenResume: a crash that takes a batch's held
// end and last results with it leaves the batch open at intent; resume
// settles it against the DLQ, reconciles it again, and every entry is moved
// exactly once.
func TestCrashBeforeTheHeldWriteThenResume(t *testing.T) {
	for _, atomic := range []bool{true, false} {
		t.Run(fmt.Sprintf("atomic=%v", atomic), func(t *testing.T) {
			q := newFakeQueue(30, atomic)
			journal := filepath.Join(t.TempDir(), "j")
			eng, _ := newEngine(t, q, journal)
			eng.Source = &tailCrash{fakeQueue: q, n: 2}
			eng.Chunk = 4
			st, _ := eng.Start("run1", q.planFor(t, []int{10}), "p", "fake", "t", nil)
			if !runUntilCrash(eng, st) {
				t.Fatal("never reached the second tail read")
			}
			recs, err := ReadJournal(journal)
			if err != nil {
				t.Fatal(err)
			}
			var ends, intents int
			for _, r := range recs {
				switch r.Type {
				case RecBatchEnd:
					ends++
				case RecIntent:
					intents++
				}
			}
			if ends != 0 || intents != 10 {
				t.Fatalf("journal at the crash: %d batch-ends, %d intents; want 0 and 10 (the end held)", ends, intents)
			}
			st = Replay(st.Plan, recs)
			eng2, rec := newEngine(t, q, journal)
			if err := eng2.Resume(st, "t", nil); err != nil {
				t.Fatal(err)
			}
			if err := eng2.Run(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			if st.Status != StatusCompleted || len(q.dlq) != 0 {
				t.Fatalf("after resume: %s, %d left in the DLQ", st.Status, len(q.dlq))
			}
			if len(rec.batches) == 0 || rec.batches[0].Index != 1 {
				t.Errorf("resume did not reconcile the open batch 1 first: %+v", rec.batches)
			}
			for id, n := range q.published {
				if n > 1 && atomic {
					t.Errorf("%s moved %d times by an atomic mover", id, n)
				}
			}
			for id, r := range q.inbox {
				if r.Effects != 1 {
					t.Errorf("%s has %d effects", id, r.Effects)
				}
			}
			if moved, _, _, _ := st.Counts(); moved != 30 || len(q.inbox) != 30 {
				t.Errorf("moved %d, %d events at the consumer; want 30", moved, len(q.inbox))
			}
		})
	}
}

// untailed is the fake queue without its Tail, as SQS and RabbitMQ are:
// the reconciler reads the whole DLQ to find events that came back.
type untailed struct {
	backend.Source
	backend.Mover
}

// TestIdenticalCopiesWithoutATailAreNotBack: three entries of one event
// (identical dead letters), moved one a batch from a DLQ with no Tail.
// The copies still waiting for their batch are in the plan: not back, no
// halt. An unplanned copy of the event and a copy that really comes back
// are, and halt the run.
func TestIdenticalCopiesWithoutATailAreNotBack(t *testing.T) {
	for _, tc := range []struct {
		name      string
		setup     func(q *fakeQueue, p *Plan)
		wantGate  string
		published int
	}{
		{"all planned", func(*fakeQueue, *Plan) {}, "", 3},
		{"one left out of the plan", func(q *fakeQueue, p *Plan) {
			p.Excluded = append(p.Excluded, Excluded{ID: q.dlq[3].ID, EventID: "E777", Why: "held back"})
		}, "", 3},
		{"a copy not in the plan", func(q *fakeQueue, _ *Plan) { q.add("E777") }, GateReDeadLettered, 1},
		{"dead-lettered again", func(q *fakeQueue, _ *Plan) { q.redead["E777"] = true }, GateReDeadLettered, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newFakeQueue(0, false)
			for range 3 {
				q.add("E777")
			}
			p := q.planFor(t, []int{1})
			if tc.name == "one left out of the plan" {
				q.add("E777")
			}
			tc.setup(q, p)
			if err := p.Seal(); err != nil {
				t.Fatal(err)
			}
			eng, rec := newEngine(t, q, filepath.Join(t.TempDir(), "j"))
			eng.Source, eng.Mover = untailed{q, q}, untailed{q, q}
			st, err := eng.Start("run1", p, "p", "fake", "t", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := eng.Run(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			if tc.wantGate == "" && st.Status != StatusCompleted {
				t.Fatalf("status %s, halted by %q after %d batches: copies of the event still in the DLQ before their move were taken for re-dead-letters", st.Status, st.HaltedBy, len(rec.batches))
			}
			if tc.wantGate != "" && (st.Status != StatusHalted || st.HaltedBy != tc.wantGate) {
				t.Fatalf("status %s halted by %q, want halted by %s", st.Status, st.HaltedBy, tc.wantGate)
			}
			if q.published["E777"] != tc.published {
				t.Errorf("E777 published %d times, want %d", q.published["E777"], tc.published)
			}
		})
	}
}
