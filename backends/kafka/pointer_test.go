package kafkadlq_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	kafkadlq "github.com/dlqctl/dlqctl/backends/kafka"
	"github.com/dlqctl/dlqctl/envelope"
)

// shareDeadLetter is a dead letter as a share group writes it by default
// (KIP-1191): headers naming the record, no key, no value.
func shareDeadLetter(dlt, origin string, offset int64, group string) *kgo.Record {
	return &kgo.Record{Topic: dlt, Partition: 0, Headers: []kgo.RecordHeader{
		{Key: kafkadlq.ShareTopic, Value: []byte(origin)},
		{Key: kafkadlq.SharePartition, Value: []byte("0")},
		{Key: kafkadlq.ShareOffset, Value: []byte(strconv.FormatInt(offset, 10))},
		{Key: kafkadlq.ShareGroup, Value: []byte(group)},
		{Key: kafkadlq.ShareDeliveryCount, Value: []byte("5")},
		{Key: kafkadlq.ShareMessage, Value: []byte("gave up")},
	}}
}

// TestShareGroupDeadLetters: a share group's headers-only dead letter is
// the record it names, read from its topic; one whose record is not there
// is malformed and says which. Entries that name one record are one move,
// whether they are in one chunk or the record was moved by an earlier run
// (another process: only the state topic remembers).
func TestShareGroupDeadLetters(t *testing.T) {
	ctx := ctxFor(t)
	origin := freshTopic(t, "")
	dlt := origin + ".DLQ"
	createTopic(t, ctx, origin, 1, nil)
	createTopic(t, ctx, dlt, 1, nil)
	var originals []*kgo.Record
	for i := 1; i <= 2; i++ {
		originals = append(originals, &kgo.Record{Topic: origin, Partition: 0, Key: []byte("k" + strconv.Itoa(i)),
			Value: []byte(`{"n":` + strconv.Itoa(i) + `}`), Headers: []kgo.RecordHeader{{Key: "event_id", Value: []byte("E" + strconv.Itoa(i))}}})
	}
	produceManual(t, ctx, originals...)
	produceManual(t, ctx,
		shareDeadLetter(dlt, origin, 0, "billing"), shareDeadLetter(dlt, origin, 0, "shipping"),
		shareDeadLetter(dlt, origin, 1, "billing"), shareDeadLetter(dlt, origin, 1, "shipping"),
		shareDeadLetter(dlt, origin, 7, "billing"))
	src := openTopic(t, ctx, dlt, kafkadlq.Options{TransactionTimeout: 10 * time.Second})
	entries := scanAll(t, ctx, src, "")
	if len(entries) != 5 {
		t.Fatalf("%d entries, want 5", len(entries))
	}
	byEvent := map[string][]envelope.Envelope{}
	for _, e := range entries[:4] {
		if e.Malformed != "" || e.Key == "" || e.Origin.Topic != origin {
			t.Fatalf("entry %s: %+v", e.ID, e)
		}
		byEvent[e.EventID] = append(byEvent[e.EventID], e)
	}
	if len(byEvent["E1"]) != 2 || len(byEvent["E2"]) != 2 || string(byEvent["E1"][0].Payload) != `{"n":1}` {
		t.Fatalf("entries by event: %v", byEvent)
	}
	if !strings.Contains(entries[4].Malformed, "record 0:7") {
		t.Fatalf("a dead letter of a record that is not there: malformed %q", entries[4].Malformed)
	}

	// One chunk with both entries of E2: one record goes back.
	res, err := src.Publish(ctx, itemsOf(byEvent["E2"], origin), backend.Markers{RunID: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || !errors.Is(res[1].Err, backend.ErrSameMessage) {
		t.Fatalf("one chunk: results %+v", res)
	}
	// E1's first entry, then its second from another process.
	if res, err = src.Publish(ctx, itemsOf(byEvent["E1"][:1], origin), backend.Markers{RunID: "run-1"}); err != nil || res[0].Err != nil {
		t.Fatalf("E1's first entry: %+v %v", res, err)
	}
	src.Close()
	again := openTopic(t, ctx, dlt, kafkadlq.Options{TransactionTimeout: 10 * time.Second})
	if res, err = again.Publish(ctx, itemsOf(byEvent["E1"][1:], origin), backend.Markers{RunID: "run-2"}); err != nil || !errors.Is(res[0].Err, backend.ErrSameMessage) {
		t.Fatalf("E1's second entry, in another run: %+v %v", res, err)
	}
	sent := map[string]int{}
	for _, r := range readCommitted(t, ctx, origin)[2:] {
		v, _ := header(r, "event_id")
		sent[v]++
		for _, h := range r.Headers {
			if kafkadlq.DeadLetterHeader(h.Key) {
				t.Errorf("dead-letter header %s went to the origin", h.Key)
			}
		}
	}
	if sent["E1"] != 1 || sent["E2"] != 1 || len(sent) != 2 {
		t.Fatalf("records put back, by event: %v; want E1 and E2 once each", sent)
	}
	left := scanAll(t, ctx, again, "")
	if len(left) != 1 || left[0].ID != entries[4].ID {
		t.Fatalf("left in the DLQ: %s; want only %s", ids(left), entries[4].ID)
	}
	if _, err := again.Get(ctx, byEvent["E1"][1].ID); err == nil || !strings.Contains(err.Error(), "entry "+byEvent["E1"][0].ID) {
		t.Fatalf("Get of the second pointer: %v; want it gone, naming the entry that moved its record", err)
	}
}
