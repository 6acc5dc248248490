package kafkadlq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	kafkadlq "github.com/dlqctl/dlqctl/backends/kafka"
	"github.com/dlqctl/dlqctl/backends/kafka/kafkatest"
	"github.com/dlqctl/dlqctl/conformance"
	"github.com/dlqctl/dlqctl/envelope"
)

// suite is the shared conformance suite on this backend; in the child
// processes the suite starts, it makes this test binary dlqctl.
var suite = conformance.For(kafkadlq.Registration())

// TestConformance runs the shared conformance suite on Kafka, against
// its real server.
func TestConformance(t *testing.T) {
	suite.Run(t, func(t *testing.T) *conformance.Target { return kafkaTarget(t, false) })
}

// TestConformanceShare runs the whole suite on a DLT of share-group dead
// letters as a 4.4 broker writes them with copy off: each holds only the
// __dlq.errors.* headers and stands for a record of its origin topic,
// which dlqctl reads back. The seeded envelopes go there in that form:
// the record on the origin, the dead letter on the DLT.
func TestConformanceShare(t *testing.T) {
	suite.Run(t, func(t *testing.T) *conformance.Target { return kafkaTarget(t, true) })
}

// kafkaTarget is the suite's Target on a broker of its own (the battery
// kills it): a DLT of dlqctl-style dead letters, or with share, of share
// groups' header-only dead letters.
func kafkaTarget(t *testing.T, share bool) *conformance.Target {
	b := kafkatest.Start(t)
	n := 0
	// client is a client of the broker for a hook, closed with t.
	client := func(t *testing.T, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Bootstrap())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl, kadm.NewClient(cl)
	}
	// The reference worker takes only what dlqctl put back where the
	// origin also holds the records share-group dead letters stand for.
	consume := ""
	if share {
		consume = "&redriven=1"
	}
	fixture := func(base string) conformance.Fixture {
		return conformance.Fixture{Source: "kafka://" + b.Bootstrap() + "?topic=" + base + "-dlq", Origin: base + "-orders", Self: base + "-dlq",
			Alias: "kafka://" + b.Bootstrap() + "?topic=" + base + "-dlq&state_topic=" + base + "-other-state",
			Consume: []string{"--source", "kafka://" + b.Bootstrap() + "?topic=" + base + "-orders&group=workers" + consume,
				"--dlq", base + "-dlq"}}
	}
	fresh := func(t *testing.T) (conformance.Fixture, string) {
		n++
		base := fmt.Sprintf("conf-%d-%d", time.Now().UnixNano(), n)
		// One partition for the DLQ: records imported within one
		// millisecond keep their import order (dead-letter order
		// merges partitions by timestamp).
		for _, topic := range []string{base + "-dlq", base + "-orders"} {
			if err := kafkatest.CreateTopic(context.Background(), b.Bootstrap(), topic, 1); err != nil {
				t.Fatal(err)
			}
		}
		return fixture(base), base
	}
	tg := &conformance.Target{Down: b.Down, Up: b.Up, Outage: "&timeout=1s", Refuse: func(t *testing.T, _ conformance.Fixture, dest, _ string) {
		// A topic whose records may not exceed 300 bytes: the
		// redriven record, with its headers, does (MESSAGE_TOO_LARGE).
		// At 64 bytes the broker's answer never came and the chunk
		// timed out instead (exit 1, nothing lost): decisions.md.
		_, adm := client(t)
		limit := "300"
		resp, err := adm.CreateTopic(context.Background(), 1, 1, map[string]*string{"max.message.bytes": &limit}, dest)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatal(err)
		}
	}, Missing: func(t *testing.T) string {
		return "kafka://" + b.Bootstrap() + "?topic=conf-typo-" + fmt.Sprint(time.Now().UnixNano())
	}, Fresh: func(t *testing.T) conformance.Fixture {
		fx, _ := fresh(t)
		return fx
	},
		// The broker writes to its log files before it answers; a
		// SIGKILL loses nothing the page cache holds.
		Kill: b.Kill,
		PID:  b.PID,
		Published: func(t *testing.T, fx conformance.Fixture) int {
			// The end offsets: records of an open transaction count.
			_, adm := client(t)
			ends, err := adm.ListEndOffsets(context.Background(), fx.Origin)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			ends.Each(func(o kadm.ListedOffset) { n += int(o.Offset) })
			return n
		},
		Churn: func(t *testing.T, fx conformance.Fixture) {
			churn(t, client, filepath.Join(b.Dir(), "logs"), fx.Self+".dlqctl-state")
		},
		Recreate: func(t *testing.T, fx conformance.Fixture) {
			recreate(t, client, fx.Self)
		},
		Snapshot: func(t *testing.T, fx conformance.Fixture) []string {
			return snapshot(t, client, fx.Self)
		},
		Native: func(t *testing.T, fx conformance.Fixture, e envelope.Envelope, copies int) {
			// As Spring Kafka's DeadLetterPublishingRecoverer writes a
			// dead letter, with the event's own headers, at the dead
			// letter's time: the same record each time.
			cl, _ := client(t)
			var recs []*kgo.Record
			for range copies {
				recs = append(recs, &kgo.Record{Topic: fx.Self, Key: []byte(e.Key), Value: e.Payload, Timestamp: e.DeadLetteredAt,
					Headers: []kgo.RecordHeader{
						{Key: "event_id", Value: []byte(e.EventID)}, {Key: "fingerprint", Value: []byte(e.Fingerprint)},
						{Key: "content_type", Value: []byte(e.ContentType)},
						{Key: kafkadlq.SpringOriginalTopic, Value: []byte(e.Origin.Topic)},
						{Key: kafkadlq.SpringExceptionMessage, Value: []byte(e.LastError)},
					}})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		},
		TwoPointers: func(t *testing.T) (conformance.Fixture, string) {
			fx, _ := fresh(t)
			return shareGroupDeadLetters(t, client, fx), "E901"
		},
		Bookkeeping: func(fx conformance.Fixture) []string { return []string{fx.Self + ".dlqctl-state"} },
		Forge: func(t *testing.T, fx conformance.Fixture, entryID string) {
			forgeState(t, client, fx.Self, entryID)
		},
		NotApplicable: map[string]string{
			"read-only-limited": "a read fetches by offset: no delivery count, no limit",
		},
	}
	if share {
		shareShape(tg, client)
	}
	return tg
}

