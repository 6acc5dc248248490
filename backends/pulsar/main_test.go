package pulsardlq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/dlqctl/dlqctl/backends/pulsar"
	"github.com/dlqctl/dlqctl/backends/pulsar/pulsartest"
)

// shared is the one Pulsar broker of this test binary, started by the
// first test that needs it (pulsarServer); tests keep apart by topic name.
// The tests that need no broker (decoders, URLs) run without one, in the
// -short tier too.
//
// It runs the retention check every 5 s, not every 120 s, so that
// TestBrokerCrash sees one soon after a restart; and it deletes inactive
// topics as Pulsar does by default (the harness turns that off), checked
// every 5 s, after an hour idle unless a namespace says sooner (see
// TestRemovalRecordOutlivesInactiveTopicDeletion). The conformance suite's
// broker keeps the harness's settings.
var shared = pulsartest.Shared(map[string]string{
	"retentionCheckIntervalInSeconds":                      "5",
	"brokerDeleteInactiveTopicsEnabled":                    "true",
	"brokerDeleteInactiveTopicsFrequencySeconds":           "5",
	"brokerDeleteInactiveTopicsMaxInactiveDurationSeconds": "3600",
})

// pulsarServer is the package's broker for a test that needs one: it
// skips the test under -short (the fast tier starts no Java server) and
// fails it when the broker cannot start.
func pulsarServer(t testing.TB) *pulsartest.Broker {
	t.Helper()
	return shared.Get(t)
}

func TestMain(m *testing.M) {
	os.Exit(shared.Finish(m.Run(), os.Stderr))
}

var topicSeq atomic.Int64

// freshTopic is a new topic name in ns ("public/default" when empty).
func freshTopic(t *testing.T, ns string) string {
	if ns == "" {
		ns = "public/default"
	}
	name := strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name()))
	return fmt.Sprintf("persistent://%s/%s-%d-%d", ns, name, time.Now().UnixNano()%1e6, topicSeq.Add(1))
}

// sourceURL is the dlqctl source URL of topic on the test broker.
func sourceURL(t testing.TB, topic string, extra ...string) string {
	broker := pulsarServer(t)
	q := url.Values{"topic": {topic}, "admin": {broker.AdminURL()}}
	u := broker.ServiceURL() + "?" + q.Encode()
	for _, e := range extra {
		u += "&" + e
	}
	return u
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// open opens the DLQ topic (creating the dlqctl subscription).
func open(t *testing.T, topic string, opts pulsardlq.Options, extra ...string) *pulsardlq.Topic {
	t.Helper()
	tp, err := pulsardlq.Open(testCtx(t), sourceURL(t, topic, extra...), opts)
	if err != nil {
		t.Fatalf("open %s: %v", topic, err)
	}
	t.Cleanup(func() { _ = tp.Close() })
	return tp
}

// client is a raw Pulsar client for producing and checking, as an
// application around dlqctl would.
func client(t *testing.T) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:    pulsarServer(t).ServiceURL(),
		Logger: plog.DefaultNopLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// produce sends msgs to topic, one per entry unless batch, and returns
// their ids.
func produce(t *testing.T, c pulsar.Client, topic string, batch bool, msgs ...*pulsar.ProducerMessage) []pulsar.MessageID {
	t.Helper()
	ctx := testCtx(t)
	p, err := c.CreateProducer(pulsar.ProducerOptions{
		Topic: topic, DisableBatching: !batch,
		BatchingMaxPublishDelay: time.Second, BatchingMaxMessages: uint(max(1, len(msgs))),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ids := make([]pulsar.MessageID, len(msgs))
	if !batch {
		for i, m := range msgs {
			if ids[i], err = p.Send(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		return ids
	}
	errs := make(chan error, len(msgs))
	for i, m := range msgs {
		p.SendAsync(ctx, m, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			ids[i] = id
			errs <- err
		})
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	for range msgs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// readAll reads every message of topic from the earliest, with a reader.
func readAll(t *testing.T, c pulsar.Client, topic string) []pulsar.Message {
	t.Helper()
	ctx := testCtx(t)
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []pulsar.Message
	for r.HasNext() {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// adminDo sends one admin request to the test broker.
func adminDo(t *testing.T, method, path, body string) {
	t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	if _, err := pulsarServer(t).Admin(testCtx(t), method, path, b); err != nil {
		t.Fatal(err)
	}
}

// adminJSON reads one admin GET answer (path from /admin/v2/…) into out.
func adminJSON(t *testing.T, path string, out any) {
	t.Helper()
	raw, err := pulsarServer(t).Admin(testCtx(t), http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// adminPath is the /admin/v2 path of a persistent topic's full name.
func adminPath(topic string) string {
	return "/admin/v2/" + strings.Replace(topic, "://", "/", 1)
}

// createPartitioned makes topic a partitioned topic of n partitions.
func createPartitioned(t *testing.T, topic string, n int) {
	adminDo(t, http.MethodPut, adminPath(topic)+"/partitions", fmt.Sprint(n))
}
