package pulsardlq_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/pulsar"
	"github.com/dlqctl/dlqctl/envelope"
)

// locator is how dlqctl writes a message id read from a non-partitioned
// topic (partition -1) outside a batch (batch -1).
func locator(id pulsar.MessageID, partition int) string {
	return fmt.Sprintf("%d:%d:%d:-1", id.LedgerID(), id.EntryID(), partition)
}

func scanAll(t *testing.T, tp *pulsardlq.Topic, after string) []envelope.Envelope {
	t.Helper()
	var out []envelope.Envelope
	if err := tp.Scan(testCtx(t), after, func(e envelope.Envelope) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("scan after %q: %v", after, err)
	}
	return out
}

func ids(envs []envelope.Envelope) []string {
	out := make([]string, len(envs))
	for i, e := range envs {
		out[i] = e.ID
	}
	return out
}

// ackOnSubscription acknowledges ids on the dlqctl subscription the way a
// consumer of the DLQ would.
func ackOnSubscription(t *testing.T, c pulsar.Client, topic string, ids ...pulsar.MessageID) {
	t.Helper()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: pulsardlq.DefaultSubscription, Type: pulsar.Shared,
		EnableZeroQueueConsumer: true, AckWithResponse: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for _, id := range ids {
		if err := cons.AckID(id); err != nil {
			t.Fatal(err)
		}
	}
}