type clientFunc func(t *testing.T, opts ...kgo.Opt) (*kgo.Client, *kadm.Client)

// recreate deletes topic and makes it again, empty, with one partition;
// the broker deletes a topic in the background and refuses to make it
// again until it is gone.
func recreate(t *testing.T, client clientFunc, topic string) {
	_, adm := client(t)
	ctx := context.Background()
	resp, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		cr, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		if err == nil {
			err = cr.Err
		}
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) || time.Now().After(deadline) {
			t.Fatalf("make %s again: %v", topic, err)
		}
	}
	// The controller answers before every broker's metadata has the new
	// topic: until then a client is told it does not exist.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil && td.Has(topic) && td[topic].Err == nil && len(td[topic].Partitions) > 0 && td[topic].Partitions[0].Leader >= 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s made again, and its metadata does not show it after 30 s: %v", topic, err)
		}
	}
}

// churn applies the broker's housekeeping to topic now, as its own
// policy would in time. dlqctl keeps a state topic uncompacted with no
// retention (cleanup.policy=delete, retention.ms=-1): there the broker
// only rolls segments and deletes nothing, and churn rolls the segment.
// A state topic that is compacted all the same (one dlqctl has not
// written to since someone set it so) is compacted now (compact).
func churn(t *testing.T, client clientFunc, logs, topic string) {
	_, adm := client(t)
	rc, err := adm.DescribeTopicConfigs(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	policy := ""
	for _, kv := range c.Configs {
		if kv.Key == "cleanup.policy" && kv.Value != nil {
			policy = *kv.Value
		}
	}
	if strings.Contains(policy, "compact") {
		compact(t, client, logs, topic)
		return
	}
	roll(t, client, topic, nil)
	t.Logf("%s: cleanup.policy=%s; its segment rolled, and the broker deletes nothing", topic, policy)
}

// roll sets segment.ms on topic to 1 ms with the other configs given, and
// writes one record (a tombstone of a key dlqctl never writes) past it, so
// that the segment before it rolls; it returns that record's offset.
func roll(t *testing.T, client clientFunc, topic string, also []kadm.AlterConfig) int64 {
	ctx := context.Background()
	cl, adm := client(t)
	one := "1"
	resp, err := adm.AlterTopicConfigs(ctx, append([]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: &one}}, also...), topic)
	if err == nil {
		_, err = resp.On(topic, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // past segment.ms: the next append rolls
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("conformance-roll")})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	return res[0].Record.Offset
}

// compact has the broker compact topic now, as its log cleaner does in
// time (once a segment rolls, when enough of it is superseded): segments
// roll at once and are all cleanable, tombstones and transaction markers
// go at once. It waits until the cleaner's checkpoint (in the broker's
// log folder, logs) has passed everything before the record that rolled
// the segment.
func compact(t *testing.T, client clientFunc, logs, topic string) {
	zero, ratio := "0", "0.0001"
	roll := roll(t, client, topic, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "min.cleanable.dirty.ratio", Value: &ratio},
		{Op: kadm.SetConfig, Name: "delete.retention.ms", Value: &zero}, {Op: kadm.SetConfig, Name: "min.compaction.lag.ms", Value: &zero},
	})
	start := time.Now()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		raw, _ := os.ReadFile(filepath.Join(logs, "cleaner-offset-checkpoint"))
		for _, line := range strings.Split(string(raw), "\n") {
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == topic && f[1] == "0" {
				if off, _ := strconv.ParseInt(f[2], 10, 64); off >= roll {
					t.Logf("the broker compacted %s up to offset %d in %s", topic, off, time.Since(start).Round(time.Millisecond))
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker's cleaner did not reach offset %d of %s within 30 s:\n%s", roll, topic, raw)
		}
	}
}

