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

	natsdlq "github.com/dlqctl/dlqctl/backends/nats"
	"github.com/dlqctl/dlqctl/backends/nats/natstest"
	"github.com/dlqctl/dlqctl/envelope"
)

// TestAdvisoryShape: dlq init makes a stream of a consumer's dead-letter
// advisories; a consumer that naks a message to its MaxDeliver and terms
// another (with a reason) makes two entries, resolved to the messages by
// stream_seq; a redrive publishes them back with their event IDs and
// removes advisory and original; an advisory whose message is gone is
// malformed, with the reason.
func TestAdvisoryShape(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir()) // the one-step redrive writes its plan and journal here
	_, js := srv.JetStream(t)
	ctx := context.Background()
	base := fmt.Sprintf("adv%d", time.Now().UnixNano())
	stream, subj := base+"_ORDERS", base+".orders"
	ost, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subj}})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 2, AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	initURL := srv.URL() + "?stream=" + stream + "&consumer=workers"
	code, out := dlqctl(t, "dlq", "init", initURL, "--dry-run", "-o", "json")
	var doc struct {
		Schema, Backend, Stream, Source string
		Subjects                        []string
		Created                         bool
		DryRun                          bool `json:"dry_run"`
	}
	if code != 0 || json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &doc) != nil || !doc.Created || !doc.DryRun || doc.Schema != "dlqctl.dlqinit/v1" || doc.Backend != "nats" {
		t.Fatalf("dlq init --dry-run: exit %d %+v\n%s", code, doc, out)
	}
	if _, err := js.Stream(ctx, doc.Stream); err == nil {
		t.Fatal("a dry run created the stream")
	}
	for i, want := range []bool{true, false} {
		code, out = dlqctl(t, "dlq", "init", initURL, "-o", "json")
		doc.Created = !want
		if code != 0 || json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &doc) != nil || doc.Created != want || len(doc.Subjects) != 2 {
			t.Fatalf("dlq init #%d: exit %d %+v\n%s", i+1, code, doc, out)
		}
	}
	for i := 1; i <= 4; i++ {
		m := &nats.Msg{Subject: subj, Header: nats.Header{nats.MsgIdHdr: {fmt.Sprintf("E%d", i)}, "tenant": {"acme"}}, Data: []byte(fmt.Sprintf(`{"order":%d}`, i))}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// E1 is naked until MaxDeliver, E2 and E4 terminated (E2 with a
	// reason), E3 acked. The server emits MAX_DELIVERIES only when the
	// consumer pulls again after the last failed delivery.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		batch, err := cons.Fetch(10, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			switch m.Headers().Get(nats.MsgIdHdr) {
			case "E1":
				_ = m.Nak()
			case "E2":
				_ = m.TermWithReason("schema invalid: missing field amount")
			case "E4":
				_ = m.Term()
			default:
				_ = m.DoubleAck(ctx)
			}
		}
		info, _ := js.Stream(ctx, doc.Stream)
		if in, err := info.Info(ctx); err == nil && in.State.Msgs >= 3 {
			break
		}
	}
	// E4's message is gone before anyone looks (a purge, limits).
	if err := ost.DeleteMsg(ctx, 4); err != nil {
		t.Fatal(err)
	}
	src, err := natsdlq.Open(ctx, doc.Source, natsdlq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got := map[string]envelope.Envelope{}
	var malformed []envelope.Envelope
	if err := src.Scan(ctx, "", func(e envelope.Envelope) error {
		if e.Malformed != "" {
			malformed = append(malformed, e)
		} else {
			got[e.EventID] = e
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if e := got["E1"]; e.Attempts != 2 || e.LastError != "max deliveries (2) reached" || e.Origin.Topic != subj || e.Properties["tenant"] != "acme" {
		t.Errorf("E1 (max deliveries): %+v", e)
	}
	if e := got["E2"]; e.LastError != "schema invalid: missing field amount" || e.Origin.Subscription != "workers" {
		t.Errorf("E2 (terminated): %+v", e)
	}
	if len(got) != 2 || len(malformed) != 1 || !strings.Contains(malformed[0].Malformed, "is gone") {
		t.Fatalf("entries %v, malformed %+v", got, malformed)
	}
	code, out = dlqctl(t, "--source", doc.Source, "stats", "-o", "json")
	if code != 0 || !strings.Contains(out, `"num_redelivered"`) || !strings.Contains(out, `"malformed": 1`) {
		t.Errorf("stats: exit %d\n%s", code, out)
	}
	code, out = dlqctl(t, "--source", doc.Source, "redrive", "--yes", "--reason", "advisory e2e", "--rate", "0",
		"--allow-disposition", "investigate,fix-then-redrive", "--unverified-ok", "--event-id", "E1", "--event-id", "E2")
	if code != 0 {
		t.Fatalf("redrive: exit %d\n%s", code, out)
	}
	if n, _ := src.Len(ctx); n != 1 {
		t.Errorf("%d advisories left, want 1 (the malformed one)", n)
	}
	for _, seq := range []uint64{1, 2} {
		if _, err := ost.GetMsg(ctx, seq); err == nil {
			t.Errorf("original %d still in the stream after its redrive", seq)
		}
	}
	seen := map[string]bool{}
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		seen[m.Headers().Get("event_id")+"/"+string(m.Data())] = true
		_ = m.Ack()
	}
	if !seen[`E1/{"order":1}`] || !seen[`E2/{"order":2}`] || len(seen) != 2 {
		t.Errorf("the consumer received %v", seen)
	}
}
