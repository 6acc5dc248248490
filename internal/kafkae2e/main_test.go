package kafkae2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/kafka"
	"github.com/dlqctl/dlqctl/backends/kafka/kafkatest"
	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/internal/crashhook"
	"github.com/dlqctl/dlqctl/internal/testproc"
)

// shared is the run's one Kafka broker, started by the first test that
// needs it (kafkaServer).
var shared = &testproc.Shared[*kafkatest.Broker]{Server: "an Apache Kafka broker", Start: func() (*kafkatest.Broker, error) {
	b, err := kafkatest.StartProcess()
	broker = b // once, inside the Shared's sync.Once: every Get sees it
	return b, err
}}

// broker is shared's broker once a test has asked for it through
// kafkaServer (seedSpringDLT does), for the helpers that take no t.
var broker *kafkatest.Broker

// kafkaServer is the run's broker for a test that needs one: it skips the
// test under -short (the fast tier starts no Java server) and fails it
// when the broker cannot start.
func kafkaServer(t testing.TB) *kafkatest.Broker {
	t.Helper()
	return shared.Get(t)
}

// TestMain makes this test binary also the dlqctl command (testscript puts
// it on PATH as "dlqctl"), with the crash hook of DLQCTL_TEST_CRASH.
func TestMain(m *testing.M) {
	testscript.Main(withKafka{m}, map[string]func(){
		"dlqctl": func() {
			f := &cmd.Factory{Deps: cmd.Deps{IO: cmd.SystemIO(), Now: time.Now, Getenv: os.Getenv, Build: cmd.BuildInfo{Version: "test"},
				Backends:  backend.NewRegistry(kafkadlq.Registration()),
				CrashHook: crashhook.Parse(os.Getenv("DLQCTL_TEST_CRASH"))}}
			os.Exit(cmd.MainWith(f))
		},
	})
}

// withKafka stops the broker, if a test started it, once the tests have
// run.
type withKafka struct{ m *testing.M }

func (w withKafka) Run() int { return shared.Finish(w.m.Run(), os.Stderr) }

var topicSeq atomic.Int64

func freshTopic(t *testing.T) string {
	name := strings.NewReplacer("/", "-", "_", "-", ":", "-", "=", "-").Replace(strings.ToLower(t.Name()))
	return fmt.Sprintf("%s-%d-%d", name, time.Now().UnixNano()%1e6, topicSeq.Add(1))
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kafkaServer(t).Bootstrap())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, ctx context.Context, name string, partitions int32) {
	t.Helper()
	resp, err := kadm.NewClient(client(t)).CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

func be32(n int32) []byte { b := make([]byte, 4); binary.BigEndian.PutUint32(b, uint32(n)); return b }
func be64(n int64) []byte { b := make([]byte, 8); binary.BigEndian.PutUint64(b, uint64(n)); return b }

// seedSpringDLT makes origin (3 partitions) and origin.DLT (2 partitions)
// and writes n dead letters as Spring Kafka's DeadLetterPublishingRecoverer
// does, keys k0…k4 so that entries share keys.
func seedSpringDLT(t *testing.T, ctx context.Context, n int) (origin, dlt string) {
	origin = freshTopic(t)
	dlt = origin + ".DLT"
	createTopic(t, ctx, origin, 3)
	createTopic(t, ctx, dlt, 2)
	cl := client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := 1; i <= n; i++ {
		payload := fmt.Sprintf(`{"order":%d}`, i)
		recs = append(recs, &kgo.Record{
			Topic: dlt, Partition: int32(i % 2), Timestamp: base.Add(time.Duration(i) * time.Second),
			Key: []byte(fmt.Sprintf("k%d", i%5)), Value: []byte(payload),
			Headers: []kgo.RecordHeader{
				{Key: "event_id", Value: []byte(fmt.Sprintf("E%03d", i))},
				{Key: "fingerprint", Value: []byte(envelope.ComputeFingerprint([]byte(payload)))},
				{Key: kafkadlq.SpringOriginalTopic, Value: []byte(origin)},
				{Key: kafkadlq.SpringOriginalPartition, Value: be32(int32(i % 3))},
				{Key: kafkadlq.SpringOriginalOffset, Value: be64(int64(i))},
				{Key: kafkadlq.SpringOriginalTimestamp, Value: be64(base.UnixMilli())},
				{Key: kafkadlq.SpringOriginalGroup, Value: []byte("order-workers")},
				{Key: kafkadlq.SpringExceptionFQCN, Value: []byte("org.springframework.kafka.listener.ListenerExecutionFailedException")},
				{Key: kafkadlq.SpringExceptionMessage, Value: []byte("timeout calling payments")},
			},
		})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return origin, dlt
}

// source is the dlqctl source URL of dlt on the run's broker, which the
// test must have asked for (kafkaServer; seedSpringDLT does).
func source(dlt string, extra string) string {
	if broker == nil {
		panic("kafkae2e: source before any test asked for the broker (kafkaServer)")
	}
	return "kafka://" + broker.Bootstrap() + "?topic=" + dlt + extra
}

// originEvents reads origin read_committed and counts each event ID.
func originEvents(t *testing.T, ctx context.Context, topic string) map[string]int {
	t.Helper()
	adm := kadm.NewClient(client(t))
	var ends kadm.ListedOffsets
	for deadline := time.Now().Add(30 * time.Second); ; {
		var err error
		if ends, err = adm.ListCommittedOffsets(ctx, topic); err != nil {
			t.Fatal(err)
		}
		hw, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		open := false
		ends.Each(func(o kadm.ListedOffset) {
			if h, _ := hw.Lookup(topic, o.Partition); h.Offset != o.Offset {
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
	count := map[string]int{}
	if len(want) == 0 {
		return count
	}
	cl := client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
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
				for _, h := range r.Headers {
					if h.Key == "event_id" {
						count[string(h.Value)]++
					}
				}
			}
			if r.Offset >= end-1 {
				delete(want, r.Partition)
			}
		})
	}
	return count
}

// dlqctl runs the real command and returns its exit code and output.
func dlqctl(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	c := exec.Command("dlqctl", args...)
	c.Dir = dir
	c.Env = append(os.Environ(), append([]string{"DLQCTL_APPROVAL_KEY=kafka-e2e-approval-key-0123456789abcdef"}, env...)...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
		if code == -1 {
			code = 137 // killed by a signal
		}
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}
