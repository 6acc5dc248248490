package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/internal/testproc"
	"github.com/dlqctl/dlqctl/internal/workertest"
	"github.com/dlqctl/dlqctl/redrive"
)

// The Pulsar end-to-end tests run the real dlqctl, the reference worker
// and the run's one Pulsar broker (withServers). Each test uses fresh
// topic names; the deduplication tests share one namespace with broker
// deduplication on.

// dedupNamespace is the namespace whose topics have deduplication on.
const dedupNamespace = "public/dedup-e2e"

var e2eTopicSeq atomic.Int64

// e2eTopic is a new topic name in namespace ns.
func e2eTopic(t *testing.T, ns, what string) string {
	name := strings.NewReplacer("/", "-", "_", "-", ":", "-", "=", "-").Replace(strings.ToLower(t.Name()))
	return fmt.Sprintf("persistent://%s/%s-%s-%d-%d", ns, name, what, time.Now().UnixNano()%1e6, e2eTopicSeq.Add(1))
}

// pulsarSource is a source URL on the run's broker: dlqctl's (sub "":
// the DLQ read through the dlqctl subscription) or the worker's.
func pulsarSource(topic, sub string) string {
	q := url.Values{"topic": {topic}, "admin": {os.Getenv("DLQCTL_TEST_PULSAR_ADMIN")}}
	if sub != "" {
		q.Set("subscription", sub)
	}
	return os.Getenv("DLQCTL_TEST_PULSAR_URL") + "?" + q.Encode()
}

func pulsarTestCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func pulsarTestClient(t *testing.T) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: os.Getenv("DLQCTL_TEST_PULSAR_URL"), Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// pulsarEvent is one message a test produces.
type pulsarEvent struct {
	id, payload string
	props       map[string]string // more properties
}

func (e pulsarEvent) fingerprint() string { return envelope.ComputeFingerprint([]byte(e.payload)) }

func pulsarEvents(prefix string, n int) []pulsarEvent {
	evs := make([]pulsarEvent, n)
	for i := range evs {
		evs[i] = pulsarEvent{
			id:      fmt.Sprintf("%s%03d", prefix, i+1),
			payload: fmt.Sprintf(`{"orderId":"order-%d","amount":%d}`, i+1, 1000+i),
		}
	}
	return evs
}

// produceTo sends evs to topic, one entry each, with the properties
// event_id and fingerprint.
func produceTo(t *testing.T, topic string, evs []pulsarEvent) {
	t.Helper()
	ctx := pulsarTestCtx(t)
	p, err := pulsarTestClient(t).CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, e := range evs {
		props := map[string]string{"event_id": e.id, "fingerprint": e.fingerprint(), "tenant": "acme"}
		for k, v := range e.props {
			props[k] = v
		}
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(e.payload), Key: "k-" + e.id, Properties: props}); err != nil {
			t.Fatal(err)
		}
	}
}

// seedDLQ writes evs into dlq as the client's dead-lettering does: with
// REAL_TOPIC origin and ORIGIN_MESSAGE_ID.
func seedDLQ(t *testing.T, dlq, origin string, evs []pulsarEvent) {
	t.Helper()
	for i := range evs {
		evs[i].props = map[string]string{"REAL_TOPIC": origin, "ORIGIN_MESSAGE_ID": fmt.Sprintf("7:%d:-1:-1", i)}
	}
	produceTo(t, dlq, evs)
}

