package natsdlq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natsdlq "github.com/dlqctl/dlqctl/backends/nats"
	"github.com/dlqctl/dlqctl/backends/nats/natstest"
	"github.com/dlqctl/dlqctl/conformance"
	"github.com/dlqctl/dlqctl/envelope"
)

// suite is the shared conformance suite on this backend; in the child
// processes the suite starts, it makes this test binary dlqctl.
var suite = conformance.For(natsdlq.Registration())

// TestConformance runs the shared conformance suite on NATS JetStream, against
// its real server.
func TestConformance(t *testing.T) {
	suite.Run(t, func(t *testing.T) *conformance.Target {
		srv := natstest.Start(t)
		_, js := srv.JetStream(t)
		n := 0
		// connect is a client of its own for a hook, closed with t: the
		// suite's may still be reconnecting after a restart.
		connect := func(t *testing.T) jetstream.JetStream {
			nc, err := nats.Connect(srv.URL(), nats.Timeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			return js
		}
		return &conformance.Target{Down: srv.Down, Up: srv.Up, Outage: "&timeout=1s", Refuse: func(*testing.T, conformance.Fixture, string, string) {
			// Nothing to do: no stream takes the refusing origin's
			// subject, so its publish has no responder and stores nothing.
		}, Missing: func(t *testing.T) string {
			return srv.URL() + "?stream=conf-typo-" + fmt.Sprint(time.Now().UnixNano())
		}, Fresh: func(t *testing.T) conformance.Fixture {
			n++
			base := fmt.Sprintf("conf-%d-%d", time.Now().UnixNano(), n)
			ctx := context.Background()
			// The copy stream as import --init makes it; the origin
			// stream takes the subject the seeded envelopes name.
			if _, err := js.CreateStream(ctx, copyStream(base+"_DLQ")); err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: base + "_ORDERS", Subjects: []string{base + ".orders"}}); err != nil {
				t.Fatal(err)
			}
			return conformance.Fixture{Source: srv.URL() + "?stream=" + base + "_DLQ", Origin: base + ".orders",
				Consume: []string{"--source", srv.URL() + "?stream=" + base + "_ORDERS&consumer=workers", "--dlq", base + "_DLQ"},
				Self:    "dlq." + base + "_DLQ." + base + ".orders",
				Alias:   strings.Replace(srv.URL(), "127.0.0.1:", "localhost:", 1) + "?stream=" + base + "_DLQ"}
		},
			// The server syncs its store every 2 minutes by default: a
			// SIGKILL can lose what it wrote since (docs/nats.md).
			Kill: srv.Down,
			PID:  srv.PID,
			Held: func(t *testing.T, fx conformance.Fixture) int {
				info, err := streamOf(t, connect(t), fx).Info(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return int(info.State.Msgs)
			},
			Published: func(t *testing.T, fx conformance.Fixture) int {
				// The origin stream of Fresh: BASE_ORDERS, for BASE.orders.
				s, err := connect(t).Stream(context.Background(), strings.TrimSuffix(fx.Origin, ".orders")+"_ORDERS")
				if err != nil {
					t.Fatal(err)
				}
				info, err := s.Info(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return int(info.State.Msgs)
			},
			Recreate: func(t *testing.T, fx conformance.Fixture) {
				js, ctx := connect(t), context.Background()
				name := streamName(fx)
				if err := js.DeleteStream(ctx, name); err != nil {
					t.Fatal(err)
				}
				if _, err := js.CreateStream(ctx, copyStream(name)); err != nil {
					t.Fatal(err)
				}
			},
			Snapshot: func(t *testing.T, fx conformance.Fixture) []string {
				return snapshot(t, streamOf(t, connect(t), fx), streamName(fx))
			},
			Native: func(t *testing.T, fx conformance.Fixture, e envelope.Envelope, copies int) {
				// As a consumer that dead-letters by publishing a copy, and
				// retried that publish: the same subject, headers and data,
				// with no Nats-Msg-Id (the stream would drop the retries).
				h := nats.Header{}
				h.Set("event_id", e.EventID)
				h.Set("fingerprint", e.Fingerprint)
				h.Set("content_type", e.ContentType)
				h.Set("key", e.Key)
				h.Set(natsdlq.HeaderOriginalSubject, e.Origin.Topic)
				h.Set("last_error", e.LastError)
				h.Set("attempts", strconv.Itoa(e.Attempts))
				h.Set("dead_lettered_at", e.DeadLetteredAt.Format(time.RFC3339))
				js := connect(t)
				for range copies {
					m := &nats.Msg{Subject: "dlq." + streamName(fx) + "." + e.Origin.Topic, Header: h, Data: e.Payload}
					if _, err := js.PublishMsg(context.Background(), m); err != nil {
						t.Fatal(err)
					}
				}
			},
			// The lease: a key of the dlqctl_leases bucket, a subject.
			Bookkeeping: func(fx conformance.Fixture) []string { return []string{"$KV.dlqctl_leases." + streamName(fx)} },
			TwoPointers: func(t *testing.T) (conformance.Fixture, string) {
				return twoAdvisories(t, connect(t), srv.URL())
			},
			NotApplicable: map[string]string{
				"read-only-limited": "a read gets messages by sequence: no delivery count, no limit",
				"forged-record":     "no record of removals: a move deletes the copy (and, for an advisory, the message) by sequence",
			},
		}
	})
}

// copyStream is a copy DLQ stream as import --init makes it.
func copyStream(name string) jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: name, Subjects: natsdlq.CopySubjects(name), AllowDirect: true}
}

