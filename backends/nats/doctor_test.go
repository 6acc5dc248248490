package natsdlq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backends/nats/natstest"
)

// TestDoctorStalledConsumer: a consumer naks a message at its last
// delivery and stops pulling, so the server emits no MAX_DELIVERIES
// advisory; doctor fails naming the consumer, the waiting messages and
// what to do, and stats warns the same. Once the consumer pulls again the
// advisory arrives, the message is an entry, and doctor passes.
func TestDoctorStalledConsumer(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	ctx := context.Background()
	base := fmt.Sprintf("stall%d", time.Now().UnixNano())
	stream, subj := base+"_ORDERS", base+".orders"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subj}}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 2, AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	code, out := dlqctl(t, "dlq", "init", srv.URL()+"?stream="+stream+"&consumer=workers", "-o", "json")
	var doc struct{ Stream, Source string }
	if code != 0 || json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &doc) != nil {
		t.Fatalf("dlq init: exit %d\n%s", code, out)
	}
	for i := 1; i <= 3; i++ {
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subj, Header: nats.Header{nats.MsgIdHdr: {fmt.Sprintf("S%d", i)}}, Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	// S1 naked, S2 acked, S3 left to its ack wait; then S1 again, naked
	// at its last delivery. Fetch(1) ends its pull at the message, so no
	// pull request is left waiting to take the advisory's trigger.
	batch, err := cons.Fetch(3, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		switch m.Headers().Get(nats.MsgIdHdr) {
		case "S1":
			_ = m.Nak()
		case "S2":
			_ = m.DoubleAck(ctx)
		}
	}
	batch, err = cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if id := m.Headers().Get(nats.MsgIdHdr); id != "S1" {
			t.Fatalf("second delivery: %s, want S1", id)
		}
		if err := m.Nak(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // past the ack wait: S3 waits for redelivery
	adv, _ := js.Stream(ctx, doc.Stream)
	if n := msgs(t, adv); n != 0 {
		t.Fatalf("%d advisories before the consumer pulls again, want 0 (the server's behaviour changed)", n)
	}
	consumerCheck := func() (ok bool, detail, fix string) {
		t.Helper()
		_, out := dlqctl(t, "--source", doc.Source, "doctor", "-o", "json")
		var d struct {
			Checks []struct {
				Name, Detail, Fix string
				OK                bool
			}
		}
		// The report, then (a check failed) the error document.
		if err := json.NewDecoder(strings.NewReader(out[strings.Index(out, "{"):])).Decode(&d); err != nil {
			t.Fatalf("doctor: %v\n%s", err, out)
		}
		for _, c := range d.Checks {
			if c.Name == "consumer "+stream+"/workers" {
				return c.OK, c.Detail, c.Fix
			}
		}
		t.Fatalf("doctor has no consumer check\n%s", out)
		return
	}
	ok, detail, fix := consumerCheck()
	if ok || !strings.Contains(detail, "2 delivered messages wait for a pull") || !strings.Contains(detail, "among stream sequences 1, 2, 3") ||
		!strings.Contains(detail, "max deliveries (2)") || !strings.Contains(fix, "start the consumer") {
		t.Errorf("doctor on a stalled consumer: ok %v\n%s\n%s", ok, detail, fix)
	}
	if code, out := dlqctl(t, "--source", doc.Source, "stats", "-o", "json"); code != 0 || !strings.Contains(out, `"stalled"`) || !strings.Contains(out, "wait for a pull") {
		t.Errorf("stats on a stalled consumer: exit %d\n%s", code, out)
	}
	// The consumer pulls again: S1's advisory is emitted, S3 redelivered.
	batch, err = cons.Fetch(3, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		_ = m.DoubleAck(ctx)
	}
	waitUntil(t, "the MAX_DELIVERIES advisory", func() bool { return msgs(t, adv) == 1 })
	if ok, detail, _ := consumerCheck(); !ok {
		t.Errorf("doctor after the consumer pulled: %s", detail)
	}
	if code, out := dlqctl(t, "--source", doc.Source, "list", "-o", "json"); code != 0 || !strings.Contains(out, `"S1"`) {
		t.Errorf("list: exit %d\n%s", code, out)
	}
}
