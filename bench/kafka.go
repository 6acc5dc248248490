package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backends/kafka/kafkatest"
	"github.com/dlqctl/dlqctl/bench/rawkafka"
)

// KafkaStats is the kafka-stats case: a throughput case like pulsar-stats
// on a Spring Kafka dead-letter topic.
type KafkaStats struct {
	T            *Throughput
	Partitions   int32
	BrokerStart  time.Duration
	Produce      time.Duration
	BrokerRaw    []time.Duration
	BrokerDlqctl []time.Duration
	Command      string
}

const kafkaBenchPartitions = 4

func be32(n int32) []byte { b := make([]byte, 4); binary.BigEndian.PutUint32(b, uint32(n)); return b }
func be64(n int64) []byte { b := make([]byte, 8); binary.BigEndian.PutUint64(b, uint64(n)); return b }

// produceKafka writes n generated entries to topic as Spring Kafka's
// DeadLetterPublishingRecoverer would: the original's headers (event_id,
// fingerprint, tenant), then the kafka_dlt-* ones.
func produceKafka(ctx context.Context, bootstrap, topic string, n int, now time.Time) error {
	// A topic just created may be unknown to the broker for a moment:
	// keep retrying rather than fail after the client's default 4 tries.
	// (No RecordDeliveryTimeout: franz-go counts it from the record's
	// timestamp, days old here.)
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(50_000),
		kgo.UnknownTopicRetries(-1))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, kafkaBenchPartitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return err
	}
	g := newGenerator(n, now)
	errc := make(chan error, 1)
	for i := range n {
		e := g.entry(i)
		r := &kgo.Record{Topic: topic, Key: []byte(e.Key), Value: e.Payload, Timestamp: e.DeadLetteredAt,
			Headers: []kgo.RecordHeader{
				{Key: "event_id", Value: []byte(e.EventID)},
				{Key: "fingerprint", Value: []byte(e.Fingerprint)},
				{Key: "tenant", Value: []byte(e.Tenant)},
				{Key: "kafka_dlt-original-topic", Value: []byte(e.OriginStream)},
				{Key: "kafka_dlt-original-partition", Value: be32(int32(i % 6))},
				{Key: "kafka_dlt-original-offset", Value: be64(int64(i))},
				{Key: "kafka_dlt-original-timestamp", Value: be64(e.FirstReceivedAt.UnixMilli())},
				{Key: "kafka_dlt-original-consumer-group", Value: []byte(e.OriginGroup)},
				{Key: "kafka_dlt-exception-fqcn", Value: []byte("org.springframework.kafka.listener.ListenerExecutionFailedException")},
				{Key: "kafka_dlt-exception-message", Value: []byte(e.LastError)},
			}}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	default:
	}
	return nil
}

// startKafka starts the broker of a case and returns it, how long it took
// to be ready, and what stops it.
func (c Config) startKafka(caseName string) (*kafkatest.Broker, time.Duration, func(), error) {
	c.logf("%s: starting a Kafka broker", caseName)
	start := time.Now()
	b, err := kafkatest.StartProcess()
	if err != nil {
		return nil, 0, nil, err
	}
	stop := func() {
		c.logf("%s: stopping the broker", caseName)
		if err := b.Stop(); err != nil {
			c.logf("%s: %v", caseName, err)
		}
	}
	return b, time.Since(start), stop, nil
}

// rawKafkaScan times one pass of rawkafka.ReadLoop in this process.
func rawKafkaScan(ctx context.Context, bootstrap, topic string) (rawRedisResult, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0, start := cpuTime(), time.Now()
	n, err := rawkafka.ReadLoop(ctx, bootstrap, topic)
	wall, cpu := time.Since(start), cpuTime()-cpu0
	runtime.ReadMemStats(&after)
	return rawRedisResult{Wall: wall, CPU: cpu, Count: n, Allocs: after.Mallocs - before.Mallocs, Bytes: after.TotalAlloc - before.TotalAlloc}, err
}

func (c Config) runKafka(ctx context.Context, d *dlqctl, now time.Time, res *Results) error {
	n := c.KafkaN
	b, ready, stop, err := c.startKafka("kafka-stats")
	if err != nil {
		return err
	}
	defer stop()
	ks := &KafkaStats{BrokerStart: ready, Partitions: kafkaBenchPartitions}
	topic := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36) + ".DLT"
	c.logf("kafka-stats: producing %d records to %s", n, topic)
	start := time.Now()
	if err := produceKafka(ctx, b.Bootstrap(), topic, n, now); err != nil {
		return fmt.Errorf("produce: %v", err)
	}
	ks.Produce = time.Since(start)
	source := "kafka://" + b.Bootstrap() + "?topic=" + topic
	ks.Command = d.commandLine(d.args(source), source, "'kafka://127.0.0.1:PORT?topic=…'")
	t := &Throughput{Case: caseKafkaStats, N: n, Seed: ks.Produce, InProcess: c.InProcess, Server: "the broker"}
	ks.T = t
	res.Kafka = ks

	c.logf("kafka-stats: warm-up")
	if raw, err := rawKafkaScan(ctx, b.Bootstrap(), topic); err != nil || raw.Count != n {
		return fmt.Errorf("raw kafka loop (warm-up) read %d records, want %d: %v", raw.Count, n, err)
	}
	var warm Run
	if err := c.dlqctlRun(ctx, d, source, n, &warm); err != nil {
		return err
	}
	bc := brokerCPUCase{loop: "raw kafka loop", unit: "records", pid: b.PID(),
		scan:      func() (rawRedisResult, error) { return rawKafkaScan(ctx, b.Bootstrap(), topic) },
		brokerRaw: &ks.BrokerRaw, brokerDlqctl: &ks.BrokerDlqctl}
	if err := c.brokerCPUStats(ctx, d, t, source, bc); err != nil {
		return err
	}
	return c.profile(ctx, d, source, "kafka", res)
}

func (ks *KafkaStats) write(w io.Writer) {
	ks.T.write(w, "kafka-stats", "records")
	fmt.Fprintf(w, "Broker: Apache Kafka 4.4.0, one KRaft node (backends/kafka/kafkatest, started in %.1fs); the DLT has %d partitions and %s records with Spring Kafka headers, produced in %.1fs.\n",
		ks.BrokerStart.Seconds(), ks.Partitions, group(float64(ks.T.N)), ks.Produce.Seconds())
	fmt.Fprintf(w, "dlqctl: `%s`, after one warm-up run of each side. Raw: franz-go, the partitions assigned directly, read_committed, kafka_dlt-* headers decoded, SHA-256 of each value.\n", ks.Command)
	if len(ks.BrokerRaw) > 0 {
		var r, d []float64
		for i := range ks.BrokerRaw {
			r = append(r, ks.BrokerRaw[i].Seconds())
			d = append(d, ks.BrokerDlqctl[i].Seconds())
		}
		fmt.Fprintf(w, "Broker CPU (the JVM's user+sys, /proc), median: %.2f s during a raw pass, %.2f s during a dlqctl subprocess run.\n", median(r), median(d))
	}
	peak := slicesMax(ks.T.col(func(r Run) float64 { return mib(r.ProcMem.MaxRSS) }))
	fmt.Fprintf(w, "Peak RSS of `dlqctl stats` (ru_maxrss, via bench/launcher): %.1f MiB at most over the runs.\n", peak)
}
