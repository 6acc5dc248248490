package pulsardlq_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/pulsar"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/redrive"
)

// runMarkers are the markers a run named runID sends with: its producer
// name is dlqctl-RUNID, so every run's producer is new to the broker's
// deduplication, and a resume's is the run's own.
func runMarkers(runID string) backend.Markers {
	return backend.Markers{RunID: runID, ProducerName: "dlqctl-" + runID}
}

// TestDLQRecreatedInsideTheDeduplicationWindow: an event redriven, then
// dead-lettered again into a DLQ topic deleted and created anew, is
// redriven by a second run inside the origin's deduplication window. The
// broker deduplicates by producer name and sequence ID; the sequence ID is
// the entry's place in its plan (1 both times here), the producer name is
// the run's, and run IDs are a time and random bits: the second arrives.
// The same producer name would have been dropped, which shows that the
// window is open.
func TestDLQRecreatedInsideTheDeduplicationWindow(t *testing.T) {
	c := client(t)
	ns := freshNamespace(t, false)
	if err := pulsarServer(t).EnableDeduplication(testCtx(t), ns, true); err != nil {
		t.Fatal(err)
	}
	origin := freshTopic(t, ns)
	withConsumers(t, c, origin)
	waitDedup(t, origin, "Enabled")
	dlq := freshTopic(t, "")
	incarnation := func(markers backend.Markers) backend.MoveResult {
		t.Helper()
		deadLetters(t, c, dlq, origin, "E", 1)
		tp := open(t, dlq, pulsardlq.Options{})
		items := planItems(t, tp)
		res, err := tp.Publish(testCtx(t), items, markers)
		if err != nil || res[0].Err != nil {
			t.Fatalf("publish: %+v, %v", res, err)
		}
		if _, err := tp.Remove(testCtx(t), items); err != nil {
			t.Fatal(err)
		}
		_ = tp.Close()
		adminDo(t, http.MethodDelete, adminPath(dlq)+"?force=true", "")
		return res[0]
	}
	first := runMarkers(redrive.NewRunID(time.Now(), "0a1b2c3d"))
	incarnation(first)
	second := incarnation(runMarkers(redrive.NewRunID(time.Now(), "4e5f6a7b")))
	if second.DestID == "deduplicated" {
		t.Errorf("the second run's redrive was dropped as a duplicate of the first's")
	}
	if control := incarnation(first); control.DestID != "deduplicated" {
		t.Fatalf("the first run's identity again was not dropped (%s): the deduplication window is not open, so this test proves nothing", control.DestID)
	}
	if got := eventIDs(t, c, origin); !slices.Equal(got, []string{"E-1", "E-1"}) {
		t.Errorf("the origin holds %v, want the event from both runs", got)
	}
}

// TestThreeIdenticalDeadLettersMoveThreeTimes: byte-identical dead letters
// (one event dead-lettered three times by a retrying producer) are three
// entries, each moved once.
func TestThreeIdenticalDeadLettersMoveThreeTimes(t *testing.T) {
	c := client(t)
	dlq, origin := freshTopic(t, ""), freshTopic(t, "")
	msg := func() *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{Payload: []byte(`{"orderId":"o-1"}`), Key: "o-1",
			Properties: map[string]string{"REAL_TOPIC": origin, "event_id": "SAME"}}
	}
	produce(t, c, dlq, false, msg(), msg(), msg())
	tp := open(t, dlq, pulsardlq.Options{})
	items := planItems(t, tp)
	if len(items) != 3 || items[0].ID == items[1].ID || items[1].ID == items[2].ID {
		t.Fatalf("planned %+v, want three entries", items)
	}
	move(t, tp, items, runMarkers("identical"))
	if n, err := tp.Len(testCtx(t)); err != nil || n != 0 {
		t.Errorf("len = %d, %v; want 0", n, err)
	}
	if got := eventIDs(t, c, origin); !slices.Equal(got, []string{"SAME", "SAME", "SAME"}) {
		t.Errorf("the origin holds %v, want three copies", got)
	}
}

