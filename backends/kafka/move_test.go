package kafkadlq_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/kafka"
	"github.com/dlqctl/dlqctl/envelope"
)

// seedRedrive makes an origin topic (3 partitions) and a DLT holding
// dead letters from it, and returns the DLT's entries.
func seedRedrive(t *testing.T, ctx context.Context) (origin, dlt string, src *kafkadlq.Topic, entries []envelope.Envelope) {
	origin = freshTopic(t, "")
	dlt = origin + ".DLT"
	createTopic(t, ctx, origin, 3, nil)
	createTopic(t, ctx, dlt, 2, nil)
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	recs := []*kgo.Record{
		springDeadLetter(dlt, 0, base.Add(1*time.Second), origin, 2, 100, "k1", "E1", `{"n":1}`, "timeout"),
		springDeadLetter(dlt, 1, base.Add(2*time.Second), origin, 1, 101, "k2", "E2", `{"n":2}`, "timeout"),
		springDeadLetter(dlt, 0, base.Add(3*time.Second), origin, 2, 102, "k1", "E3", `{"n":3}`, "timeout"),
	}
	// One dead letter whose producer named no partition: Kafka Connect
	// style, without the partition header.
	noPart := &kgo.Record{Topic: dlt, Partition: 1, Timestamp: base.Add(4 * time.Second), Key: []byte("order-1"), Value: []byte(`{"n":4}`),
		Headers: []kgo.RecordHeader{{Key: "event_id", Value: []byte("E4")}, {Key: kafkadlq.ConnectTopic, Value: []byte(origin)}}}
	produceManual(t, ctx, append(recs, noPart)...)
	src = openTopic(t, ctx, dlt, kafkadlq.Options{TransactionTimeout: 10 * time.Second})
	entries = scanAll(t, ctx, src, "")
	if len(entries) != 4 {
		t.Fatalf("seeded %d entries", len(entries))
	}
	return origin, dlt, src, entries
}

func itemsOf(es []envelope.Envelope, dest string) []backend.MoveItem {
	var out []backend.MoveItem
	for i, e := range es {
		out = append(out, backend.MoveItem{Seq: int64(i + 1), ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint, Dest: dest})
	}
	return out
}

