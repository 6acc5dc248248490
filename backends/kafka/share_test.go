package kafkadlq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/kafka"
	"github.com/dlqctl/dlqctl/backends/kafka/kafkatest"
	"github.com/dlqctl/dlqctl/conformance"
	"github.com/dlqctl/dlqctl/envelope"
)

// shareWorker is the compiled KafkaShareConsumer program, built once per
// test binary.
var shareWorker = sync.OnceValues(kafkatest.NewShareWorker)

// shareFixture is a source topic consumed by a share group whose broker
// dead-letters to dlq: what a real share consumer left there.
type shareFixture struct {
	src, dlq, group string
	acks            []kafkatest.ShareAck
	dead            []*kgo.Record // the dead letters, in DLQ order
}

// makeShareDeadLetters produces values to a new source topic (one
// partition), lets Apache Kafka's share consumer reject those containing
// "poison" and release those containing "flaky" until the delivery limit
// (2) archives them, and waits for the broker's dead letters. It runs
// beside another, so it returns its error rather than failing t.
func makeShareDeadLetters(ctx context.Context, t *testing.T, bootstrap string, copyRecord bool, values ...string) (shareFixture, error) {
	w, err := shareWorker()
	if err != nil {
		return shareFixture{}, err
	}
	f := shareFixture{src: freshTopic(t, fmt.Sprintf("-copy-%t", copyRecord))}
	f.dlq, f.group = "dlq."+f.src, f.src+"-workers"
	if err := kafkatest.CreateTopic(ctx, bootstrap, f.src, 1); err != nil {
		return f, err
	}
	cfg := kafkatest.ShareDLQ{Topic: f.dlq, Copy: copyRecord, DeliveryLimit: 2}
	if !copyRecord {
		// dlqctl dlq init sets this group's DLQ up (dlq.GROUP), twice:
		// the second finds it done.
		f.dlq, cfg.Topic = "dlq."+f.group, ""
		for i, want := range []bool{true, false} {
			res, err := kafkadlq.Registration().InitDLQ(ctx, "kafka://"+bootstrap+"?group="+f.group, backend.OpenOptions{}, false)
			if err != nil {
				return f, err
			}
			if res.Created != want || res.Stream != f.dlq || res.Source != "kafka://"+bootstrap+"?topic="+f.dlq {
				return f, fmt.Errorf("dlq init #%d: %+v, want created=%t of %s", i+1, res, want, f.dlq)
			}
		}
	}
	if err := kafkatest.ConfigureShareGroup(ctx, bootstrap, f.group, cfg); err != nil {
		return f, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(f.dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return f, err
	}
	defer cl.Close()
	var recs []*kgo.Record
	wantDead := 0
	for i, v := range values {
		recs = append(recs, &kgo.Record{Topic: f.src, Key: []byte("k" + v), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "event_id", Value: []byte(fmt.Sprintf("%s-%d", f.src, i))}}})
		if strings.Contains(v, "poison") || strings.Contains(v, "flaky") {
			wantDead++
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return f, err
	}
	f.acks, err = w.Consume(ctx, kafkatest.ShareRun{Bootstrap: bootstrap, Group: f.group, Topic: f.src,
		Reject: []string{"poison"}, Release: []string{"flaky"}, Idle: 3 * time.Second, Max: time.Minute})
	if err != nil {
		return f, err
	}
	// The broker writes dead letters a moment after the acknowledgement.
	deadline := time.Now().Add(30 * time.Second)
	for len(f.dead) < wantDead && time.Now().Before(deadline) {
		pctx, cancel := context.WithDeadline(ctx, deadline)
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { f.dead = append(f.dead, r) })
		cancel()
	}
	if len(f.dead) < wantDead {
		return f, fmt.Errorf("%s: %d dead letters after 30s, want %d", f.dlq, len(f.dead), wantDead)
	}
	return f, nil
}

