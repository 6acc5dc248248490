package pulsardlq_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/pulsar"
	"github.com/dlqctl/dlqctl/envelope"
)

// planItems is what a plan records for each pending message.
func planItems(t *testing.T, tp *pulsardlq.Topic) []backend.MoveItem {
	t.Helper()
	var items []backend.MoveItem
	for i, e := range scanAll(t, tp, "") {
		items = append(items, backend.MoveItem{
			Seq: int64(i + 1), ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint,
			Dest: tp.DefaultDest(e.Origin.Topic),
		})
	}
	return items
}

// consumeAll receives n messages from topic on a new subscription that
// starts at the earliest message, and then checks there is no more.
func consumeAll(t *testing.T, c pulsar.Client, topic string, n int) []pulsar.Message {
	t.Helper()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: fmt.Sprint("check-", time.Now().UnixNano()),
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var out []pulsar.Message
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("received %d of %d from %s: %v", len(out), n, topic, err)
		}
		out = append(out, m)
		_ = cons.Ack(m)
	}
	if got := readAll(t, c, topic); len(got) != n {
		t.Fatalf("%s holds %d messages, want %d", topic, len(got), n)
	}
	return out
}

func TestRedriveMovesMessagesBackToTheirRealTopic(t *testing.T) {
	dlq := freshTopic(t, "")
	origin := freshTopic(t, "")
	tp := open(t, dlq, pulsardlq.Options{})
	ctx := testCtx(t)
	c := client(t)
	eventTime := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	p1 := []byte(`{"orderId":"order-1"}`)
	produce(t, c, dlq, false,
		&pulsar.ProducerMessage{
			Payload: p1, Key: "order-1", OrderingKey: "customer-1", EventTime: eventTime,
			Properties: map[string]string{
				"REAL_TOPIC": origin + "-partition-0", "ORIGIN_MESSAGE_ID": "5:6:0", "RECONSUMETIMES": "4",
				"DELAY_TIME": "1000", "event_id": "E1", "fingerprint": envelope.ComputeFingerprint(p1),
				"last_error": "timeout", "tenant": "acme",
			},
		},
		&pulsar.ProducerMessage{
			Payload: []byte("two"), Key: "order-2",
			Properties: map[string]string{"REAL_TOPIC": origin, "event_id": "E2", "redrive_count": "1", "dlqctl_run_id": "older-run"},
		})
	items := planItems(t, tp)
	if len(items) != 2 || items[0].Dest != origin || items[1].Dest != origin {
		t.Fatalf("plan items = %+v", items)
	}
	m := backend.Markers{RunID: "run-1", ProducerName: "dlqctl-run-1"}
	if tp.Atomic() {
		t.Fatal("a Pulsar move is two steps")
	}
	res, err := tp.Publish(ctx, items, m)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.DestID == "" || r.Removed {
			t.Fatalf("publish %s = %+v", items[i].ID, r)
		}
	}
	firstDest := res[0].DestID
	// Publish alone leaves the DLQ as it was.
	if n, err := tp.Len(ctx); err != nil || n != 2 {
		t.Fatalf("len after publish = %d, %v", n, err)
	}
	res, err = tp.Remove(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || !r.Removed {
			t.Fatalf("remove %s = %+v", items[i].ID, r)
		}
	}
	if n, err := tp.Len(ctx); err != nil || n != 0 {
		t.Fatalf("len after remove = %d, %v", n, err)
	}
	if left := scanAll(t, tp, ""); len(left) != 0 {
		t.Fatalf("left in the DLQ: %v", ids(left))
	}
	res, err = tp.Remove(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !errors.Is(r.Err, backend.ErrNotFound) {
			t.Errorf("second remove of %s = %+v, want ErrNotFound", items[i].ID, r)
		}
	}

	got := consumeAll(t, c, origin, 2)
	first, second := got[0], got[1]
	if string(first.Payload()) != string(p1) || first.Key() != "order-1" || first.OrderingKey() != "customer-1" || !first.EventTime().Equal(eventTime) {
		t.Errorf("first: payload %q key %q ordering key %q event time %v", first.Payload(), first.Key(), first.OrderingKey(), first.EventTime())
	}
	want := map[string]string{
		"event_id": "E1", "fingerprint": envelope.ComputeFingerprint(p1), "last_error": "timeout", "tenant": "acme",
		"redrive_count": "1", "dlqctl_run_id": "run-1", "dlqctl_seq": "1", "dlqctl_redriven_from": items[0].ID,
	}
	if fmt.Sprint(first.Properties()) != fmt.Sprint(want) {
		t.Errorf("first properties = %v\nwant %v", first.Properties(), want)
	}
	if p := second.Properties(); string(second.Payload()) != "two" || second.Key() != "order-2" || p["redrive_count"] != "2" ||
		p["dlqctl_run_id"] != "run-1" || p["dlqctl_seq"] != "2" || p["event_id"] != "E2" || p["REAL_TOPIC"] != "" {
		t.Errorf("second: %q %q %v", second.Payload(), second.Key(), p)
	}
	if first.ProducerName() != "dlqctl-run-1" {
		t.Errorf("producer name %q", first.ProducerName())
	}
	if want := fmt.Sprintf("%d:%d:-1:-1", first.ID().LedgerID(), first.ID().EntryID()); firstDest != want {
		t.Errorf("dest id = %q, want %q", firstDest, want)
	}
}