func TestRedriveTransaction(t *testing.T) {
	ctx := ctxFor(t)
	origin, dlt, src, entries := seedRedrive(t, ctx)
	items := itemsOf(entries, origin)
	// A changed fingerprint and a gone entry are refused per item.
	items = append(items, backend.MoveItem{Seq: 9, ID: "0:77", EventID: "X", Fingerprint: "sha256:00", Dest: origin})
	items[1].Fingerprint = "sha256:not-it"
	res, err := src.Publish(ctx, items, backend.Markers{RunID: "run-ok"})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[1].Err, backend.ErrChanged) || !errors.Is(res[4].Err, backend.ErrNotFound) {
		t.Fatalf("per-item errors: %v / %v", res[1].Err, res[4].Err)
	}
	for _, i := range []int{0, 2, 3} {
		if res[i].Err != nil || !res[i].Removed || res[i].DestID == "" {
			t.Fatalf("item %d: %+v", i, res[i])
		}
	}
	out := readCommitted(t, ctx, origin)
	if len(out) != 3 {
		t.Fatalf("origin holds %d records", len(out))
	}
	byEvent := map[string]*kgo.Record{}
	for _, r := range out {
		v, _ := header(r, "event_id")
		byEvent[v] = r
	}
	e1, e3, e4 := byEvent["E1"], byEvent["E3"], byEvent["E4"]
	if e1 == nil || e3 == nil || e4 == nil {
		t.Fatalf("origin events %v", byEvent)
	}
	// The original partition from the header; per-key order kept.
	if e1.Partition != 2 || e3.Partition != 2 || e1.Offset > e3.Offset {
		t.Fatalf("E1 %d:%d E3 %d:%d", e1.Partition, e1.Offset, e3.Partition, e3.Offset)
	}
	// No partition header: the Java default partitioner's choice for
	// "order-1" over 3 partitions is 1.
	if e4.Partition != 1 {
		t.Fatalf("E4 on partition %d, want 1", e4.Partition)
	}
	if string(e1.Key) != "k1" || string(e1.Value) != `{"n":1}` {
		t.Fatalf("E1 key %q value %q", e1.Key, e1.Value)
	}
	for _, h := range e1.Headers {
		if kafkadlq.DeadLetterHeader(h.Key) {
			t.Fatalf("dead-letter header %s went to the origin", h.Key)
		}
	}
	if v, _ := header(e1, "traceparent"); v != "00-abc-def-01" {
		t.Fatalf("original header lost: %v", e1.Headers)
	}
	if v, _ := header(e1, backend.MarkerRunID); v != "run-ok" {
		t.Fatalf("run marker %q", v)
	}
	if v, _ := header(e1, "redrive_count"); v != "1" {
		t.Fatalf("redrive_count %q", v)
	}
	if res[0].DestID != kafkadlq.KafkaID(e1.Partition, e1.Offset) {
		t.Fatalf("DestID %s, record at %d:%d", res[0].DestID, e1.Partition, e1.Offset)
	}
	// The moved entries are gone from the DLQ; E2 stays.
	left := scanAll(t, ctx, src, "")
	if len(left) != 1 || left[0].EventID != "E2" {
		t.Fatalf("left in the DLQ: %s", ids(left))
	}
	if _, err := src.Get(ctx, entries[0].ID); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get of a redriven entry: %v", err)
	}
	if n, err := src.Len(ctx); err != nil || n != 1 {
		t.Fatalf("Len %d %v", n, err)
	}
	// A second publish of the same entries sends nothing.
	res, err = src.Publish(ctx, itemsOf(entries[:1], origin), backend.Markers{RunID: "run-ok"})
	if err != nil || !errors.Is(res[0].Err, backend.ErrNotFound) {
		t.Fatalf("again: %+v %v", res, err)
	}
	if n := len(readCommitted(t, ctx, origin)); n != 3 {
		t.Fatalf("origin holds %d after a repeat", n)
	}
	// The state topic says what happened, keyed by the entry.
	state := readCommitted(t, ctx, dlt+".dlqctl-state")
	found := false
	for _, r := range state {
		if string(r.Key) == entries[0].ID {
			var v map[string]any
			if err := json.Unmarshal(r.Value, &v); err != nil || v["status"] != "redriven" || v["run_id"] != "run-ok" || v["dest_id"] != res[0].DestID && v["dest_id"] == "" {
				t.Fatalf("state record %s: %v", r.Value, err)
			}
			found = true
		}
	}
	if !found {
		t.Fatal("no state record for the first entry")
	}
	cfg, err := kadm.NewClient(rawClient(t)).DescribeTopicConfigs(ctx, dlt+".dlqctl-state")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := cfg.On(dlt+".dlqctl-state", nil)
	kept := 0
	for _, c := range rc.Configs {
		if c.Value != nil && (c.Key == "cleanup.policy" && *c.Value == "delete" || c.Key == "retention.ms" && *c.Value == "-1") {
			kept++
		}
	}
	if kept != 2 {
		t.Fatal("the state topic does not keep every record (cleanup.policy=delete, retention.ms=-1)")
	}
}

