package pulsardlq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"

	pulsardlq "github.com/dlqctl/dlqctl/backends/pulsar"
	"github.com/dlqctl/dlqctl/backends/pulsar/pulsartest"
	"github.com/dlqctl/dlqctl/conformance"
	"github.com/dlqctl/dlqctl/envelope"
)

// suite is the shared conformance suite on this backend; in the child
// processes the suite starts, it makes this test binary dlqctl.
var suite = conformance.For(pulsardlq.Registration())

// TestConformance runs the shared conformance suite on Pulsar, against
// its real server.
func TestConformance(t *testing.T) {
	suite.Run(t, func(t *testing.T) *conformance.Target {
		b := pulsartest.Start(t)
		n := 0
		ctx := context.Background()
		fixture := func(ns string) conformance.Fixture {
			n++
			base := fmt.Sprintf("persistent://%s/conf-%d-%d", ns, time.Now().UnixNano(), n)
			q := url.Values{"topic": {base + "-dlq"}, "admin": {b.AdminURL()}}
			cq := url.Values{"topic": {base + "-orders"}, "subscription": {"workers"}}
			aq := url.Values{"topic": {strings.TrimPrefix(base, "persistent://") + "-dlq"}, "admin": {b.AdminURL()}}
			return conformance.Fixture{Source: b.ServiceURL() + "?" + q.Encode(), Origin: base + "-orders", Self: base + "-dlq",
				Alias: b.ServiceURL() + "?" + aq.Encode(),
				Consume: []string{"--source", b.ServiceURL() + "?" + cq.Encode(), "--dlq", base + "-dlq",
					"--max-deliveries", "1", "--redelivery-delay", "100ms"}}
		}
		admin := func(t *testing.T, method, path string, body []byte) []byte {
			out, err := b.Admin(ctx, method, path, body)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		client := func(t *testing.T) pulsar.Client {
			c, err := pulsar.NewClient(pulsar.ClientOptions{URL: b.ServiceURL(), OperationTimeout: 30 * time.Second,
				ConnectionTimeout: 10 * time.Second, Logger: pulsarlog.DefaultNopLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			return c
		}
		dedupNS := ""
		return &conformance.Target{Down: b.Down, Up: b.Up, Outage: "&timeout=1s", Refuse: func(t *testing.T, _ conformance.Fixture, dest, _ string) {
			// A terminated topic takes no more messages.
			path := adminPath(dest)
			admin(t, http.MethodPut, path, nil)
			admin(t, http.MethodPost, path+"/terminate", nil)
		}, Fresh: func(t *testing.T) conformance.Fixture {
			return fixture("public/default")
		},
			Kill: b.Kill,
			PID:  b.PID,
			Published: func(t *testing.T, fx conformance.Fixture) int {
				out, err := b.Admin(ctx, http.MethodGet, adminPath(fx.Origin)+"/stats", nil)
				if err != nil {
					return 0 // not made yet: nothing published to it
				}
				var st struct {
					MsgInCounter int `json:"msgInCounter"`
				}
				if err := json.Unmarshal(out, &st); err != nil {
					t.Fatal(err)
				}
				return st.MsgInCounter
			},
			Held: func(t *testing.T, fx conformance.Fixture) int {
				st := topicStats(t, admin, fx.Self)
				return int(st.Subscriptions["dlqctl"].MsgBacklog)
			},
			// The broker deletes a closed ledger that no subscription
			// needs at its next retention check (every two minutes), and
			// on an unload: both, now, on the DLQ and on what dlqctl
			// keeps beside it.
			Churn: func(t *testing.T, fx conformance.Fixture) {
				for _, topic := range []string{fx.Self, fx.Self + "-dlqctl-removed"} {
					path := adminPath(topic)
					if _, err := b.Admin(ctx, http.MethodGet, path+"/stats", nil); err != nil {
						continue // never made: nothing to churn
					}
					admin(t, http.MethodPut, path+"/unload", nil)
					admin(t, http.MethodPost, path+"/trim", nil)
				}
			},
			Recreate: func(t *testing.T, fx conformance.Fixture) {
				// Deleted with its subscriptions; made again by the next
				// producer (the namespace creates topics on use).
				admin(t, http.MethodDelete, adminPath(fx.Self)+"?force=true", nil)
			},
			// A namespace with the broker's deduplication on.
			Deduplicating: func(t *testing.T) conformance.Fixture {
				if dedupNS == "" {
					dedupNS = fmt.Sprintf("public/conf-dedup-%d", time.Now().UnixNano())
					admin(t, http.MethodPut, "/admin/v2/namespaces/"+dedupNS, nil)
					if err := b.EnableDeduplication(ctx, dedupNS, true); err != nil {
						t.Fatal(err)
					}
				}
				return fixture(dedupNS)
			},
			Snapshot: func(t *testing.T, fx conformance.Fixture) []string {
				return snapshot(t, client(t), admin, fx.Self)
			},
			Native: func(t *testing.T, fx conformance.Fixture, e envelope.Envelope, copies int) {
				// As the Pulsar client's dead-letter policy writes one: the
				// message with REAL_TOPIC and ORIGIN_MESSAGE_ID, the same
				// each time (the client retried its send).
				p, err := client(t).CreateProducer(pulsar.ProducerOptions{Topic: fx.Self, DisableBatching: true})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				m := &pulsar.ProducerMessage{Payload: e.Payload, Key: e.Key, EventTime: e.DeadLetteredAt, Properties: map[string]string{
					"REAL_TOPIC": e.Origin.Topic, "ORIGIN_MESSAGE_ID": "101:7:-1", "RECONSUMETIMES": strconv.Itoa(e.Attempts),
					"event_id": e.EventID, "fingerprint": e.Fingerprint, "last_error": e.LastError, "content_type": e.ContentType,
				}}
				for range copies {
					if _, err := p.Send(ctx, m); err != nil {
						t.Fatal(err)
					}
				}
			},
			Bookkeeping: func(fx conformance.Fixture) []string { return []string{fx.Self + "-dlqctl-removed"} },
			Forge: func(t *testing.T, fx conformance.Fixture, entryID string) {
				// Anyone who may produce to the namespace can write the
				// record: the entry's locator, as dlqctl writes it.
				p, err := client(t).CreateProducer(pulsar.ProducerOptions{Topic: fx.Self + "-dlqctl-removed", DisableBatching: true})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(entryID)}); err != nil {
					t.Fatal(err)
				}
			},
			NotApplicable: map[string]string{
				"read-only-limited": "the DLQ has no limit of its own: a redelivery count limit is a consumer's setting, and dlqctl's reads go through its own subscription",
				"two-pointers":      "an entry is a message holding its dead letter whole",
			},
		}
	})
}

type stats struct {
	Subscriptions map[string]struct {
		MsgBacklog      int64  `json:"msgBacklog"`
		UnackedMessages int64  `json:"unackedMessages"`
		Type            string `json:"type"`
		IsDurable       bool   `json:"isDurable"`
	} `json:"subscriptions"`
}

func topicStats(t *testing.T, admin func(*testing.T, string, string, []byte) []byte, topic string) stats {
	var st stats
	if err := json.Unmarshal(admin(t, http.MethodGet, adminPath(topic)+"/stats", nil), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// snapshot is the topic's messages from its start (key, properties,
// payload) and its durable subscriptions with their backlogs and unacked
// counts. A reader's own subscription is left out: it is gone with it.
func snapshot(t *testing.T, c pulsar.Client, admin func(*testing.T, string, string, []byte) []byte, topic string) []string {
	ctx := context.Background()
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var lines []string
	for r.HasNext() {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%d key=%s%s %s", len(lines)+1, m.Key(), conformance.Fields(m.Properties()), m.Payload()))
	}
	// dlqctl's own subscription is made at the earliest message by its
	// first read: until something is acknowledged there, it is as if
	// there were none.
	st := topicStats(t, admin, topic)
	subs := []string{fmt.Sprintf("subscription dlqctl backlog %d unacked 0", len(lines))}
	for name, s := range st.Subscriptions {
		switch {
		case name == "dlqctl":
			subs[0] = fmt.Sprintf("subscription dlqctl backlog %d unacked %d", s.MsgBacklog, s.UnackedMessages)
		case s.IsDurable:
			subs = append(subs, fmt.Sprintf("subscription %s backlog %d unacked %d", name, s.MsgBacklog, s.UnackedMessages))
		}
	}
	sort.Strings(subs[1:])
	return append(lines, subs...)
}
