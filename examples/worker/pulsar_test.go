package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	pulsardlq "github.com/dlqctl/dlqctl/backends/pulsar"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/redrive"
)

var topicSeq atomic.Int64

// freshTopic is a new topic in public/default for this test.
func freshTopic(t *testing.T, what string) string {
	name := strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name()))
	return fmt.Sprintf("persistent://public/default/%s-%s-%d-%d", name, what, time.Now().UnixNano()%1e6, topicSeq.Add(1))
}

// needBroker leaves a Pulsar test out of the -short tier, which starts no
// Java server; outside it TestMain has started the broker or failed.
func needBroker(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Pulsar broker (Java): not in the -short tier")
	}
}

// pulsarURL is a source URL on the test broker (the worker's, with sub;
// dlqctl's, with a DLQ topic and no sub).
func pulsarURL(topic, sub string) string {
	q := url.Values{"topic": {topic}, "admin": {broker.AdminURL()}}
	if sub != "" {
		q.Set("subscription", sub)
	}
	return broker.ServiceURL() + "?" + q.Encode()
}

func pulsarCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// produceEvents sends evs to topic, one entry each, as the application
// upstream of the worker would: event_id (and fingerprint when carried)
// as properties.
func produceEvents(t *testing.T, topic string, evs ...event) {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: broker.ServiceURL(), Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, e := range evs {
		props := map[string]string{"event_id": e.id}
		if e.carry {
			props["fingerprint"] = e.fingerprint()
		}
		for i := 0; i+1 < len(e.extra); i += 2 {
			props[e.extra[i]] = e.extra[i+1]
		}
		if _, err := p.Send(pulsarCtx(t), &pulsar.ProducerMessage{Payload: []byte(e.payload), Key: "k-" + e.id, Properties: props}); err != nil {
			t.Fatal(err)
		}
	}
}