func streamName(fx conformance.Fixture) string {
	_, q, _ := strings.Cut(fx.Source, "?stream=")
	name, _, _ := strings.Cut(q, "&")
	return name
}

func streamOf(t *testing.T, js jetstream.JetStream, fx conformance.Fixture) jetstream.Stream {
	s, err := js.Stream(context.Background(), streamName(fx))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// snapshot is the stream's state, its messages in sequence order with
// their subjects, headers and data, and its durable consumers with their
// delivery state. The stream's name is written STREAM: a twin has another.
func snapshot(t *testing.T, s jetstream.Stream, name string) []string {
	ctx := context.Background()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := info.State
	lines := []string{fmt.Sprintf("stream msgs %d first %d last %d deleted %d", st.Msgs, st.FirstSeq, st.LastSeq, st.NumDeleted)}
	for seq := st.FirstSeq; seq <= st.LastSeq && st.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			lines = append(lines, fmt.Sprintf("%d: %v", seq, err))
			continue
		}
		h := map[string]string{}
		for k, vs := range m.Header {
			if k != "Nats-Time-Stamp" { // when the twin stored it
				h[k] = strings.Join(vs, ",")
			}
		}
		lines = append(lines, fmt.Sprintf("%d %s%s %s", seq, m.Subject, conformance.Fields(h), m.Data))
	}
	// Durable consumers only: an ephemeral one is a reader's own (dlqctl
	// reads through them) and the server deletes it once idle.
	cl := s.ListConsumers(ctx)
	for ci := range cl.Info() {
		if ci.Config.Durable == "" {
			continue
		}
		lines = append(lines, fmt.Sprintf("consumer %s delivered %d ack-floor %d pending %d ack-pending %d redelivered %d",
			ci.Name, ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumPending, ci.NumAckPending, ci.NumRedelivered))
	}
	for i := range lines {
		lines[i] = strings.ReplaceAll(lines[i], name, "STREAM")
	}
	return lines
}

// twoAdvisories makes an origin stream with one message and an advisory
// DLQ (dlq init) for its consumer "failing", which terminates the
// message; the consumer is then deleted and made again by a redeploy,
// and terminates it again: two advisories about one stream message.
func twoAdvisories(t *testing.T, js jetstream.JetStream, url string) (conformance.Fixture, string) {
	ctx := context.Background()
	base := fmt.Sprintf("adv-%d", time.Now().UnixNano())
	origin, subj := base+"_ORDERS", base+".orders"
	ost, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: origin, Subjects: []string{subj}})
	if err != nil {
		t.Fatal(err)
	}
	consumer := jetstream.ConsumerConfig{Durable: "failing", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second}
	if _, err := js.CreateOrUpdateConsumer(ctx, origin, consumer); err != nil {
		t.Fatal(err)
	}
	code, out := conformance.RunCommand(t, t.TempDir(), nil, nil, "dlq", "init", url+"?stream="+origin+"&consumer=failing", "-o", "json")
	var doc struct {
		Stream, Source string
	}
	if code != 0 || json.Unmarshal([]byte(out[strings.Index(out, "{"):strings.LastIndex(out, "}")+1]), &doc) != nil {
		t.Fatalf("dlq init: exit %d\n%s", code, out)
	}
	const eventID = "E900"
	m := &nats.Msg{Subject: subj, Header: nats.Header{nats.MsgIdHdr: {eventID}, "event_id": {eventID}}, Data: []byte(`{"order":900}`)}
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	adv, err := js.Stream(ctx, doc.Stream)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if i == 2 {
			if err := js.DeleteConsumer(ctx, origin, "failing"); err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateOrUpdateConsumer(ctx, origin, consumer); err != nil {
				t.Fatal(err)
			}
		}
		c, err := ost.Consumer(ctx, "failing")
		if err != nil {
			t.Fatal(err)
		}
		batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			if err := msg.TermWithReason("timeout calling payments"); err != nil {
				t.Fatal(err)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			info, err := adv.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Msgs >= uint64(i) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("advisory %d never reached %s", i, doc.Stream)
			}
		}
	}
	return conformance.Fixture{Source: doc.Source, Origin: subj, Self: subj,
		Consume: []string{"--source", url + "?stream=" + origin + "&consumer=workers", "--dlq", doc.Stream}}, eventID
}