// shareOnce is the package's share-group dead letters, copy off and on,
// made once (two share consumers at a time) for every test that reads them.
var shareOnce struct {
	sync.Mutex
	off, on, twice *shareFixture
}

// shareFixtures returns the dead letters a real share consumer left with
// copy off and with copy on: in each, "poison-2" was rejected (delivery
// count 1) and "flaky-3" released until the limit of 2.
func shareFixtures(t *testing.T) (off, on shareFixture) {
	t.Helper()
	makeShareFixtures(t)
	return *shareOnce.off, *shareOnce.on
}

// shareTwiceFixture returns a third group's dead letters, copy off: its
// consumer rejected "poison-0", the only record of its source.
func shareTwiceFixture(t *testing.T) shareFixture {
	t.Helper()
	makeShareFixtures(t)
	return *shareOnce.twice
}

// makeShareFixtures makes the package's share-group dead letters, three
// share consumers at a time, once.
func makeShareFixtures(t *testing.T) {
	t.Helper()
	shareOnce.Lock()
	defer shareOnce.Unlock()
	if shareOnce.off == nil {
		bootstrap := kafkaServer(t).Bootstrap() // here: under -short it skips the test
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		var fs [3]shareFixture
		var errs [3]error
		for i, cp := range []bool{false, true, false} {
			values := []string{"ok-1", "poison-2", "flaky-3", "ok-4"}
			if i == 2 {
				values = []string{"poison-0"}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				fs[i], errs[i] = makeShareDeadLetters(ctx, t, bootstrap, cp, values...)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		shareOnce.off, shareOnce.on, shareOnce.twice = &fs[0], &fs[1], &fs[2]
	}
}

// TestShareGroupDeadLetters runs on dead letters that the 4.4 broker wrote
// for a real share consumer, with copy off and on: they decode, their
// payloads come back from the source records, a redrive puts one back
// where the share group takes it once, and entries whose source retention
// or a deleted topic took say so (last: it deletes).
func TestShareGroupDeadLetters(t *testing.T) {
	ctx := ctxFor(t)
	off, on := shareFixtures(t)
	fixtures := []shareFixture{off, on}
	t.Run("decode", func(t *testing.T) {
		for _, f := range fixtures {
			if len(f.dead) != 2 {
				t.Fatalf("%s: %d dead letters, want 2", f.dlq, len(f.dead))
			}
			want := []struct {
				offset   int64
				attempts int
				err      string
			}{{1, 1, "Offset rejected by client."}, {2, 2, "Offset delivery count exceeded the threshold."}}
			for i, r := range f.dead {
				e := kafkadlq.FromKafka(kafkaRecordOf(r), envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
				if e.Origin.Topic != f.src || e.Origin.Subscription != f.group || e.Attempts != want[i].attempts || e.LastError != want[i].err {
					t.Errorf("%s %d: origin %+v attempts %d error %q, want %s/%s %d %q", f.dlq, r.Offset, e.Origin, e.Attempts, e.LastError,
						f.src, f.group, want[i].attempts, want[i].err)
				}
				o, err := kafkadlq.OriginOf(kafkaRecordOf(r).Headers)
				if err != nil || o.Partition != 0 || o.Offset != want[i].offset {
					t.Errorf("%s %d: OriginOf = %+v, %v; want offset %d", f.dlq, r.Offset, o, err, want[i].offset)
				}
			}
		}
	})
	t.Run("payload from the source", func(t *testing.T) {
		for _, f := range fixtures {
			es := scanAll(t, ctx, openTopic(t, ctx, f.dlq, kafkadlq.Options{}), "")
			if len(es) != 2 {
				t.Fatalf("%s: %d entries, want 2", f.dlq, len(es))
			}
			for i, v := range []string{"poison-2", "flaky-3"} {
				e := es[i]
				if e.Malformed != "" || e.EventID != fmt.Sprintf("%s-%d", f.src, i+1) || e.Key != "k"+v || string(e.Payload) != v ||
					e.Fingerprint == "" || e.Origin.Topic != f.src {
					t.Errorf("%s %s: %+v", f.dlq, e.ID, e)
				}
				if e.DeadLetteredAt != f.dead[i].Timestamp.UTC() {
					t.Errorf("%s %s: dead_lettered_at %s, want the dead letter's time %s", f.dlq, e.ID, e.DeadLetteredAt, f.dead[i].Timestamp.UTC())
				}
			}
		}
	})
	t.Run("redrive", func(t *testing.T) {
		// The header-only dead letter of the released record goes back to
		// its source partition, rebuilt; the share group, its consumer
		// fixed, takes it once.
		src := openTopic(t, ctx, off.dlq, kafkadlq.Options{})
		es := scanAll(t, ctx, src, "")
		res, err := src.Publish(ctx, itemsOf(es[1:], off.src), backend.Markers{RunID: "share-redrive"})
		if err != nil || len(res) != 1 || res[0].Err != nil || !res[0].Removed {
			t.Fatalf("publish: %+v %v", res, err)
		}
		acks := shareAccept(t, ctx, off)
		if len(acks) != 1 || acks[0].Action != "ACCEPT" || acks[0].EventID != es[1].EventID || acks[0].Value != "flaky-3" ||
			acks[0].Partition != 0 || acks[0].Offset != 4 || acks[0].DeliveryCount != 1 {
			t.Fatalf("the share group took %+v, want %s once, at offset 4", acks, es[1].EventID)
		}
		if left := scanAll(t, ctx, openTopic(t, ctx, off.dlq, kafkadlq.Options{}), ""); len(left) != 1 || left[0].ID != es[0].ID {
			t.Fatalf("left in the DLQ: %+v", left)
		}
	})
	t.Run("duplicates", func(t *testing.T) {
		// Two more dead letters of the released record, as a broker that
		// retried its write leaves them: one move, in a chunk and across.
		var again []*kgo.Record
		for range 2 {
			again = append(again, &kgo.Record{Topic: on.dlq, Key: on.dead[1].Key, Value: on.dead[1].Value, Headers: on.dead[1].Headers})
		}
		produceManual(t, ctx, again...)
		src := openTopic(t, ctx, on.dlq, kafkadlq.Options{})
		es := scanAll(t, ctx, src, "")
		if len(es) != 4 || es[3].EventID != es[1].EventID || es[3].Malformed != "" {
			t.Fatalf("entries: %+v", es)
		}
		items := itemsOf(es, on.src)
		res, err := src.Publish(ctx, []backend.MoveItem{items[1], items[2]}, backend.Markers{RunID: "share-dup"})
		if err != nil || res[0].Err != nil || !errors.Is(res[1].Err, backend.ErrSameMessage) || !errors.Is(res[1].Err, backend.ErrNotFound) {
			t.Fatalf("publish in one chunk: %+v %v", res, err)
		}
		res, err = src.Publish(ctx, items[3:], backend.Markers{RunID: "share-dup"})
		if err != nil || !errors.Is(res[0].Err, backend.ErrSameMessage) || !strings.Contains(res[0].Err.Error(), "which the entry "+es[1].ID+" moved") {
			t.Fatalf("publish in a later chunk: %+v %v", res, err)
		}
		n := 0
		for _, r := range readCommitted(t, ctx, on.src) {
			if id, _ := header(r, "event_id"); id == es[1].EventID {
				n++
			}
		}
		if n != 2 {
			t.Errorf("the source holds %s %d times, want 2: the original and one record put back for three dead letters", es[1].EventID, n)
		}
		if left := scanAll(t, ctx, openTopic(t, ctx, on.dlq, kafkadlq.Options{}), ""); len(left) != 1 || left[0].ID != es[0].ID {
			t.Fatalf("left in the DLQ: %+v", left)
		}
	})
	t.Run("doctor", func(t *testing.T) {
		checks := openTopic(t, ctx, off.dlq, kafkadlq.Options{}).DoctorChecks(ctx)
		if len(checks) != 1 || checks[0].Name != "share group "+off.group || !checks[0].OK ||
			!strings.Contains(checks[0].Detail, "copy off") || !strings.Contains(checks[0].Detail, "delivery limit 2") {
			t.Fatalf("copy off: %+v", checks)
		}
		hour := "3600000"
		if _, err := kadm.NewClient(rawClient(t)).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &hour}}, off.src); err != nil {
			t.Fatal(err)
		}
		checks = openTopic(t, ctx, off.dlq, kafkadlq.Options{}).DoctorChecks(ctx)
		if len(checks) != 1 || checks[0].OK || !strings.Contains(checks[0].Detail, off.src+" keeps records for 1h0m0s") ||
			!strings.Contains(checks[0].Fix, "errors.deadletterqueue.copy.record.enable=true") {
			t.Fatalf("copy off, retention 1h: %+v", checks)
		}
		checks = openTopic(t, ctx, on.dlq, kafkadlq.Options{}).DoctorChecks(ctx)
		if len(checks) != 1 || !checks[0].OK || !strings.Contains(checks[0].Detail, "copy on") {
			t.Fatalf("copy on: %+v", checks)
		}
	})
	t.Run("check retention", func(t *testing.T) {
		// The doctor case gave the source topic retention.ms of 1h: the
		// copy-off DLQ's oldest header-only entry (poison-2, offset 1) is
		// redrivable for less than an hour more.
		code, doc, out := shareCheck(t, off.dlq, "--max-source-gone", "0", "--min-source-retention", "2h")
		if code != 4 || len(doc.Violations) != 1 || doc.Violations[0].Rule != "min-source-retention" || doc.Violations[0].Limit != 7200 ||
			doc.Violations[0].Actual > 3600 || doc.Violations[0].Actual < 3000 || doc.SourceGone != 0 {
			t.Fatalf("check: exit %d, want 4 with min-source-retention under 1h\n%s", code, out)
		}
		r := doc.SourceRetention
		if len(r) != 1 || r[0].Source != off.src+"/0" || r[0].Oldest != off.src+"/0:1" || r[0].LeftSeconds == nil ||
			!strings.Contains(r[0].Basis, "retention.ms 1h0m0s from the record's timestamp") {
			t.Fatalf("source_retention: %+v", r)
		}
		code, _, out = shareCheck(t, off.dlq, "--min-source-retention", "30m", "-o", "table")
		if code != 0 || !strings.Contains(out, off.src+"/0") || !strings.Contains(out, "left at the soonest (oldest record "+off.src+"/0:1; retention.ms 1h0m0s") {
			t.Fatalf("check within the retention: exit %d, want 0 with a line on the source's retention\n%s", code, out)
		}
	})
	t.Run("source gone", func(t *testing.T) {
		adm := kadm.NewClient(rawClient(t))
		for _, f := range fixtures {
			del := kadm.Offsets{}
			del.Add(kadm.Offset{Topic: f.src, Partition: 0, At: 2})
			if _, err := adm.DeleteRecords(ctx, del); err != nil {
				t.Fatal(err)
			}
		}
		es := scanAll(t, ctx, openTopic(t, ctx, off.dlq, kafkadlq.Options{}), "")
		want := "source gone: offset 1 is below log start 2 of " + off.src + "/0"
		if len(es) != 1 || !strings.Contains(es[0].Malformed, want) {
			t.Fatalf("copy off, offset 1 deleted: %+v", es)
		}
		got, err := openTopic(t, ctx, off.dlq, kafkadlq.Options{}).Get(ctx, es[0].ID)
		if err != nil || !strings.Contains(got.Malformed, want) {
			t.Fatalf("Get: %+v %v", got, err)
		}
		// stats reads lean: the entry counts as malformed there too.
		var lean []envelope.Envelope
		if err := openTopic(t, ctx, off.dlq, kafkadlq.Options{}).ScanLean(ctx, "", func(e envelope.Envelope) error {
			lean = append(lean, e)
			return nil
		}); err != nil || len(lean) != 1 || !strings.Contains(lean[0].Malformed, want) {
			t.Fatalf("lean scan: %+v %v", lean, err)
		}
		code, doc, out := shareCheck(t, off.dlq, "--max-source-gone", "0")
		if code != 4 || len(doc.Violations) != 1 || doc.Violations[0].Rule != "max-source-gone" || doc.Violations[0].Actual != 1 || doc.SourceGone != 1 {
			t.Fatalf("check --max-source-gone 0: exit %d, want 4 with one entry gone\n%s", code, out)
		}
		code, _, out = shareCheck(t, off.dlq, "--max-source-gone", "0", "-o", "openmetrics")
		if code != 4 || !strings.Contains(out, `dlqctl_check_violation{rule="max-source-gone",`) || !strings.Contains(out, "dlqctl_dlq_source_gone{") {
			t.Fatalf("check -o openmetrics: exit %d\n%s", code, out)
		}
		// Copied: the key and value stay, the headers (and the event ID) do not.
		es = scanAll(t, ctx, openTopic(t, ctx, on.dlq, kafkadlq.Options{}), "")
		if len(es) != 1 || string(es[0].Payload) != "poison-2" || strings.Contains(es[0].Malformed, "source gone") ||
			es[0].Properties[kafkadlq.SourceGoneHeader] == "" {
			t.Fatalf("copy on, offset 1 deleted: %+v", es)
		}
		if _, err := adm.DeleteTopics(ctx, off.src); err != nil {
			t.Fatal(err)
		}
		want = "source gone: topic " + off.src + " no longer exists"
		deadline := time.Now().Add(30 * time.Second)
		for {
			es = scanAll(t, ctx, openTopic(t, ctx, off.dlq, kafkadlq.Options{}), "")
			if len(es) == 1 && strings.Contains(es[0].Malformed, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("source topic deleted: %+v", es)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// kafkaRecordOf is r as the decoder takes it.
func kafkaRecordOf(r *kgo.Record) kafkadlq.KafkaRecord {
	out := kafkadlq.KafkaRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, kafkadlq.KafkaHeader{Key: h.Key, Value: h.Value})
	}
	return out
}

// shareCheckDoc is what the share tests read of dlqctl.check/v1.
type shareCheckDoc struct {
	Violations []struct {
		Rule          string
		Limit, Actual int64
	}
	SourceGone      int `json:"source_gone"`
	SourceRetention []struct {
		Source, Oldest, Basis string
		LeftSeconds           *int64 `json:"left_seconds"`
	} `json:"source_retention"`
}

// shareCheck runs dlqctl check on the DLQ dlq with args (-o json unless
// args say otherwise) and returns its exit code, its document when JSON,
// and its output.
func shareCheck(t *testing.T, dlq string, args ...string) (int, shareCheckDoc, string) {
	t.Helper()
	if !slices.Contains(args, "-o") {
		args = append(args, "-o", "json")
	}
	code, out := conformance.RunCommand(t, t.TempDir(), nil, nil,
		append([]string{"--source", "kafka://" + kafkaServer(t).Bootstrap() + "?topic=" + dlq, "check"}, args...)...)
	var doc shareCheckDoc
	if i := strings.Index(out, "{"); i >= 0 && slices.Contains(args, "json") {
		if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&doc); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	return code, doc, out
}

// shareAccept runs f's share group again, its consumer fixed (it accepts
// everything), until it is idle, and returns what it took.
func shareAccept(t *testing.T, ctx context.Context, f shareFixture) []kafkatest.ShareAck {
	t.Helper()
	w, err := shareWorker()
	if err != nil {
		t.Fatal(err)
	}
	acks, err := w.Consume(ctx, kafkatest.ShareRun{Bootstrap: kafkaServer(t).Bootstrap(), Group: f.group, Topic: f.src,
		Idle: 3 * time.Second, Max: 40 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return acks
}
