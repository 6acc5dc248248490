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
)

// TestTermRemovesOriginal pins what docs/nats.md tells consumers: on a
// WorkQueue or Interest stream a +TERM removes the original at once, so
// its advisory entry cannot be resolved (malformed, "is gone"), while on
// a limits stream the original stays and the entry resolves.
func TestTermRemovesOriginal(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	ctx := context.Background()
	for _, tc := range []struct {
		retention jetstream.RetentionPolicy
		kept      bool
	}{{jetstream.WorkQueuePolicy, false}, {jetstream.InterestPolicy, false}, {jetstream.LimitsPolicy, true}} {
		t.Run(tc.retention.String(), func(t *testing.T) {
			base := fmt.Sprintf("term%d", time.Now().UnixNano())
			stream, subj := base+"_ORDERS", base+".orders"
			ost, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subj}, Retention: tc.retention})
			if err != nil {
				t.Fatal(err)
			}
			cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 3})
			if err != nil {
				t.Fatal(err)
			}
			code, out := dlqctl(t, "dlq", "init", srv.URL()+"?stream="+stream+"&consumer=workers", "-o", "json")
			var doc struct{ Stream, Source string }
			if code != 0 || json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &doc) != nil {
				t.Fatalf("dlq init: exit %d\n%s", code, out)
			}
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subj, Header: nats.Header{nats.MsgIdHdr: {"T1"}}, Data: []byte(`{"order":1}`)}); err != nil {
				t.Fatal(err)
			}
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for m := range batch.Messages() {
				n++
				if err := m.TermWithReason("schema invalid"); err != nil {
					t.Fatal(err)
				}
			}
			if n != 1 {
				t.Fatalf("fetched %d messages, want 1", n)
			}
			adv, err := js.Stream(ctx, doc.Stream)
			if err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the MSG_TERMINATED advisory", func() bool { return msgs(t, adv) == 1 })
			// The advisory is published after the term is processed: by
			// now the original's fate is settled.
			_, err = ost.GetMsg(ctx, 1)
			if kept := err == nil; kept != tc.kept {
				t.Fatalf("original kept after +TERM: %v (%v), want %v", kept, err, tc.kept)
			}
			_, got := scanAll(t, doc.Source)
			if len(got) != 1 {
				t.Fatalf("%d entries, want 1", len(got))
			}
			if tc.kept && (got[0].Malformed != "" || got[0].EventID != "T1" || got[0].LastError != "schema invalid") {
				t.Errorf("entry on a limits stream: %+v", got[0])
			}
			if !tc.kept && !strings.Contains(got[0].Malformed, "is gone") {
				t.Errorf("entry on a %s stream: %+v, want malformed: the message is gone", tc.retention, got[0])
			}
		})
	}
}

// TestCopyMsgIDDeduplicated pins the other fact consumers are told: the
// DLQ stream deduplicates copies by Nats-Msg-Id inside its window. A copy
// that reuses the original's ID loses the message's second dead-lettering
// (after a redrive); copies with an ID per dead-lettering
// (dead:<stream>:<sequence>) keep both, and a resend of the same
// dead-lettering (a crash before the ack) is dropped.
func TestCopyMsgIDDeduplicated(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	ctx := context.Background()
	dlq := fmt.Sprintf("dedup%d_DLQ", time.Now().UnixNano())
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dlq, Subjects: natsdlq.CopySubjects(dlq), AllowDirect: true})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(msgID string) *jetstream.PubAck {
		t.Helper()
		h := nats.Header{nats.MsgIdHdr: {msgID}, "event_id": {"E1"}, natsdlq.HeaderOriginalSubject: {"orders"}, "last_error": {"timeout"}}
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: "dlq." + dlq + ".x", Header: h, Data: []byte(`{"order":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		return ack
	}
	// The original's own ID, copied: the dead-lettering after a redrive
	// is dropped.
	if ack := publish("E1"); ack.Duplicate {
		t.Fatal("first copy taken for a duplicate")
	}
	if ack := publish("E1"); !ack.Duplicate {
		t.Error("a second copy with the original's Nats-Msg-Id was stored: the DLQ stream does not deduplicate")
	}
	// An ID per dead-lettering: the original at sequence 1, then its
	// redrive (a new message, sequence 7) dead-lettered again.
	if ack := publish("dead:ORDERS:1"); ack.Duplicate {
		t.Error("the first dead-lettering's copy taken for a duplicate")
	}
	if ack := publish("dead:ORDERS:1"); !ack.Duplicate {
		t.Error("a resend of the same dead-lettering was stored")
	}
	if ack := publish("dead:ORDERS:7"); ack.Duplicate {
		t.Error("the redriven message's dead-lettering taken for a duplicate")
	}
	if n := msgs(t, st); n != 3 {
		t.Errorf("the DLQ stream holds %d copies, want 3", n)
	}
}