// onTopic reads every message of topic from the earliest, with a reader.
func onTopic(t *testing.T, topic string) []pulsar.Message {
	t.Helper()
	ctx := pulsarTestCtx(t)
	r, err := pulsarTestClient(t).CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
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

// copiesOn counts the messages of topic per event_id.
func copiesOn(t *testing.T, topic string) map[string]int {
	seen := map[string]int{}
	for _, m := range onTopic(t, topic) {
		seen[m.Properties()["event_id"]]++
	}
	return seen
}

func pulsarAdmin(t *testing.T, method, path string, body []byte) ([]byte, error) {
	t.Helper()
	return pulsarBroker.Admin(pulsarTestCtx(t), method, path, body)
}

func adminTopicPath(topic string) string {
	return "/admin/v2/" + strings.Replace(topic, "://", "/", 1)
}

// subscriptionStats is a subscription's backlog and unacked count; ok is
// false when the topic or the subscription does not exist.
func subscriptionStats(t *testing.T, topic, sub string) (backlog, unacked int64, ok bool) {
	t.Helper()
	out, err := pulsarAdmin(t, http.MethodGet, adminTopicPath(topic)+"/stats?getPreciseBacklog=true", nil)
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

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s (%s)", what, timeout, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dlqctlBacklog is the DLQ subscription's backlog as `dlqctl stats` reports it.
func dlqctlBacklog(t *testing.T, dir, src string) (int64, string) {
	t.Helper()
	code, out := dlqctlProc(t, dir, nil, "--source", src, "stats", "-o", "json")
	if code != 0 {
		return -1, out
	}
	var doc struct {
		Total   int `json:"total"`
		Backend struct {
			Backlog int64 `json:"backlog"`
		} `json:"backend"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &doc); err != nil {
		t.Fatalf("stats: %v\n%s", err, out)
	}
	return doc.Backend.Backlog, fmt.Sprintf("backlog %d, total %d", doc.Backend.Backlog, doc.Total)
}

// dedupReady makes dedupNamespace once, with deduplication on.
var dedupReady = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pulsarBroker.Admin(ctx, http.MethodPut, "/admin/v2/namespaces/"+dedupNamespace, nil); err != nil && !strings.Contains(err.Error(), "409") {
		return err
	}
	return pulsarBroker.EnableDeduplication(ctx, dedupNamespace, true)
})

// originTopic makes a fresh origin topic, in the deduplicating namespace
// when dedup, and waits until the broker applies that setting to it.
func originTopic(t *testing.T, dedup bool) string {
	t.Helper()
	ns, want := "public/default", "Disabled"
	if dedup {
		if err := dedupReady(); err != nil {
			t.Fatalf("namespace %s with deduplication: %v", dedupNamespace, err)
		}
		ns, want = dedupNamespace, "Enabled"
	}
	topic := e2eTopic(t, ns, "origin")
	if _, err := pulsarAdmin(t, http.MethodPut, adminTopicPath(topic), nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "deduplication "+want+" on "+topic, func() (bool, string) {
		out, err := pulsarAdmin(t, http.MethodGet, adminTopicPath(topic)+"/stats", nil)
		return err == nil && strings.Contains(string(out), `"deduplicationStatus":"`+want+`"`), fmt.Sprint(err)
	})
	return topic
}

// journalRecords reads a redrive journal's records.
func journalRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("journal line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// verdicts runs `dlqctl reconcile` on a journal and returns each event's
// verdict.
func verdicts(t *testing.T, dir, src, journal, effects string) map[string]string {
	t.Helper()
	code, out := dlqctlProc(t, dir, nil, "--source", src, "reconcile", "--journal", journal, "--effects", effects, "--events", "-o", "json")
	if code != 0 {
		t.Fatalf("reconcile: exit %d\n%s", code, out)
	}
	var doc struct {
		Batches []struct {
			Events []struct {
				EventID string `json:"event_id"`
				Verdict string `json:"verdict"`
			} `json:"events"`
		} `json:"batches"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &doc); err != nil {
		t.Fatalf("reconcile: %v\n%s", err, out)
	}
	v := map[string]string{}
	for _, b := range doc.Batches {
		for _, e := range b.Events {
			v[e.EventID] = e.Verdict
		}
	}
	return v
}

func planAndApprove(t *testing.T, dir, src string, args ...string) {
	t.Helper()
	// The client's dead letters carry no last_error (category unknown,
	// disposition investigate): a plan takes them only when told to.
	args = append([]string{"--allow-disposition", "investigate"}, args...)
	if code, out := dlqctlProc(t, dir, nil, append([]string{"--source", src, "redrive", "plan", "--out", "p.json"}, args...)...); code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	if code, out := dlqctlProc(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
}

// TestPulsarEndToEnd is the runbook on Pulsar with real dead letters: the
// reference worker fails 6 of 30 events, the client dead-letters them after
// its MaxDeliveries; dlqctl lists and categorizes them, and once a healthy
// worker runs, plans, approves and applies their redrive, reconciling
// against the worker's inbox. Every event ends with exactly one effect and
// reaches its origin with the ID and fingerprint it had in the DLQ.
func TestPulsarEndToEnd(t *testing.T) {
	needPulsar(t)
	began := time.Now()
	dir := t.TempDir()
	origin := e2eTopic(t, "public/default", "orders")
	const sub = "order-workers"
	dlq := origin + "-" + sub + "-DLQ" // the client's default DLQ name
	src := pulsarSource(dlq, "")
	inbox := filepath.Join(dir, "inbox.db")
	evs := pulsarEvents("E", 30)
	produceTo(t, origin, evs)
	failing := []string{"E003", "E007", "E011", "E015", "E022", "E029"}

	args := []string{"--source", pulsarSource(origin, sub), "--inbox", "sqlite:" + inbox, "--log"}
	failArgs := slices.Clone(args)
	for _, id := range failing {
		failArgs = append(failArgs, "--fail", id)
	}
	sick := workertest.Start(t, failArgs...)
	eventually(t, 90*time.Second, "6 dead letters", func() (bool, string) {
		n, state := dlqctlBacklog(t, dir, src)
		return n == int64(len(failing)), state
	})
	// The client acks each original once its dead letter is written. (The
	// broker's unackedMessages is not looked at: it can stay 1 after a
	// nacked message was acked.)
	eventually(t, 30*time.Second, "origin subscription drained", func() (bool, string) {
		n, u, ok := subscriptionStats(t, origin, sub)
		return ok && n == 0, fmt.Sprintf("backlog %d unacked %d", n, u)
	})
	sick.Stop()
	if err := sick.Wait(); err != nil {
		t.Fatalf("failing worker: %v\n%s", err, sick.Output())
	}
	t.Logf("dead-lettered after %s", time.Since(began).Round(time.Millisecond))

	code, out := dlqctlProc(t, dir, nil, "--source", src, "list", "--limit", "0", "-o", "json")
	if code != 0 {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	var list struct {
		Items []struct {
			EventID     string          `json:"event_id"`
			Fingerprint string          `json:"fingerprint"`
			Category    string          `json:"category"`
			Origin      envelope.Origin `json:"origin"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &list); err != nil {
		t.Fatalf("list: %v\n%s", err, out)
	}
	inDLQ := map[string]string{}
	for _, it := range list.Items {
		inDLQ[it.EventID] = it.Fingerprint
		if it.Origin.Topic != origin || it.Origin.Backend != "pulsar" {
			t.Errorf("%s: origin %+v, want %s (REAL_TOPIC)", it.EventID, it.Origin, origin)
		}
	}
	if got := slices.Sorted(maps.Keys(inDLQ)); !slices.Equal(got, failing) || len(list.Items) != len(failing) {
		t.Fatalf("DLQ lists %d items, events %v; want %v", len(list.Items), got, failing)
	}
	// The client's dead letters carry no last_error: category unknown.
	code, out = dlqctlProc(t, dir, nil, "--source", src, "categorize", "-o", "json")
	var cats struct {
		Categories []struct {
			Name        string `json:"name"`
			Disposition string `json:"disposition"`
			Count       int    `json:"count"`
		} `json:"categories"`
	}
	if code == 0 {
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &cats); err != nil {
			t.Fatalf("categorize: %v\n%s", err, out)
		}
	}
	if code != 0 || len(cats.Categories) != 1 || cats.Categories[0].Name != "unknown" || cats.Categories[0].Count != len(failing) {
		t.Errorf("categorize: exit %d, %+v\n%s", code, cats.Categories, out)
	}

	// The cause is fixed: a healthy worker on the same inbox and subscription.
	workertest.Start(t, args...)
	planAndApprove(t, dir, src, "--reason", "INC-7: payments fixed", "--effects", "sqlite:"+inbox,
		"--settle", "15s", "--rate", "100", "--ramp", "2,10")
	code, out = dlqctlProc(t, dir, nil, "--source", src, "-o", "json", "redrive", "apply", "p.json")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	run := parseRun(t, out)
	if run.Status != "completed" || run.Moved != len(failing) || len(run.Batches) != 2 || run.Batches[0].Size != 2 || run.Batches[1].Size != 4 {
		t.Errorf("run: status %s moved %d batches %+v; want completed, 6, sizes 2 and 4", run.Status, run.Moved, run.Batches)
	}
	absorbed := 0
	for _, b := range run.Batches {
		if b.Gate != "pass" || b.Verdicts["applied"]+b.Verdicts["absorbed-duplicate"] != b.Size {
			t.Errorf("batch %+v", b)
		}
		absorbed += b.Verdicts["absorbed-duplicate"]
	}
	// The failed deliveries were counted as attempts: attempts > 1 with one
	// effect is absorbed-duplicate.
	if absorbed != len(failing) {
		t.Errorf("%d absorbed-duplicate verdicts, want %d: %+v", absorbed, len(failing), run.Batches)
	}
	rows := workertest.ReadInbox(t, inbox)
	for _, e := range evs {
		r := rows[e.id]
		if r.Effects != 1 {
			t.Errorf("%s: effects %d, want 1", e.id, r.Effects)
		}
		if slices.Contains(failing, e.id) && r.Attempts != 4 {
			t.Errorf("%s: attempts %d, want 4 (3 failed deliveries and the redrive)", e.id, r.Attempts)
		}
	}
	redriven := 0
	for _, m := range onTopic(t, origin) {
		p := m.Properties()
		if p["dlqctl_run_id"] == "" {
			continue
		}
		redriven++
		id := p["event_id"]
		if want, ok := inDLQ[id]; !ok || p["fingerprint"] != want || envelope.ComputeFingerprint(m.Payload()) != want {
			t.Errorf("redriven %s: fingerprint %s, DLQ had %q", id, p["fingerprint"], want)
		}
		if p["REAL_TOPIC"] != "" || p["ORIGIN_MESSAGE_ID"] != "" || p["redrive_count"] != "1" || m.Key() != "k-"+id {
			t.Errorf("redriven %s: properties %v key %q", id, p, m.Key())
		}
	}
	if redriven != len(failing) {
		t.Errorf("%d redriven messages on the origin, want %d", redriven, len(failing))
	}
	if n, state := dlqctlBacklog(t, dir, src); n != 0 {
		t.Errorf("DLQ after the redrive: %s, want backlog 0", state)
	}
	t.Logf("end to end in %s", time.Since(began).Round(time.Millisecond))
}

// TestPulsarCrashMatrix kills dlqctl (SIGKILL) right after a journal step
// of its second chunk, then resumes. Nothing is lost and nothing is acked
// twice. "sent-unjournaled" is the crash between a send's return and its
// journal record: the journal of a crash after `published` with those
// records cut off, exactly what that crash leaves. Resume looks those
// entries up on the origin by the run's markers, finds them there, and
// only acknowledges them: each event is once on the origin, with broker
// deduplication or without.
func TestPulsarCrashMatrix(t *testing.T) {
	needPulsar(t)
	const n = 8
	steps := []string{"intent:2", "published:2", "removed:2", "sent-unjournaled", "acked-unjournaled"}
	for _, dedup := range []bool{true, false} {
		for _, step := range steps {
			name := "dedup-off/" + step
			if dedup {
				name = "dedup-on/" + step
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				began := time.Now()
				dir := t.TempDir()
				origin := originTopic(t, dedup)
				dlq := e2eTopic(t, "public/default", "dlq")
				evs := pulsarEvents("C", n)
				seedDLQ(t, dlq, origin, evs)
				src := pulsarSource(dlq, "")
				planAndApprove(t, dir, src, "--reason", "crash test", "--rate", "1000", "--burst", "2",
					"--ramp", "4,10", "--settle", "0s", "--unverified-ok")

				crashAt := step
				switch step {
				case "sent-unjournaled":
					crashAt = "published:2"
				case "acked-unjournaled":
					crashAt = "removed:2"
				}
				code, out := dlqctlProc(t, dir, []string{"DLQCTL_TEST_CRASH=" + crashAt}, "--source", src, "redrive", "apply", "p.json")
				if code != 137 {
					t.Fatalf("apply did not crash at %s: exit %d\n%s", crashAt, code, out)
				}
				journal := filepath.Join(dir, "p.journal")
				switch step {
				case "sent-unjournaled":
					cutTrailing(t, journal, "published")
				case "acked-unjournaled":
					// Acked, but the journal still says only published:
					// resume acks again, which must find them gone and
					// neither fail nor send anything.
					cutTrailing(t, journal, "removed")
				}

				code, out = dlqctlProc(t, dir, nil, "--source", src, "redrive", "resume", "p.journal", "-o", "json")
				if code != 0 {
					t.Fatalf("resume: exit %d\n%s", code, out)
				}
				if run := parseRun(t, out); run.Status != "completed" || run.Moved != n {
					t.Errorf("after resume: status %s, moved %d; want completed, %d", run.Status, run.Moved, n)
				}
				ambiguous, deduplicated := map[string]bool{}, map[string]bool{}
				for _, r := range journalRecords(t, journal) {
					id := fmt.Sprint(r["seq"]) // step records name the entry by plan sequence
					switch r["type"] {
					case "ambiguous":
						ambiguous[id] = true
					case "published":
						if r["dest_id"] == "deduplicated" {
							deduplicated[id] = true
						}
					case "failed", "gone", "skipped":
						t.Errorf("journal: %v", r)
					}
				}
				wantAmbiguous := 0
				if step == "intent:2" {
					wantAmbiguous = 2 // the second chunk (--burst 2)
				}
				if len(ambiguous) != wantAmbiguous {
					t.Errorf("%d entries journaled ambiguous (%v), want %d", len(ambiguous), ambiguous, wantAmbiguous)
				}
				if len(deduplicated) > 0 {
					t.Errorf("resends dropped by the broker: %v; want none sent again", deduplicated)
				}
				if n, u, ok := subscriptionStats(t, dlq, "dlqctl"); !ok || n != 0 || u != 0 {
					t.Errorf("DLQ subscription: backlog %d unacked %d, want 0", n, u)
				}
				copies := copiesOn(t, origin)
				if len(copies) != n {
					t.Errorf("%d distinct events on the origin, want %d: %v", len(copies), n, copies)
				}
				for _, e := range evs {
					if copies[e.id] != 1 {
						t.Errorf("%s on the origin %d times, want once", e.id, copies[e.id])
					}
				}

				// The consumer takes everything: one effect per event, and a
				// copy is absorbed.
				inbox := filepath.Join(dir, "inbox.db")
				w := workertest.Start(t, "--source", pulsarSource(origin, "app"), "--inbox", "sqlite:"+inbox, "--until-idle", "1s")
				if err := w.Wait(); err != nil {
					t.Fatalf("worker: %v\n%s", err, w.Output())
				}
				rows := workertest.ReadInbox(t, inbox)
				v := verdicts(t, dir, src, "p.journal", "sqlite:"+inbox)
				for _, e := range evs {
					r := rows[e.id]
					wantAttempts, wantVerdict := 1, "applied"
					if copies[e.id] == 2 {
						wantAttempts, wantVerdict = 2, "absorbed-duplicate"
					}
					if r.Effects != 1 || r.Attempts != wantAttempts || v[e.id] != wantVerdict {
						t.Errorf("%s: attempts %d effects %d verdict %q; want %d, 1, %s", e.id, r.Attempts, r.Effects, v[e.id], wantAttempts, wantVerdict)
					}
				}
				t.Logf("%s in %s", name, time.Since(began).Round(time.Millisecond))
			})
		}
	}
}

// cutTrailing removes the trailing records of one type (`published` or
// `removed`) from a journal that a crash right after them left, so that it
// ends as a crash between the side effect and its record would leave it.
// It returns the event IDs whose records it removed.
func cutTrailing(t *testing.T, path, typ string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(raw), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	// Step records name their entry by plan sequence number; the plan the
	// run-start record names gives its event ID.
	start, err := redrive.ReadRunStart(path)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := redrive.LoadRunPlan(start, path, "")
	if err != nil {
		t.Fatal(err)
	}
	eventID := map[int64]string{}
	for e := range plan.Entries.All() {
		eventID[e.Seq] = e.EventID
	}
	cut := map[string]bool{}
	for len(lines) > 0 {
		var r struct {
			Type string `json:"type"`
			Seq  int64  `json:"seq"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
			t.Fatal(err)
		}
		if r.Type != typ {
			break
		}
		cut[eventID[r.Seq]] = true
		lines = lines[:len(lines)-1]
	}
	if len(cut) != 2 {
		t.Fatalf("cut %d %s records, want the 2 of the second chunk", len(cut), typ)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	return cut
}

// TestPulsarResolve ends missing-reference dead letters on a real broker:
// each envelope is archived in full in the journal, with the reason, before
// its ack; nothing goes to the origin, and the other entries stay.
func TestPulsarResolve(t *testing.T) {
	needPulsar(t)
	dir := t.TempDir()
	origin := originTopic(t, false)
	dlq := e2eTopic(t, "public/default", "dlq")
	evs := pulsarEvents("G", 6)
	for i := range evs {
		evs[i].props = map[string]string{"REAL_TOPIC": origin, "last_error": "order not found"}
		if i >= 4 {
			evs[i].props["last_error"] = "timeout calling payments"
		}
	}
	produceTo(t, dlq, evs)
	src := pulsarSource(dlq, "")
	if code, out := dlqctlProc(t, dir, nil, "--source", src, "resolve", "plan", "--category", "missing-reference",
		"--reason", "orders deleted upstream", "--out", "r.json"); code != 0 {
		t.Fatalf("resolve plan: exit %d\n%s", code, out)
	}
	if code, out := dlqctlProc(t, dir, nil, "resolve", "approve", "r.json", "--by", "oncall"); code != 0 {
		t.Fatalf("resolve approve: exit %d\n%s", code, out)
	}
	code, out := dlqctlProc(t, dir, nil, "--source", src, "-o", "json", "resolve", "apply", "r.json")
	if code != 0 {
		t.Fatalf("resolve apply: exit %d\n%s", code, out)
	}
	if run := parseRun(t, out); run.Status != "completed" || run.Moved != 4 {
		t.Errorf("resolve: status %s, moved %d; want completed, 4", run.Status, run.Moved)
	}
	archived := 0
	for _, r := range journalRecords(t, filepath.Join(dir, "r.journal")) {
		if r["type"] != "archive" {
			continue
		}
		archived++
		env, _ := r["envelope"].(map[string]any)
		if env["event_id"] == nil || env["payload"] == nil || r["note"] != "orders deleted upstream" {
			t.Errorf("archive record without the full envelope and reason: %v", r)
		}
	}
	if archived != 4 {
		t.Errorf("%d archive records, want 4", archived)
	}
	if b, _, ok := subscriptionStats(t, dlq, "dlqctl"); !ok || b != 2 {
		t.Errorf("DLQ backlog %d after resolving 4 of 6, want 2", b)
	}
	if copies := copiesOn(t, origin); len(copies) != 0 {
		t.Errorf("resolve sent %v to the origin", copies)
	}
}

// needPulsar skips t in the -short tier, where TestMain starts no broker.
func needPulsar(t *testing.T) {
	t.Helper()
	testproc.SkipServerInShort(t, "an Apache Pulsar broker")
}

// TestPulsarBrokerCrashKeepsRemovals: a broker acknowledges an ack when
// it has updated the cursor in memory and persists it later, so a broker
// SIGKILLed soon after a completed redrive brings the acknowledged entries
// back to the DLQ subscription. They must not come back to dlqctl: stats
// counts none, says what happened, and a new plan moves none a second time.
func TestPulsarBrokerCrashKeepsRemovals(t *testing.T) {
	needPulsar(t)
	const n = 40
	dir, origin, src := redrivenDLQ(t, "C", n)
	if err := pulsarBroker.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := pulsarBroker.Up(); err != nil {
		t.Fatal(err)
	}
	backlog, _ := func() (int64, string) {
		var b int64
		var s string
		eventually(t, 60*time.Second, "the admin API after the restart", func() (bool, string) {
			b, s = dlqctlBacklog(t, dir, src)
			return b >= 0, s
		})
		return b, s
	}()
	t.Logf("after the broker crash the DLQ subscription's backlog is %d (acks the broker lost)", backlog)
	code, out := dlqctlProc(t, dir, nil, "--source", src, "stats", "-o", "json")
	var stats struct {
		Total int `json:"total"`
	}
	if code != 0 || json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &stats) != nil {
		t.Fatalf("stats: exit %d\n%s", code, out)
	}
	if stats.Total != 0 {
		t.Errorf("stats counts %d entries after the crash, want 0: every one was redriven\n%s", stats.Total, out)
	}
	if backlog > 0 && !strings.Contains(out, "came back") {
		t.Errorf("stats does not say that %d acknowledged entries came back:\n%s", backlog, out)
	}
	again := t.TempDir()
	code, out = dlqctlProc(t, again, nil, "--source", src, "redrive", "plan", "--out", "p.json", "--reason", "again",
		"--allow-disposition", "investigate", "--rate", "0", "--unverified-ok", "--settle", "0s")
	if code != 0 {
		t.Fatalf("plan after the crash: exit %d\n%s", code, out)
	}
	// A plan that takes no entry is not written: the refusal to move an
	// entry twice shows as "nothing to plan" and no file.
	if raw, err := os.ReadFile(filepath.Join(again, "p.json")); err == nil {
		t.Errorf("a new plan after the crash was written, taking entries that were redriven already:\n%s", raw)
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if !strings.Contains(out, "nothing to plan") {
		t.Errorf("plan after the crash does not say there is nothing to plan:\n%s", out)
	}
	if copies := copiesOn(t, origin); len(copies) != n {
		t.Errorf("%d events on the origin, want %d", len(copies), n)
	}
}

// TestPulsarCutJournalCountsLostMovesAsMoved: a journal cut at a write
// boundary after its first batch-start (a crash that lost every later
// write) leaves moved entries without an outcome; resume finds them gone
// from the DLQ and looks them up on the origin by the run's markers: moved,
// not gone, and none sent twice.
func TestPulsarCutJournalCountsLostMovesAsMoved(t *testing.T) {
	needPulsar(t)
	const n = 10
	dir, origin, src := redrivenDLQ(t, "J", n)
	journal := filepath.Join(dir, "p.journal")
	raw, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(raw), "\n")
	// Cut at the end of the write that holds the first batch-start (its
	// last line carries the write's MAC; the batch's first intents share
	// that write): the moves after it are lost.
	start := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, `"type":"batch-start"`) })
	if start < 0 {
		t.Fatalf("no batch-start in the journal:\n%s", raw)
	}
	keep := start + slices.IndexFunc(lines[start:], func(l string) bool { return strings.Contains(l, `"mac":`) })
	if keep < start {
		t.Fatalf("no signed write ends after the batch-start:\n%s", raw)
	}
	if err := os.WriteFile(journal, []byte(strings.Join(lines[:keep+1], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := dlqctlProc(t, dir, nil, "--source", src, "-o", "json", "redrive", "resume", "p.journal")
	if code != 0 {
		t.Fatalf("resume of the cut journal: exit %d\n%s", code, out)
	}
	var doc struct {
		Moved int `json:"moved"`
		Gone  int `json:"gone"`
	}
	if err := json.NewDecoder(strings.NewReader(out[strings.Index(out, "{"):])).Decode(&doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Moved != n || doc.Gone != 0 {
		t.Errorf("after a cut journal: moved %d, gone %d; want %d moved", doc.Moved, doc.Gone, n)
	}
	for id, c := range copiesOn(t, origin) {
		if c != 1 {
			t.Errorf("%s is on the origin %d times, want once", id, c)
		}
	}
}

// redrivenDLQ seeds a fresh DLQ with n events bound for a fresh origin and
// redrives them all in one batch; it returns the plan's folder, the
// origin and the DLQ's source URL.
func redrivenDLQ(t *testing.T, prefix string, n int) (dir, origin, src string) {
	t.Helper()
	dir = t.TempDir()
	origin = e2eTopic(t, "public/default", "orders")
	dlq := e2eTopic(t, "public/default", "dlq")
	src = pulsarSource(dlq, "")
	seedDLQ(t, dlq, origin, pulsarEvents(prefix, n))
	planAndApprove(t, dir, src, "--reason", "redrive", "--rate", "0", "--unverified-ok", "--settle", "0s", "--ramp", fmt.Sprint(n))
	if code, out := dlqctlProc(t, dir, nil, "--source", src, "redrive", "apply", "p.json"); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	return dir, origin, src
}