// snapshot is the topic's records in offset order (key, value, headers;
// not the timestamps a twin's producer gave), and every consumer group's
// committed offsets on it. The topic's name is written TOPIC: a twin has
// another.
func snapshot(t *testing.T, client clientFunc, topic string) []string {
	ctx := context.Background()
	_, adm := client(t)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	end := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	cl, _ := client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	want := 0
	for _, e := range end {
		want += int(e)
	}
	var recs []*kgo.Record
	for len(recs) < want {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cl.PollFetches(fctx)
		cancel()
		if err := fs.Err0(); err != nil {
			t.Fatalf("read %s: %v (%d of %d records)", topic, err, len(recs), want)
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
	for _, r := range recs {
		var h strings.Builder
		for _, hd := range r.Headers {
			fmt.Fprintf(&h, " %s=%s", hd.Key, hd.Value)
		}
		lines = append(lines, fmt.Sprintf("%d:%d key=%s%s %s", r.Partition, r.Offset, r.Key, h.String(), r.Value))
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups() {
		offs, err := adm.FetchOffsets(ctx, g)
		if err != nil {
			continue // a share group, or one that went meanwhile
		}
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic {
				lines = append(lines, fmt.Sprintf("group %s partition %d committed %d", g, o.Partition, o.At))
			}
		})
	}
	for i := range lines {
		lines[i] = strings.ReplaceAll(lines[i], topic, "TOPIC")
	}
	return lines
}

// shareGroupDeadLetters writes, as a share group's broker-side dead
// lettering does (KIP-1191: headers only, no key or value), two dead
// letters about one origin record, E901 — two share groups that gave up
// on it — and commits the reference worker's group past that record, so
// that it sees only what a redrive publishes.
func shareGroupDeadLetters(t *testing.T, client clientFunc, fx conformance.Fixture) conformance.Fixture {
	ctx := context.Background()
	cl, adm := client(t)
	orig := &kgo.Record{Topic: fx.Origin, Partition: 0, Key: []byte("k901"), Value: []byte(`{"order":901}`),
		Headers: []kgo.RecordHeader{{Key: "event_id", Value: []byte("E901")}}}
	res := cl.ProduceSync(ctx, orig)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	at := res[0].Record
	var recs []*kgo.Record
	for _, group := range []string{"billing", "shipping"} {
		recs = append(recs, &kgo.Record{Topic: fx.Self, Headers: []kgo.RecordHeader{
			{Key: "__dlq.errors.topic", Value: []byte(fx.Origin)},
			{Key: "__dlq.errors.partition", Value: []byte(strconv.Itoa(int(at.Partition)))},
			{Key: "__dlq.errors.offset", Value: []byte(strconv.FormatInt(at.Offset, 10))},
			{Key: "__dlq.errors.group", Value: []byte(group)},
			{Key: "__dlq.errors.delivery.count", Value: []byte("5")},
			{Key: "__dlq.errors.message", Value: []byte("timeout calling payments")},
		}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var past kadm.Offsets
	past.AddOffset(fx.Origin, at.Partition, at.Offset+1, -1)
	if err := adm.CommitAllOffsets(ctx, "workers", past); err != nil {
		t.Fatal(err)
	}
	return fx
}

// forgeState writes, with a plain producer, a state record saying that
// the DLT record entryID was redriven: about that very record (its
// topic ID and timestamp, which anyone who can read the DLT knows).
func forgeState(t *testing.T, client clientFunc, topic, entryID string) {
	ctx := context.Background()
	cl, adm := client(t)
	part, off, ok := kafkadlq.ParseKafkaID(entryID)
	if !ok {
		t.Fatalf("%q is not a Kafka locator", entryID)
	}
	md, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	reader, _ := client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().At(off)}}))
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fs := reader.PollFetches(fctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	var ts int64
	fs.EachRecord(func(r *kgo.Record) {
		if r.Offset == off {
			ts = r.Timestamp.UnixMilli()
		}
	})
	state := topic + ".dlqctl-state"
	compact, lag, tsType := "compact", "0", "LogAppendTime"
	cr, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &compact, "min.compaction.lag.ms": &lag,
		"message.timestamp.type": &tsType}, state)
	if err == nil {
		err = cr.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatal(err)
	}
	v, _ := json.Marshal(map[string]any{"status": "redriven", "run_id": "20260101T000000Z-forged00", "seq": 1,
		"dest": strings.TrimSuffix(topic, "-dlq") + "-orders", "at": time.Now().UTC(), "topic_id": md[topic].ID.String(), "record_ts": ts})
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: state, Partition: 0, Key: []byte(entryID), Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
