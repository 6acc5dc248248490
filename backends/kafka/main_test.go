package kafkadlq_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backends/kafka"
	"github.com/dlqctl/dlqctl/backends/kafka/kafkatest"
)

// shared is the one Kafka broker of this test binary, started by the
// first test that needs it (kafkaServer); tests keep apart by topic name.
// The tests that need no broker (decoders, URLs, binary layout) run
// without one, in the -short tier too.
var shared = kafkatest.Shared()

// kafkaServer is the package's broker for a test that needs one: it skips
// the test under -short (the fast tier starts no Java server) and fails it
// when the broker cannot start.
func kafkaServer(t testing.TB) *kafkatest.Broker {
	t.Helper()
	return shared.Get(t)
}

func TestMain(m *testing.M) {
	os.Exit(shared.Finish(m.Run(), os.Stderr))
}

var topicSeq atomic.Int64

// freshTopic is a new topic name for this test.
func freshTopic(t *testing.T, suffix string) string {
	name := strings.NewReplacer("/", "-", "_", "-", " ", "-").Replace(strings.ToLower(t.Name()))
	return fmt.Sprintf("%s-%d-%d%s", name, time.Now().UnixNano()%1e6, topicSeq.Add(1), suffix)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// rawClient is a plain franz-go client on the test broker.
func rawClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kafkaServer(t).Bootstrap())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, ctx context.Context, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(rawClient(t))
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

func be32(n int32) []byte { b := make([]byte, 4); binary.BigEndian.PutUint32(b, uint32(n)); return b }
func be64(n int64) []byte { b := make([]byte, 8); binary.BigEndian.PutUint64(b, uint64(n)); return b }

// springDeadLetter is a record as Spring Kafka's
// DeadLetterPublishingRecoverer writes it to the DLT: the original's key,
// value and headers, then the kafka_dlt-* headers.
func springDeadLetter(dlt string, partition int32, ts time.Time, origin string, origPartition int32, origOffset int64, key, eventID, value, errMsg string) *kgo.Record {
	r := &kgo.Record{
		Topic: dlt, Partition: partition, Timestamp: ts, Value: []byte(value),
		Headers: []kgo.RecordHeader{
			{Key: "event_id", Value: []byte(eventID)},
			{Key: "traceparent", Value: []byte("00-abc-def-01")},
			{Key: kafkadlq.SpringOriginalTopic, Value: []byte(origin)},
			{Key: kafkadlq.SpringOriginalPartition, Value: be32(origPartition)},
			{Key: kafkadlq.SpringOriginalOffset, Value: be64(origOffset)},
			{Key: kafkadlq.SpringOriginalTimestamp, Value: be64(ts.Add(-time.Minute).UnixMilli())},
			{Key: kafkadlq.SpringOriginalGroup, Value: []byte("workers")},
			{Key: kafkadlq.SpringExceptionFQCN, Value: []byte("org.springframework.kafka.listener.ListenerExecutionFailedException")},
			{Key: kafkadlq.SpringExceptionMessage, Value: []byte(errMsg)},
		},
	}
	if key != "" {
		r.Key = []byte(key)
	}
	return r
}

// produceManual writes records to the partitions they name.
func produceManual(t *testing.T, ctx context.Context, recs ...*kgo.Record) {
	t.Helper()
	cl := rawClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func openTopic(t *testing.T, ctx context.Context, dlt string, opts kafkadlq.Options) *kafkadlq.Topic {
	t.Helper()
	src, err := kafkadlq.Open(ctx, "kafka://"+kafkaServer(t).Bootstrap()+"?topic="+dlt, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// readCommitted returns every record of topic as a read_committed
// consumer sees it, reading until each partition's last stable offset.
func readCommitted(t *testing.T, ctx context.Context, topic string) []*kgo.Record {
	t.Helper()
	adm := kadm.NewClient(rawClient(t))
	// A commit's markers reach the partitions a moment after the commit
	// returns: wait until no transaction is open.
	var ends kadm.ListedOffsets
	for deadline := time.Now().Add(30 * time.Second); ; {
		var err error
		ends, err = adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		hw, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		open := false
		ends.Each(func(o kadm.ListedOffset) {
			if h, ok := hw.Lookup(topic, o.Partition); ok && h.Offset != o.Offset {
				open = true
			}
		})
		if !open || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			parts[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl := rawClient(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	var out []*kgo.Record
	for len(want) > 0 {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if pctx.Err() != nil && fs.NumRecords() == 0 {
			t.Fatalf("read %s: timed out with %v left", topic, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok {
				return
			}
			if !r.Attrs.IsControl() && r.Offset < end {
				out = append(out, r)
			}
			if r.Offset >= end-1 {
				delete(want, r.Partition)
			}
		})
	}
	return out
}

func header(r *kgo.Record, k string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value), true
		}
	}
	return "", false
}