func TestScanGetLenOfADLQ(t *testing.T) {
	topic := freshTopic(t, "")
	tp := open(t, topic, pulsardlq.Options{})
	ctx := testCtx(t)
	c := client(t)
	eventTime := time.Date(2026, 11, 29, 9, 30, 0, 123e6, time.UTC)
	payload := []byte(`{"orderId":"order-1","amount":1200}`)
	msgs := []*pulsar.ProducerMessage{
		{
			Payload: payload, Key: "order-1", OrderingKey: "customer-7", EventTime: eventTime,
			Properties: map[string]string{
				"REAL_TOPIC": "persistent://public/default/orders", "ORIGIN_MESSAGE_ID": "17:3:-1",
				"RECONSUMETIMES": "3", "event_id": "E1", "fingerprint": envelope.ComputeFingerprint(payload),
				"last_error": "timeout calling payments: context deadline exceeded", "tenant": "acme",
			},
		},
		{
			Payload: []byte("plain text"), Key: "order-2",
			Properties: map[string]string{"REAL_TOPIC": "persistent://public/default/orders-partition-1", "eventId": "E2", "last_error": "nil pointer dereference"},
		},
		{Payload: []byte{0xff, 0x00}, Properties: map[string]string{"last_error": "no id"}},
	}
	sent := produce(t, c, topic, false, msgs...)

	got := scanAll(t, tp, "")
	want := []string{locator(sent[0], -1), locator(sent[1], -1), locator(sent[2], -1)}
	if strings.Join(ids(got), " ") != strings.Join(want, " ") {
		t.Fatalf("scan ids = %v, want %v", ids(got), want)
	}
	e := got[0]
	if e.EventID != "E1" || e.Origin.Backend != "pulsar" || e.Origin.Topic != "persistent://public/default/orders" ||
		e.Attempts != 3 || e.Key != "order-1" || e.LastError != msgs[0].Properties["last_error"] ||
		e.Fingerprint != envelope.ComputeFingerprint(payload) || e.FingerprintComputed || e.Malformed != "" {
		t.Errorf("first envelope = %+v", e)
	}
	if e.Properties[pulsardlq.PropOrderingKey] != "customer-7" || e.Properties[pulsardlq.PropEventTime] != "2026-11-29T09:30:00.123Z" ||
		e.Properties["ORIGIN_MESSAGE_ID"] != "17:3:-1" || e.Properties["tenant"] != "acme" {
		t.Errorf("first envelope properties = %v", e.Properties)
	}
	if e.DeadLetteredAt.IsZero() || time.Since(e.DeadLetteredAt) > time.Minute {
		t.Errorf("dead_lettered_at = %v, want the publish time", e.DeadLetteredAt)
	}
	if e := got[1]; e.EventID != "E2" || e.Attempts != 0 || !e.FingerprintComputed || e.PayloadEncoding != envelope.EncodingUTF8 ||
		e.Origin.Topic != "persistent://public/default/orders-partition-1" {
		t.Errorf("second envelope = %+v", e)
	}
	if e := got[2]; e.Malformed == "" || e.PayloadEncoding != envelope.EncodingBase64 {
		t.Errorf("third envelope should be malformed (no event id): %+v", e)
	}

	// Get: a hit reads the same envelope; misses are ErrNotFound.
	g, err := tp.Get(ctx, want[1])
	if err != nil || g.EventID != "E2" || g.ID != want[1] {
		t.Fatalf("get %s = %+v, %v", want[1], g, err)
	}
	for _, id := range []string{"999999:0:-1:-1", "not-an-id", fmt.Sprintf("%d:%d:3:-1", sent[0].LedgerID(), sent[0].EntryID()),
		fmt.Sprintf("%d:%d:-1:-1", sent[2].LedgerID(), sent[2].EntryID()+1), fmt.Sprintf("%d:%d:-1:2", sent[0].LedgerID(), sent[0].EntryID())} {
		if _, err := tp.Get(ctx, id); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("get %s: err = %v, want ErrNotFound", id, err)
		}
	}
	if n, err := tp.Len(ctx); err != nil || n != 3 {
		t.Fatalf("len = %d, %v, want 3", n, err)
	}
	if tail, err := tp.Tail(ctx); err != nil || tail != want[2] {
		t.Fatalf("tail = %q, %v, want %s", tail, err, want[2])
	}

	// after: skips up to and including that id; ErrStop ends quietly.
	if got := ids(scanAll(t, tp, want[0])); strings.Join(got, " ") != want[1]+" "+want[2] {
		t.Errorf("scan after %s = %v", want[0], got)
	}
	if got := scanAll(t, tp, want[2]); len(got) != 0 {
		t.Errorf("scan after the tail = %v", ids(got))
	}
	n := 0
	if err := tp.Scan(ctx, "", func(envelope.Envelope) error { n++; return backend.ErrStop }); err != nil || n != 1 {
		t.Errorf("scan stopped: n=%d err=%v", n, err)
	}
	var ce *backend.ConfigError
	if err := tp.Scan(ctx, "later", func(envelope.Envelope) error { return nil }); !errors.As(err, &ce) {
		t.Errorf("scan after a bad cursor: %v, want a ConfigError", err)
	}

	// A message acknowledged on the subscription has left the DLQ.
	ackOnSubscription(t, c, topic, sent[1])
	if got := ids(scanAll(t, tp, "")); strings.Join(got, " ") != want[0]+" "+want[2] {
		t.Errorf("scan after ack = %v", got)
	}
	if _, err := tp.Get(ctx, want[1]); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("get of an acked message: %v, want ErrNotFound", err)
	}
	if n, err := tp.Len(ctx); err != nil || n != 2 {
		t.Errorf("len after ack = %d, %v, want 2", n, err)
	}
	// The mark-delete position moves past the first: still skipped.
	ackOnSubscription(t, c, topic, sent[0])
	if got := ids(scanAll(t, tp, "")); strings.Join(got, " ") != want[2] {
		t.Errorf("scan after acking the first two = %v", got)
	}

	ex, err := tp.Extras(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if x := ex.JSON.(pulsardlq.PulsarExtras); x.Backlog != 1 || x.Subscription != "dlqctl" || x.Topic != topic {
		t.Errorf("extras = %+v", x)
	}
	if len(ex.Rows) == 0 || ex.Title == "" {
		t.Errorf("extras rows = %v", ex.Rows)
	}
	// Reading consumed nothing.
	if n, err := tp.Len(ctx); err != nil || n != 1 {
		t.Errorf("len at the end = %d, %v, want 1", n, err)
	}
}

func TestMessagesBeforeTheSubscriptionAreInTheDLQ(t *testing.T) {
	// Dead letters written before dlqctl first looked are still there:
	// the subscription starts at the earliest message.
	topic := freshTopic(t, "")
	c := client(t)
	produce(t, c, topic, false, &pulsar.ProducerMessage{Payload: []byte("x"), Properties: map[string]string{"event_id": "E1"}})
	tp := open(t, topic, pulsardlq.Options{})
	if got := scanAll(t, tp, ""); len(got) != 1 || got[0].EventID != "E1" {
		t.Fatalf("scan = %+v", got)
	}
}

