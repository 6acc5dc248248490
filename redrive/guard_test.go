package redrive

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/envelope/envelopetest"
	"github.com/dlqctl/dlqctl/inspect"
)

// guardedQueue is the fake DLQ with a guard that refuses one destination,
// as a backend refuses the DLQ itself.
type guardedQueue struct {
	*fakeQueue
	refuse string
}

func (g guardedQueue) GuardDestination(_ context.Context, dest string) error {
	if dest == g.refuse {
		return fmt.Errorf("%q is this DLQ", dest)
	}
	return nil
}

func TestPlanLeavesOutARefusedDestination(t *testing.T) {
	q := newFakeQueue(6, true)
	for i := range q.dlq {
		q.dlq[i].LastError = "timeout"
		q.dlq[i].Key = ""
	}
	q.dlq[1].Origin.Topic = "orders-dlq"
	q.dlq[4].Origin.Topic = "orders-dlq"
	g := guardedQueue{q, "orders-dlq"}
	w := inspect.Walker{Source: g, Classifier: envelope.NewClassifier(envelope.DefaultRules()), Now: time.Now()}
	p, err := BuildPlan(context.Background(), w, g, PlanRequest{Kind: KindRedrive, Reason: "t"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if p.Entries.Len() != 4 {
		t.Errorf("%d entries planned, want the 4 bound for orders", p.Entries.Len())
	}
	for e := range p.Entries.All() {
		if e.Dest == "orders-dlq" {
			t.Errorf("%s planned to the refused destination", e.EventID)
		}
	}
	if len(p.Excluded) != 2 {
		t.Fatalf("excluded %+v, want E002 and E005", p.Excluded)
	}
	for _, x := range p.Excluded {
		if !strings.Contains(x.Why, `destination "orders-dlq" refused: "orders-dlq" is this DLQ`) {
			t.Errorf("%s left out because %q, want the guard's reason", x.EventID, x.Why)
		}
	}
}

func TestApplyFailsOnlyTheEntryWhoseDestinationIsRefused(t *testing.T) {
	for _, atomic := range []bool{true, false} {
		t.Run(fmt.Sprint("atomic=", atomic), func(t *testing.T) {
			q := newFakeQueue(8, atomic)
			g := guardedQueue{q, "orders-dlq"}
			p := &Plan{Schema: PlanSchema, Kind: KindRedrive, Reason: "test", PlannedBy: "t", Source: "fake",
				Params: Params{Ramp: []int{8}, Settle: Duration(time.Second)}}
			for i, e := range q.dlq {
				dest := "orders"
				if i == 2 {
					dest = "orders-dlq" // refused since the plan was made
				}
				p.Entries.Append(Entry{Seq: int64(i + 1), ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint, Dest: dest})
			}
			if err := p.Seal(); err != nil {
				t.Fatal(err)
			}
			eng, _ := newEngine(t, q, filepath.Join(t.TempDir(), "j"))
			eng.Source, eng.Mover, eng.Chunk = g, g, 4
			st, err := eng.Start("run1", p, "p", "fake", "t", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := eng.Run(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			moved, _, _, failed := st.Counts()
			if moved != 7 || failed != 1 {
				t.Errorf("moved %d, failed %d; want 7 and 1", moved, failed)
			}
			if s := st.Step(3); s != RecFailed {
				t.Errorf("entry 3: step %s, want %s", s, RecFailed)
			}
			if q.published["E003"] != 0 {
				t.Errorf("E003 was sent to the refused destination")
			}
			if len(q.dlq) != 1 || q.dlq[0].EventID != "E003" {
				t.Errorf("the DLQ holds %d entries, want E003 alone", len(q.dlq))
			}
		})
	}
}

var _ backend.DestinationGuard = guardedQueue{}

func TestPlanRefusesAnEventIDWithAControlCharacter(t *testing.T) {
	q := newFakeQueue(4, true)
	for i := range q.dlq {
		q.dlq[i].LastError = "timeout"
		q.dlq[i].Key = ""
	}
	q.dlq[1].EventID = "E002\nE003"
	q.dlq[2].EventID = "E003\x00"
	w := inspect.Walker{Source: q, Classifier: envelope.NewClassifier(envelope.DefaultRules()), Now: time.Now()}
	p, err := BuildPlan(context.Background(), w, q, PlanRequest{Kind: KindRedrive, Reason: "t"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if p.Entries.Len() != 2 || len(p.Excluded) != 2 {
		t.Fatalf("planned %d, left out %d; want 2 and 2", p.Entries.Len(), len(p.Excluded))
	}
	for _, x := range p.Excluded {
		if !strings.Contains(x.Why, "control character") {
			t.Errorf("%q left out because %q, want it to name the control character", x.EventID, x.Why)
		}
	}
}

// textQueue is the fake DLQ whose scan makes each entry afresh, its event
// ID and key slices of one large text, as a backend's decoder gives them
// (a Redis entry's fields are slices of the entry's text); its id is a
// string of its own, as backend.Source promises.
type textQueue struct {
	*fakeQueue
	n, size int
}

func (q textQueue) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	for i := range q.n {
		text := fmt.Sprintf("E%06d k%06d ", i, i) + strings.Repeat("x", q.size)
		e := envelope.Envelope{ID: fmt.Sprintf("%06d", i), EventID: text[:7], Key: text[8:15], Malformed: "no payload",
			Origin: envelope.Origin{Topic: "orders"}}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// TestPlanKeepsCopiesOfWhatItLeavesOut builds a plan that leaves every
// entry out (malformed, so quarantined), each holding its key back, and
// checks that the entries' text goes once the plan is made: what it keeps
// of each entry is its id and a copy of its event ID.
func TestPlanKeepsCopiesOfWhatItLeavesOut(t *testing.T) {
	const entries, size = 200, 64 << 10
	q := textQueue{newFakeQueue(0, true), entries, size}
	w := inspect.Walker{Source: q, Classifier: envelope.NewClassifier(envelope.DefaultRules()), Now: time.Now()}
	var err error
	p, grew := envelopetest.Retained(func() *Plan {
		p, e := BuildPlan(context.Background(), w, q, PlanRequest{Kind: KindRedrive, Reason: "t"}, time.Now())
		err = e
		return p
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Excluded) != entries || p.Excluded[0].EventID != "E000000" {
		t.Fatalf("%d left out (first %+v), want all %d", len(p.Excluded), p.Excluded[0], entries)
	}
	if grew > 1<<20 {
		t.Errorf("the plan of %d left-out entries keeps %d bytes on the heap; their %d-byte texts stayed with it", entries, grew, size)
	}
}