// TestCrashedTransactionFenced: a run's producer that dies inside its
// transaction (records produced to the origin and the state topic, no
// commit) leaves nothing a read_committed consumer sees; the resume's
// producer, with the same transactional ID, fences it at once, and the
// origin then holds each event exactly once.
func TestCrashedTransactionFenced(t *testing.T) {
	broker := kafkaServer(t)
	ctx := ctxFor(t)
	origin, dlt, src, entries := seedRedrive(t, ctx)
	const run = "run-crash"
	dead, err := kgo.NewClient(kgo.SeedBrokers(broker.Bootstrap()), kgo.TransactionalID(kafkadlq.TransactionalID(dlt)),
		kgo.TransactionTimeout(60*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	crashRecs := []*kgo.Record{
		{Topic: origin, Partition: 2, Key: []byte("k1"), Value: []byte(`{"n":1}`), Headers: []kgo.RecordHeader{{Key: "event_id", Value: []byte("E1")}}},
		{Topic: dlt + ".dlqctl-state", Partition: 0, Key: []byte(entries[0].ID), Value: []byte(`{"status":"redriven","run_id":"run-crash"}`)},
	}
	// The state topic must exist for the dead producer to write to it.
	if _, err := src.Remove(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := dead.ProduceSync(ctx, crashRecs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// kill -9: the client is abandoned, never committed nor closed. The
	// resume takes the lease, which fences it.
	start := time.Now()
	resume := openTopic(t, ctx, dlt, kafkadlq.Options{TransactionTimeout: 10 * time.Second})
	l, err := resume.Lease(ctx, backend.LeaseHolder{RunID: run, PID: deadPID(t), Host: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	res, err := resume.Publish(ctx, itemsOf(entries, origin), backend.Markers{RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatalf("the resume waited %s: the crashed transaction was not fenced", time.Since(start))
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("item %d: %v", i, r.Err)
		}
	}
	count := map[string]int{}
	for _, r := range readCommitted(t, ctx, origin) {
		v, _ := header(r, "event_id")
		count[v]++
	}
	for _, e := range []string{"E1", "E2", "E3", "E4"} {
		if count[e] != 1 {
			t.Fatalf("origin holds %v, want each event once", count)
		}
	}
	// The fenced producer can no longer commit.
	if err := dead.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the crashed producer committed after being fenced")
	}
	dead.Close()
	if n := len(readCommitted(t, ctx, origin)); n != 4 {
		t.Fatalf("origin holds %d records after the fenced commit attempt", n)
	}
}

// TestStaleBelowLogStart: entries that retention (here DeleteRecords)
// removed are not found, so a plan made before is stale and a move skips
// them.
func TestStaleBelowLogStart(t *testing.T) {
	ctx := ctxFor(t)
	origin, dlt, src, entries := seedRedrive(t, ctx)
	// Read it once first, so the read-ahead window holds it: retention
	// still wins over what was fetched before.
	if _, err := src.Get(ctx, "0:0"); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(rawClient(t))
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: dlt, Partition: 0, At: 1})
	if _, err := adm.DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	var gone envelope.Envelope
	for _, e := range entries {
		if e.ID == "0:0" {
			gone = e
		}
	}
	if _, err := src.Get(ctx, "0:0"); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get below log start: %v", err)
	}
	res, err := src.Publish(ctx, itemsOf([]envelope.Envelope{gone}, origin), backend.Markers{RunID: "run-stale"})
	if err != nil || !errors.Is(res[0].Err, backend.ErrNotFound) {
		t.Fatalf("publish of an expired entry: %+v %v", res, err)
	}
	if n := len(readCommitted(t, ctx, origin)); n != 0 {
		t.Fatalf("origin holds %d", n)
	}
	if left := scanAll(t, ctx, src, ""); len(left) != 3 {
		t.Fatalf("scan after deletion: %s", ids(left))
	}
}

func TestResolve(t *testing.T) {
	ctx := ctxFor(t)
	origin, _, src, entries := seedRedrive(t, ctx)
	res, err := src.Remove(ctx, append(itemsOf(entries[:2], ""), backend.MoveItem{ID: "1:99"}))
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Removed || !res[1].Removed || !errors.Is(res[2].Err, backend.ErrNotFound) {
		t.Fatalf("%+v", res)
	}
	if left := scanAll(t, ctx, src, ""); len(left) != 2 {
		t.Fatalf("left %s", ids(left))
	}
	if res, _ := src.Remove(ctx, itemsOf(entries[:1], "")); !errors.Is(res[0].Err, backend.ErrNotFound) {
		t.Fatalf("second resolve: %+v", res)
	}
	if n := len(readCommitted(t, ctx, origin)); n != 0 {
		t.Fatalf("resolve published %d records", n)
	}
}

func TestExtras(t *testing.T) {
	ctx := ctxFor(t)
	origin := freshTopic(t, "")
	dlt := origin + ".DLT"
	createTopic(t, ctx, origin, 1, nil)
	day := "86400000"
	createTopic(t, ctx, dlt, 2, map[string]*string{"retention.ms": &day})
	old := time.Now().Add(-23*time.Hour - 30*time.Minute)
	produceManual(t, ctx,
		springDeadLetter(dlt, 0, old, origin, 0, 1, "k", "E1", `{}`, "timeout"),
		springDeadLetter(dlt, 1, time.Now(), origin, 0, 2, "k", "E2", `{}`, "timeout"),
	)
	// A consumer group of the origin with lag 2.
	produceManual(t, ctx, &kgo.Record{Topic: origin, Value: []byte("a")}, &kgo.Record{Topic: origin, Value: []byte("b")}, &kgo.Record{Topic: origin, Value: []byte("c")})
	adm := kadm.NewClient(rawClient(t))
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: origin, Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "order-workers", commit); err != nil {
		t.Fatal(err)
	}
	src := openTopic(t, ctx, dlt, kafkadlq.Options{})
	x, err := src.Extras(ctx, []string{origin})
	if err != nil {
		t.Fatal(err)
	}
	ke := x.JSON.(kafkadlq.KafkaExtras)
	if len(ke.Partitions) != 2 || ke.Partitions[0].HighWatermark != 1 || ke.Partitions[0].Remaining != 1 || ke.RetentionMs != 86400000 {
		t.Fatalf("extras %+v", ke)
	}
	if len(ke.Warnings) != 1 || !strings.Contains(ke.Warnings[0], "retention") {
		t.Fatalf("warnings %q", ke.Warnings)
	}
	if len(ke.Groups) != 1 || ke.Groups[0].Group != "order-workers" || ke.Groups[0].Lag != 2 {
		t.Fatalf("groups %+v", ke.Groups)
	}
	if len(x.Rows) == 0 || x.Title == "" {
		t.Fatal("no rows")
	}
	// After a scan (as stats runs one), the extras take the oldest remaining
	// records' times from what the scan read, and say the same; a scan that
	// started after the oldest entry gives nothing to take, and still the
	// same is said.
	for _, after := range []string{"", "0:0"} {
		fresh := openTopic(t, ctx, dlt, kafkadlq.Options{})
		scanAll(t, ctx, fresh, after)
		y, err := fresh.Extras(ctx, []string{origin})
		if err != nil {
			t.Fatal(err)
		}
		if got := y.JSON.(kafkadlq.KafkaExtras); got.OldestRemaining != ke.OldestRemaining || len(got.Warnings) != 1 {
			t.Fatalf("after a scan from %q: oldest %q, warnings %q; without: %q", after, got.OldestRemaining, got.Warnings, ke.OldestRemaining)
		}
	}
}

// TestStateCacheSeesOtherWriters: a Topic that has read the state topic
// once (and keeps it) still sees what another process — another Topic —
// redrove or resolved since, in Get, Scan and Len.
func TestStateCacheSeesOtherWriters(t *testing.T) {
	ctx := ctxFor(t)
	origin, dlt, src, entries := seedRedrive(t, ctx)
	if _, err := src.Get(ctx, entries[0].ID); err != nil {
		t.Fatal(err)
	}
	other := openTopic(t, ctx, dlt, kafkadlq.Options{TransactionTimeout: 10 * time.Second})
	if res, err := other.Remove(ctx, itemsOf(entries[:1], "")); err != nil || !res[0].Removed {
		t.Fatalf("resolve from another Topic: %+v %v", res, err)
	}
	if res, err := other.Publish(ctx, itemsOf(entries[1:2], origin), backend.Markers{RunID: "run-other"}); err != nil || !res[0].Removed {
		t.Fatalf("redrive from another Topic: %+v %v", res, err)
	}
	for _, e := range entries[:2] {
		if _, err := src.Get(ctx, e.ID); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Get %s after another Topic took it out: %v", e.ID, err)
		}
	}
	if left := scanAll(t, ctx, src, ""); len(left) != 2 || left[0].ID != entries[2].ID {
		t.Fatalf("left %s", ids(left))
	}
	if n, err := src.Len(ctx); err != nil || n != 2 {
		t.Fatalf("Len = %d, %v", n, err)
	}
	// And a second resolve through the first Topic is refused: it knows.
	if res, _ := src.Remove(ctx, itemsOf(entries[:1], "")); !errors.Is(res[0].Err, backend.ErrNotFound) {
		t.Fatalf("resolve again: %+v", res)
	}
}