func TestPartitionedDLQ(t *testing.T) {
	topic := freshTopic(t, "")
	createPartitioned(t, topic, 2)
	tp := open(t, topic, pulsardlq.Options{})
	ctx := testCtx(t)
	c := client(t)
	var msgs []*pulsar.ProducerMessage
	for i := range 8 {
		msgs = append(msgs, &pulsar.ProducerMessage{
			Payload: []byte(fmt.Sprint(i)), Key: fmt.Sprintf("key-%d", i),
			Properties: map[string]string{"event_id": fmt.Sprint("E", i)},
		})
	}
	sent := produce(t, c, topic, false, msgs...)
	perPart := map[int32]int{}
	for _, id := range sent {
		perPart[id.PartitionIdx()]++
	}
	if len(perPart) != 2 {
		t.Fatalf("the keys all went to one partition: %v", perPart)
	}

	got := scanAll(t, tp, "")
	if len(got) != len(msgs) {
		t.Fatalf("scan found %d, want %d: %v", len(got), len(msgs), ids(got))
	}
	// Partition order: every id of partition 0 before any of partition 1,
	// and within a partition in the order sent.
	var lastOf0 string
	for i, e := range got {
		want := 0
		if i >= perPart[0] {
			want = 1
		}
		if !strings.Contains(e.ID, fmt.Sprintf(":%d:-1", want)) {
			t.Errorf("entry %d: id %s, want partition %d", i, e.ID, want)
		}
		if want == 0 {
			lastOf0 = e.ID
		}
		g, err := tp.Get(ctx, e.ID)
		if err != nil || g.EventID != e.EventID {
			t.Errorf("get %s = %s, %v", e.ID, g.EventID, err)
		}
	}
	if got := scanAll(t, tp, lastOf0); len(got) != perPart[1] {
		t.Errorf("scan after the last of partition 0 = %v, want the %d of partition 1", ids(got), perPart[1])
	}
	if n, err := tp.Len(ctx); err != nil || n != int64(len(msgs)) {
		t.Errorf("len = %d, %v", n, err)
	}
	if tail, err := tp.Tail(ctx); err != nil || tail != "" {
		t.Errorf("tail of a partitioned topic = %q, %v, want \"\" (whole rescan)", tail, err)
	}

	// Remove acknowledges on the right partition.
	res, err := tp.Remove(ctx, []backend.MoveItem{{Seq: 1, ID: got[len(got)-1].ID}, {Seq: 2, ID: got[0].ID}})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("remove = %+v, %v", res, err)
	}
	if after := scanAll(t, tp, ""); len(after) != len(msgs)-2 {
		t.Errorf("scan after remove = %v", ids(after))
	}
	if n, err := tp.Len(ctx); err != nil || n != int64(len(msgs)-2) {
		t.Errorf("len after remove = %d, %v", n, err)
	}
}