// subStats is a subscription's backlog and unacked count from the admin
// API; ok is false when the topic or subscription does not exist.
func subStats(t *testing.T, topic, sub string) (backlog, unacked int64, ok bool) {
	t.Helper()
	out, err := broker.Admin(pulsarCtx(t), http.MethodGet, "/admin/v2/"+strings.Replace(topic, "://", "/", 1)+"/stats?getPreciseBacklog=true", nil)
	if err != nil {
		return 0, 0, false
	}
	var st struct {
		Subscriptions map[string]struct {
			MsgBacklog      int64 `json:"msgBacklog"`
			UnackedMessages int64 `json:"unackedMessages"`
		} `json:"subscriptions"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	s, ok := st.Subscriptions[sub]
	return s.MsgBacklog, s.UnackedMessages, ok
}

// waitBacklog waits until the subscription's backlog is want.
func waitBacklog(t *testing.T, topic, sub string, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, _, ok := subStats(t, topic, sub)
		if ok && n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backlog of %s on %s = %d (exists %v), want %d", sub, topic, n, ok, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scanDLQ reads the DLQ topic the way dlqctl does.
func scanDLQ(t *testing.T, dlq string) []envelope.Envelope {
	t.Helper()
	ctx := pulsarCtx(t)
	tp, err := pulsardlq.Open(ctx, pulsarURL(dlq, ""), pulsardlq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	var out []envelope.Envelope
	if err := tp.Scan(ctx, "", func(e envelope.Envelope) error { out = append(out, e); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func logLines(stderr, prefix string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestPulsarSQLite: every event processed once with its effect; --fail is
// nacked --max-deliveries times and then dead-lettered by the client into
// ORIGIN-SUB-DLQ, where the dlqctl subscription keeps it and dlqctl reads
// it with its origin and event ID.
func TestPulsarSQLite(t *testing.T) {
	needBroker(t)
	origin := freshTopic(t, "orders")
	evs := orderEvents(10)
	produceEvents(t, origin, evs...)
	db := filepath.Join(t.TempDir(), "consumer.db")

	r := mustRun(t, 0, "--source", pulsarURL(origin, "order-workers"), "--inbox", "sqlite:"+db,
		"--until-idle", "1500ms", "--log", "--fail", "E4", "--double-effect", "E3")
	// E4 is delivered 3 times (--max-deliveries default), then the client
	// dead-letters it without handing it to the worker again.
	if !strings.Contains(r.stdout, "processed=12 applied=9 absorbed=0 conflict=0 failed=3") {
		t.Errorf("stdout: %s\nstderr:\n%s", r.stdout, r.stderr)
	}
	if lines := logLines(r.stderr, "event_id=E4 "); len(lines) != 3 || !strings.HasPrefix(lines[2], "event_id=E4 attempts=3 effects=0 outcome=failed") {
		t.Errorf("E4 log lines: %q", lines)
	}
	for _, secret := range []string{"order-1", "example.com", "amount"} {
		if strings.Contains(r.stderr, secret) {
			t.Errorf("the log shows payload data %q:\n%s", secret, r.stderr)
		}
	}
	wants := map[string]want{}
	for _, e := range evs {
		wants[e.id] = want{attempts: 1, effects: 1, status: statusDone, fingerprint: e.fingerprint(), verdict: redrive.VerdictApplied}
	}
	wants["E3"] = want{attempts: 1, effects: 2, status: statusDone, fingerprint: evs[2].fingerprint(), verdict: redrive.VerdictDuplicateEffect}
	wants["E4"] = want{attempts: 3, effects: 0, status: statusFailed, fingerprint: evs[3].fingerprint(), verdict: redrive.VerdictReDeadLettered, back: true}
	checkInbox(t, "sqlite:"+db, wants)
	if log := sqliteEffectsLog(t, db); log["E3"] != 2 || log["E4"] != 0 || sum(log) != 10 {
		t.Errorf("effects_log rows per event: %v; want E3 2, E4 none, 10 in all", log)
	}
	// Backlog only: the broker's unackedMessages can stay 1 after a nacked
	// message was acked.
	if n, _, ok := subStats(t, origin, "order-workers"); !ok || n != 0 {
		t.Errorf("origin subscription: backlog %d (exists %v), want 0", n, ok)
	}

	// The client made the dlqctl subscription on the DLQ topic before its
	// first dead letter, so the DLQ keeps it.
	dlq := origin + "-order-workers-DLQ"
	waitBacklog(t, dlq, "dlqctl", 1)
	got := scanDLQ(t, dlq)
	if len(got) != 1 {
		t.Fatalf("DLQ holds %d messages, want E4 alone: %+v", len(got), got)
	}
	e := got[0]
	switch {
	case e.Malformed != "":
		t.Errorf("DLQ entry malformed: %s", e.Malformed)
	case e.EventID != "E4" || e.Origin.Topic != origin || e.Origin.Backend != "pulsar":
		t.Errorf("DLQ entry: event_id %s origin %+v; want E4 from %s", e.EventID, e.Origin, origin)
	case e.Properties[pulsardlq.PulsarOriginMessageID] == "" || e.Properties["tenant"] != "acme" || e.Key != "k-E4":
		t.Errorf("DLQ entry properties %v key %q", e.Properties, e.Key)
	case string(e.Payload) != evs[3].payload || e.Fingerprint != evs[3].fingerprint() || e.FingerprintComputed == evs[3].carry:
		t.Errorf("DLQ entry payload %s fingerprint %s (computed %v)", e.Payload, e.Fingerprint, e.FingerprintComputed)
	case e.LastError != "":
		t.Errorf("DLQ entry last_error %q: the nack path carries none", e.LastError)
	}
	if c := envelope.NewClassifier(envelope.DefaultRules()).Classify(e, false); c.Category != "unknown" {
		t.Errorf("DLQ entry categorized %s, want unknown (no last_error)", c.Category)
	}
}

// TestPulsarRetry: with --retry a failure goes through the client's retry
// topic with last_error, and the dead letter carries it and RECONSUMETIMES.
func TestPulsarRetry(t *testing.T) {
	needBroker(t)
	origin := freshTopic(t, "payments")
	evs := orderEvents(4)
	evs[1].extra = append(evs[1].extra, "error_class", "schema")
	produceEvents(t, origin, evs...)
	db := filepath.Join(t.TempDir(), "consumer.db")
	r := mustRun(t, 0, "--source", pulsarURL(origin, "pay"), "--inbox", "sqlite:"+db, "--until-idle", "1500ms",
		"--retry", "--max-deliveries", "2", "--fail", "E2", "--fail-error", "payments: connection refused")
	if !strings.Contains(r.stdout, "processed=6 applied=3 absorbed=0 conflict=0 failed=3") {
		t.Errorf("stdout: %s\nstderr:\n%s", r.stdout, r.stderr)
	}
	checkInbox(t, "sqlite:"+db, map[string]want{
		"E1": {attempts: 1, effects: 1, status: statusDone},
		"E2": {attempts: 3, effects: 0, status: statusFailed},
	})
	dlq := origin + "-pay-DLQ"
	waitBacklog(t, dlq, "dlqctl", 1)
	got := scanDLQ(t, dlq)
	if len(got) != 1 {
		t.Fatalf("DLQ holds %d messages, want E2 alone", len(got))
	}
	e := got[0]
	if e.EventID != "E2" || e.Origin.Topic != origin || e.LastError != "payments: connection refused" || e.Attempts != 3 || e.ErrorClass != "" {
		t.Errorf("DLQ entry: event_id %s origin %s last_error %q attempts %d error_class %q", e.EventID, e.Origin.Topic, e.LastError, e.Attempts, e.ErrorClass)
	}
	if string(e.Payload) != evs[1].payload || e.Fingerprint != evs[1].fingerprint() {
		t.Errorf("DLQ entry payload %s fingerprint %s", e.Payload, e.Fingerprint)
	}
	if c := envelope.NewClassifier(envelope.DefaultRules()).Classify(e, false); c.Category != "transient" {
		t.Errorf("DLQ entry categorized %s (%s), want transient from last_error", c.Category, c.Reason)
	}
}

// TestPulsarCrashAfterCommit: the first run commits E3 and exits 3 before
// the ack; the broker redelivers it to the next run, which absorbs it.
func TestPulsarCrashAfterCommit(t *testing.T) {
	needBroker(t)
	origin := freshTopic(t, "orders")
	evs := orderEvents(6)
	produceEvents(t, origin, evs...)
	db := filepath.Join(t.TempDir(), "consumer.db")
	args := []string{"--source", pulsarURL(origin, "g"), "--inbox", "sqlite:" + db, "--until-idle", "1s", "--crash-after-commit", "E3", "--log"}

	r := mustRun(t, 3, args...)
	if !strings.Contains(r.stderr, "event_id=E3 attempts=1 effects=1 outcome=applied") {
		t.Errorf("first run's log:\n%s", r.stderr)
	}
	if got := records(t, "sqlite:"+db, "E4"); len(got) != 0 {
		t.Errorf("E4 processed before the crash: %v", got)
	}
	r = mustRun(t, 0, args...)
	if !strings.Contains(r.stdout, "processed=4 applied=3 absorbed=1") {
		t.Errorf("second run: %s\n%s", r.stdout, r.stderr)
	}
	wants := map[string]want{}
	for _, e := range evs {
		wants[e.id] = want{attempts: 1, effects: 1, status: statusDone, fingerprint: e.fingerprint(), verdict: redrive.VerdictApplied}
	}
	wants["E3"] = want{attempts: 2, effects: 1, status: statusDone, fingerprint: evs[2].fingerprint(), verdict: redrive.VerdictAbsorbedDuplicate}
	checkInbox(t, "sqlite:"+db, wants)
	if n, u, ok := subStats(t, origin, "g"); !ok || n != 0 || u != 0 {
		t.Errorf("origin subscription: backlog %d unacked %d (exists %v), want 0 and 0", n, u, ok)
	}
}

func TestPulsarUsage(t *testing.T) {
	needBroker(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "x.db")
	for _, args := range [][]string{
		{"--source", broker.ServiceURL() + "?topic=orders", "--inbox", db},
		{"--source", broker.ServiceURL() + "?subscription=s", "--inbox", db},
		{"--source", broker.ServiceURL() + "?topic=orders&subscription=s&stream=x", "--inbox", db},
		{"--source", broker.ServiceURL() + "?topic=a/b&subscription=s", "--inbox", db},
		{"--source", broker.ServiceURL() + "?topic=orders&subscription=s", "--inbox", db, "--max-deliveries", "0"},
		{"--source", broker.ServiceURL() + "?topic=orders&subscription=s", "--inbox", db, "--redelivery-delay", "0s"},
	} {
		if r := runWorker(t, args...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
	}
}