// TestGoneNamesTheRun: an entry another run moved is not found, and the
// refusal names that run and where the entry went, so that a journal
// that never saw the move says who made it; the state topic tells a
// resume which gone entries its own run moved.
func TestGoneNamesTheRun(t *testing.T) {
	ctx := ctxFor(t)
	origin, _, src, entries := seedRedrive(t, ctx)
	items := itemsOf(entries[:2], origin)
	if res, err := src.Publish(ctx, items[:1], backend.Markers{RunID: "run-loser"}); err != nil || res[0].Err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if res, err := src.Remove(ctx, items[1:]); err != nil || res[0].Err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	res, err := src.Publish(ctx, items, backend.Markers{RunID: "run-winner"})
	if err != nil {
		t.Fatal(err)
	}
	if e := res[0].Err; !errors.Is(e, backend.ErrNotFound) || !strings.Contains(e.Error(), "run run-loser redrove it to "+origin) {
		t.Fatalf("entry moved by another run: %v", e)
	}
	if e := res[1].Err; !errors.Is(e, backend.ErrNotFound) || !strings.Contains(e.Error(), "resolved it") {
		t.Fatalf("entry resolved: %v", e)
	}
	queries := []backend.PublishedQuery{{Item: items[0]}, {Item: items[1]}, {Item: itemsOf(entries[2:3], origin)[0]}}
	got, err := src.CheckPublished(ctx, queries, backend.Markers{RunID: "run-loser"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []backend.Presence{backend.PresenceFound, backend.PresenceAbsent, backend.PresenceAbsent}; !slices.Equal(got, want) {
		t.Fatalf("CheckPublished for run-loser = %v, want %v", got, want)
	}
	if got, err := src.CheckPublished(ctx, queries[:1], backend.Markers{RunID: "run-winner"}); err != nil || got[0] != backend.PresenceAbsent {
		t.Fatalf("CheckPublished for another run = %v %v", got, err)
	}
}

// TestIdleReadKeepsOnlyWhatCame: a point read that goes idle before the
// end of its range takes the rest for removed, but leaves in the cache
// only the offsets its fetches covered, so that a later read of the rest
// asks the broker again. (Partition 0 of the seeded DLT holds offsets 0
// and 1; the read asks up to 5.)
func TestIdleReadKeepsOnlyWhatCame(t *testing.T) {
	ctx := ctxFor(t)
	_, _, src, _ := seedRedrive(t, ctx)
	from, to, err := src.ReadWindow(ctx, 0, 0, 5, 5)
	if err != nil {
		t.Fatal(err)
	}
	if from != 0 || to != 2 {
		t.Errorf("cached window [%d, %d), want [0, 2): what an idle read did not see is not known", from, to)
	}
}

// TestMoveLooksAgainAtAMissingRecord: a read that went idle while the
// broker restarted gives a window that claims offsets it never read. A
// move (or a resume's Get) served from it found no record and took the
// entry for gone, so a run completed with the entry still in the DLQ; they
// must look again. (Such a window is no longer cached for later reads,
// TestIdleReadKeepsOnlyWhatCame, but the read's own caller still gets it.)
func TestMoveLooksAgainAtAMissingRecord(t *testing.T) {
	ctx := ctxFor(t)
	origin, _, src, entries := seedRedrive(t, ctx)
	// A resume asks Get whether an entry whose move it journaled is
	// still in the DLQ: not found reads as "the atomic move completed".
	for _, e := range entries {
		src.EmptyWindow(0, 0, 10)
		if _, err := src.Get(ctx, e.ID); err != nil {
			t.Errorf("Get %s: %v, though the DLQ holds it", e.ID, err)
		}
	}
	src.EmptyWindow(0, 0, 10)
	res, err := src.Publish(ctx, itemsOf(entries, origin), backend.Markers{RunID: "run-missing"})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || !r.Removed {
			t.Errorf("entry %s: %+v: skipped as gone though the DLQ holds it", entries[i].ID, r)
		}
	}
	if out := readCommitted(t, ctx, origin); len(out) != len(entries) {
		t.Errorf("origin holds %d records, want %d", len(out), len(entries))
	}
}