func TestBatchedMessagesMoveOnlyTogether(t *testing.T) {
	topic := freshTopic(t, "")
	tp := open(t, topic, pulsardlq.Options{})
	ctx := testCtx(t)
	c := client(t)
	var msgs []*pulsar.ProducerMessage
	for i := range 3 {
		msgs = append(msgs, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i)), Properties: map[string]string{"event_id": fmt.Sprint("B", i)}})
	}
	sent := produce(t, c, topic, true, msgs...)
	if sent[0].BatchSize() != 3 || sent[0].EntryID() != sent[2].EntryID() {
		t.Fatalf("the producer did not batch: %v", sent)
	}
	produce(t, c, topic, false, &pulsar.ProducerMessage{Payload: []byte("s"), Properties: map[string]string{"event_id": "S"}})

	got := scanAll(t, tp, "")
	if len(got) != 4 {
		t.Fatalf("scan = %v", ids(got))
	}
	for i := range 3 {
		want := fmt.Sprintf("%d:%d:-1:%d", sent[0].LedgerID(), sent[0].EntryID(), i)
		if got[i].ID != want || got[i].EventID != fmt.Sprint("B", i) {
			t.Errorf("batch message %d: %s %s, want %s", i, got[i].ID, got[i].EventID, want)
		}
		if g, err := tp.Get(ctx, want); err != nil || g.EventID != got[i].EventID {
			t.Errorf("get %s = %v, %v", want, g.EventID, err)
		}
	}
	// Scanning on from the middle of the batch gives the rest of it.
	if rest := scanAll(t, tp, got[0].ID); len(rest) != 3 || rest[0].ID != got[1].ID {
		t.Errorf("scan after %s = %v", got[0].ID, ids(rest))
	}
	// Pulsar's backlog counts entries.
	if n, err := tp.Len(ctx); err != nil || n != 2 {
		t.Errorf("len = %d, %v, want 2 entries", n, err)
	}

	res, err := tp.Remove(ctx, []backend.MoveItem{{Seq: 1, ID: got[1].ID}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || errors.Is(res[0].Err, backend.ErrNotFound) || !strings.Contains(res[0].Err.Error(), "batch of 3") {
		t.Fatalf("remove of one message of a batch: %+v", res[0])
	}
	if n := len(scanAll(t, tp, "")); n != 4 {
		t.Fatalf("a refused remove removed something: %d left", n)
	}
	items := []backend.MoveItem{{Seq: 1, ID: got[0].ID}, {Seq: 2, ID: got[1].ID}, {Seq: 3, ID: got[2].ID}}
	res, err = tp.Remove(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || !r.Removed {
			t.Errorf("remove %s: %+v", items[i].ID, r)
		}
	}
	if left := scanAll(t, tp, ""); len(left) != 1 || left[0].EventID != "S" {
		t.Errorf("left after removing the batch: %v", ids(left))
	}
}

func TestScanAcrossLedgers(t *testing.T) {
	// Unloading a topic closes its ledger; the next load opens a new one,
	// so the DLQ's messages and its cursor span several ledgers.
	topic := freshTopic(t, "")
	tp := open(t, topic, pulsardlq.Options{})
	ctx := testCtx(t)
	c := client(t)
	msg := func(id string) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{Payload: []byte(id), Properties: map[string]string{"event_id": id}}
	}
	unload := func() { adminDo(t, "PUT", adminPath(topic)+"/unload", "") }
	sent := produce(t, c, topic, false, msg("E1"), msg("E2"))
	unload()
	sent = append(sent, produce(t, c, topic, false, msg("E3"), msg("E4"))...)
	unload()
	if sent[0].LedgerID() == sent[2].LedgerID() {
		t.Fatalf("no new ledger after unload: %v", sent)
	}
	if got := scanAll(t, tp, ""); len(got) != 4 {
		t.Fatalf("scan = %v", ids(got))
	}
	ackOnSubscription(t, c, topic, sent[0], sent[1], sent[3])
	got := scanAll(t, tp, "")
	if len(got) != 1 || got[0].EventID != "E3" || got[0].ID != locator(sent[2], -1) {
		t.Fatalf("scan after acks = %v", ids(got))
	}
	if g, err := tp.Get(ctx, locator(sent[2], -1)); err != nil || g.EventID != "E3" {
		t.Errorf("get = %v, %v", g.EventID, err)
	}
	if _, err := tp.Get(ctx, locator(sent[0], -1)); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("get of an acked message in an older ledger: %v", err)
	}
	if tail, err := tp.Tail(ctx); err != nil || tail != locator(sent[3], -1) {
		t.Errorf("tail = %q, %v, want %s", tail, err, locator(sent[3], -1))
	}
	if n, err := tp.Len(ctx); err != nil || n != 1 {
		t.Errorf("len = %d, %v", n, err)
	}
	// Scanning on from the tail finds what arrives later.
	tail, _ := tp.Tail(ctx)
	produce(t, c, topic, false, msg("E5"))
	if got := scanAll(t, tp, tail); len(got) != 1 || got[0].EventID != "E5" {
		t.Errorf("scan after the tail = %v", ids(got))
	}
}

func TestEventIDFromTheKey(t *testing.T) {
	topic := freshTopic(t, "")
	produce(t, client(t), topic, false, &pulsar.ProducerMessage{Payload: []byte(`{"id":"J1"}`), Key: "K1"})
	for _, tc := range []struct {
		from envelope.EventIDSource
		want string
	}{
		{envelope.EventIDSource{Kind: "key"}, "K1"},
		{envelope.EventIDSource{Kind: "json", Name: "id"}, "J1"},
	} {
		tp := open(t, topic, pulsardlq.Options{EventIDFrom: tc.from})
		if got := scanAll(t, tp, ""); len(got) != 1 || got[0].EventID != tc.want || got[0].Malformed != "" {
			t.Errorf("%+v: %+v", tc.from, got)
		}
	}
}