// brokerView is what the broker holds of a topic that a read must leave as
// it was: its entries, and each subscription's cursor, backlog and
// unacknowledged count.
func brokerView(t *testing.T, topic string) string {
	t.Helper()
	var in struct {
		EntriesAdded  int64  `json:"entriesAddedCounter"`
		LastConfirmed string `json:"lastConfirmedEntry"`
		Cursors       map[string]struct {
			MarkDelete string `json:"markDeletePosition"`
			Read       string `json:"readPosition"`
			Deleted    string `json:"individuallyDeletedMessages"`
			Consumed   int64  `json:"messagesConsumedCounter"`
		} `json:"cursors"`
	}
	adminJSON(t, adminPath(topic)+"/internalStats", &in)
	var st struct {
		Subscriptions map[string]struct {
			Backlog    int64             `json:"msgBacklog"`
			Unacked    int64             `json:"unackedMessages"`
			Properties map[string]string `json:"subscriptionProperties"`
		} `json:"subscriptions"`
	}
	adminJSON(t, adminPath(topic)+"/stats?getPreciseBacklog=true", &st)
	out, _ := json.Marshal([]any{in, st})
	return string(out)
}

// TestReadsChangeNothing: thirty read-only commands (each a process of its
// own: open, then a scan, a length, one entry, the stats, the tail or the
// came-back count) change nothing the broker holds: the DLQ's entries, its
// subscriptions' cursors, backlogs and properties, the removal record, and
// entries that came back stay unacknowledged; a consumer of the DLQ
// subscription then gets every entry in order, first delivery each.
func TestReadsChangeNothing(t *testing.T) {
	c := client(t)
	dlq, origin := freshTopic(t, ""), freshTopic(t, "")
	withConsumers(t, c, dlq)
	deadLetters(t, c, dlq, origin, "R", 5)
	tp := open(t, dlq, pulsardlq.Options{})
	items := planItems(t, tp)
	move(t, tp, items[:2], runMarkers("reads"))
	_ = tp.Close()
	// As after a broker crash that lost both acknowledgements: a read
	// must not acknowledge them again (only a run that holds the DLQ does).
	adminDo(t, http.MethodPost, adminPath(dlq)+"/subscription/"+pulsardlq.DefaultSubscription+"/resetcursor/0", "")
	record := dlq + "-dlqctl-removed"
	before := brokerView(t, dlq) + brokerView(t, record)
	reads := []func(*pulsardlq.Topic) error{
		func(tp *pulsardlq.Topic) error {
			return tp.Scan(testCtx(t), "", func(envelope.Envelope) error { return nil })
		},
		func(tp *pulsardlq.Topic) error { _, err := tp.Len(testCtx(t)); return err },
		func(tp *pulsardlq.Topic) error { _, err := tp.Get(testCtx(t), items[3].ID); return err },
		func(tp *pulsardlq.Topic) error { _, err := tp.Extras(testCtx(t), nil); return err },
		func(tp *pulsardlq.Topic) error { _, err := tp.Tail(testCtx(t)); return err },
		func(tp *pulsardlq.Topic) error {
			n, err := tp.CameBack(testCtx(t))
			if err == nil && n != 2 {
				err = fmt.Errorf("came back %d, want 2", n)
			}
			return err
		},
	}
	for i := range 30 {
		tp, err := pulsardlq.Open(testCtx(t), sourceURL(t, dlq), pulsardlq.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := reads[i%len(reads)](tp); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		_ = tp.Close()
	}
	if after := brokerView(t, dlq) + brokerView(t, record); after != before {
		t.Errorf("thirty reads changed what the broker holds:\nbefore %s\nafter  %s", before, after)
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: dlq, SubscriptionName: pulsardlq.DefaultSubscription, Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for k, it := range items {
		m, err := cons.Receive(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%d:%d:-1:-1", m.ID().LedgerID(), m.ID().EntryID()); got != it.ID || m.RedeliveryCount() != 0 {
			t.Errorf("delivery %d: %s with redelivery count %d, want %s first delivered", k, got, m.RedeliveryCount(), it.ID)
		}
	}
}