func TestPublishRefusesWhatChangedOrLeft(t *testing.T) {
	dlq := freshTopic(t, "")
	origin := freshTopic(t, "")
	tp := open(t, dlq, pulsardlq.Options{})
	ctx := testCtx(t)
	c := client(t)
	produce(t, c, dlq, false,
		&pulsar.ProducerMessage{Payload: []byte("a"), Properties: map[string]string{"REAL_TOPIC": origin, "event_id": "E1"}},
		&pulsar.ProducerMessage{Payload: []byte("b"), Properties: map[string]string{"event_id": "E2"}})
	items := planItems(t, tp)
	items[0].Fingerprint = "sha256:0000"
	gone := backend.MoveItem{Seq: 3, ID: "99999:1:-1:-1", Fingerprint: "x", Dest: origin}
	res, err := tp.Publish(ctx, append(items, gone), backend.Markers{RunID: "r", ProducerName: "dlqctl-r"})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, backend.ErrChanged) || res[0].DestID != "" {
		t.Errorf("changed fingerprint: %+v", res[0])
	}
	if res[1].Err == nil || !strings.Contains(res[1].Err.Error(), "no destination") {
		t.Errorf("no REAL_TOPIC and no --to: %+v", res[1])
	}
	if !errors.Is(res[2].Err, backend.ErrNotFound) {
		t.Errorf("gone: %+v", res[2])
	}
	if got := readAll(t, c, origin); len(got) != 0 {
		t.Errorf("something was sent: %d messages", len(got))
	}
	if n, err := tp.Len(ctx); err != nil || n != 2 {
		t.Errorf("len = %d, %v", n, err)
	}
}

func TestDefaultDest(t *testing.T) {
	tp := open(t, freshTopic(t, ""), pulsardlq.Options{})
	for in, want := range map[string]string{
		"persistent://public/default/orders-partition-3":  "persistent://public/default/orders",
		"persistent://public/default/orders":              "persistent://public/default/orders",
		"persistent://public/default/a-partition-x":       "persistent://public/default/a-partition-x",
		"persistent://public/default/a-partition-1-retry": "persistent://public/default/a-partition-1-retry",
		"": "",
	} {
		if got := tp.DefaultDest(in); got != want {
			t.Errorf("DefaultDest(%q) = %q, want %q", in, got, want)
		}
	}
}

// waitDedup waits until the broker applies the namespace's deduplication
// setting to topic.
func waitDedup(t *testing.T, topic string, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := pulsarServer(t).Admin(testCtx(t), http.MethodGet, adminPath(topic)+"/stats", nil)
		if err == nil && strings.Contains(string(out), `"deduplicationStatus":"`+want+`"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("deduplication of %s never became %s: %s %v", topic, want, out, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestResendWithTheSameIdentity publishes the same item twice, from two
// processes' worth of clients with the run's producer name and sequence
// id, as a resume does after an unknown outcome.
func TestResendWithTheSameIdentity(t *testing.T) {
	broker := pulsarServer(t)
	ns := fmt.Sprintf("public/dedup-%d", time.Now().UnixNano()%1e9)
	adminDo(t, http.MethodPut, "/admin/v2/namespaces/"+ns, "")
	if err := broker.EnableDeduplication(testCtx(t), ns, true); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, ns  string
		dedup     string
		delivered int
	}{
		{"dedup-on", ns, "Enabled", 1},
		{"dedup-off", "public/default", "Disabled", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dlq := freshTopic(t, "")
			origin := freshTopic(t, tc.ns)
			adminDo(t, http.MethodPut, adminPath(origin), "")
			waitDedup(t, origin, tc.dedup)
			c := client(t)
			ctx := testCtx(t)
			produce(t, c, dlq, false, &pulsar.ProducerMessage{Payload: []byte("once"), Properties: map[string]string{"REAL_TOPIC": origin, "event_id": "E1"}})
			m := backend.Markers{RunID: "r1", ProducerName: "dlqctl-r1-" + tc.name}

			first, err := pulsardlq.Open(ctx, sourceURL(t, dlq), pulsardlq.Options{})
			if err != nil {
				t.Fatal(err)
			}
			items := planItems(t, first)
			items[0].Seq = 7
			res, err := first.Publish(ctx, items, m)
			if err != nil || res[0].Err != nil {
				t.Fatalf("first publish: %+v %v", res, err)
			}
			_ = first.Close() // the crash before the journal caught up

			second := open(t, dlq, pulsardlq.Options{})
			res2, err := second.Publish(ctx, items, m)
			if err != nil || res2[0].Err != nil {
				t.Fatalf("resend: %+v %v", res2, err)
			}
			if tc.delivered == 1 && res2[0].DestID != "deduplicated" {
				t.Errorf("resend dest id = %q, want deduplicated", res2[0].DestID)
			}
			if tc.delivered == 2 && (res2[0].DestID == res[0].DestID || res2[0].DestID == "deduplicated") {
				t.Errorf("dest ids %q then %q", res[0].DestID, res2[0].DestID)
			}
			got := consumeAll(t, c, origin, tc.delivered)
			for _, msg := range got {
				if msg.Properties()["dlqctl_seq"] != "7" || msg.Properties()["event_id"] != "E1" {
					t.Errorf("delivered %v", msg.Properties())
				}
			}
			if res, err := second.Remove(ctx, items); err != nil || res[0].Err != nil {
				t.Fatalf("remove: %+v %v", res, err)
			}
		})
	}
}
