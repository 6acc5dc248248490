package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
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
	// Discover is `categorize --discover --all -o json` on the same DLT,
	// once a run: it keeps every record's id, so it shows what a scan's
	// ids keep of their records.
	Discover []memSampleCPU
	StateRSS *KafkaStateRSS
}

const kafkaBenchPartitions = 4

func be32(n int32) []byte { b := make([]byte, 4); binary.BigEndian.PutUint32(b, uint32(n)); return b }
func be64(n int64) []byte { b := make([]byte, 8); binary.BigEndian.PutUint64(b, uint64(n)); return b }

// produceKafka makes topic and writes n generated entries to it as
// Spring Kafka's DeadLetterPublishingRecoverer would: the original's
// headers (event_id, fingerprint, tenant), then the kafka_dlt-* ones.
func produceKafka(ctx context.Context, bootstrap, topic string, n int, now time.Time) error {
	cl, err := benchProducer(bootstrap)
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
	return produceKafkaRange(ctx, cl, topic, newGenerator(n, now), 0, n)
}

// benchProducer is the client that seeds a case's topics. A topic just
// created may be unknown to the broker for a moment: it keeps retrying
// rather than fail after the client's default 4 tries. (No
// RecordDeliveryTimeout: franz-go counts it from the record's timestamp,
// days old here.)
func benchProducer(bootstrap string) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(50_000),
		kgo.UnknownTopicRetries(-1))
}

// produceKafkaRange writes the generated entries [from, to) to topic.
func produceKafkaRange(ctx context.Context, cl *kgo.Client, topic string, g generator, from, to int) error {
	errc := make(chan error, 1)
	for i := from; i < to; i++ {
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
	if err := c.profile(ctx, d, source, "kafka", res); err != nil {
		return err
	}
	c.logf("kafka-stats: categorize --discover")
	if ks.Discover, err = c.discoverRuns(ctx, d, source, n); err != nil {
		return err
	}
	// Last: it changes the topic.
	ks.StateRSS, err = c.kafkaStateRSS(ctx, d, b.Bootstrap(), topic, n, now)
	return err
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
	if len(ks.Discover) > 0 {
		var each []string
		for _, x := range ks.Discover {
			each = append(each, fmt.Sprintf("%.2f s, %.1f MiB", x.Wall.Seconds(), mib(x.MaxRSS)))
		}
		fmt.Fprintf(w, "\n`dlqctl categorize --discover --all -o json` on the same DLT, per run: %s. ", strings.Join(each, "; "))
		fmt.Fprintln(w, discoverRSSVerdict(ks.Discover, ks.T.N))
	}
	if ks.StateRSS != nil {
		ks.StateRSS.write(w)
	}
}

// KafkaStateRSS is the memory half of kafka-stats: the peak RSS of
// `dlqctl stats` on a DLT whose state topic holds as many records as the
// DLT, the form of a long-lived DLT after big redrives.
type KafkaStateRSS struct {
	DLT, State, Shown int // records in the DLT, in the state topic, and those stats shows
	Seed              time.Duration
	Runs              []memSample
}

// kafkaStateRSS builds that DLT from the case's topic of n records: n/2
// more records, the oldest third of each partition removed as retention
// would (DeleteRecords), and a resolve's state record for each of the
// oldest two thirds — half about records retention removed since, half
// hiding records still there. So the DLT holds about n records, the state
// topic about n, and stats reads every record and shows half of them.
// The state records carry what a resolve writes but the record
// timestamp and fingerprint (which would need every record read first to
// match): hides takes them at their word.
func (c Config) kafkaStateRSS(ctx context.Context, d *dlqctl, bootstrap, topic string, n int, now time.Time) (*KafkaStateRSS, error) {
	start := time.Now()
	cl, err := benchProducer(bootstrap)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	c.logf("kafka-stats: state RSS: %d more records, then the oldest third removed", n/2)
	if err := produceKafkaRange(ctx, cl, topic, newGenerator(n+n/2, now), n, n+n/2); err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	trim := kadm.Offsets{}
	rs := &KafkaStateRSS{}
	ends.Each(func(o kadm.ListedOffset) {
		trim.AddOffset(topic, o.Partition, o.Offset/3, -1)
		rs.DLT += int(o.Offset - o.Offset/3)
		rs.Shown += int(o.Offset - 2*o.Offset/3)
	})
	if _, err := adm.DeleteRecords(ctx, trim); err != nil {
		return nil, err
	}
	var topicID string
	if td, err := adm.ListTopics(ctx, topic); err == nil {
		topicID = td[topic].ID.String()
	}
	state := topic + ".dlqctl-state"
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": ptr("-1")}, state); err != nil || resp.Err != nil {
		return nil, fmt.Errorf("create %s: %v %v", state, err, resp.Err)
	}
	c.logf("kafka-stats: state RSS: writing the state records")
	errc := make(chan error, 1)
	at := now.UTC().Format(time.RFC3339Nano)
	ends.Each(func(o kadm.ListedOffset) {
		for off := range 2 * o.Offset / 3 {
			rs.State++
			v := `{"status":"resolved","run_id":"bench-run-0001","seq":` + strconv.Itoa(rs.State) + `,"event_id":"evt-` + strconv.Itoa(rs.State) +
				`","at":"` + at + `","topic_id":"` + topicID + `"}`
			cl.Produce(ctx, &kgo.Record{Topic: state, Partition: 0, Key: []byte(strconv.Itoa(int(o.Partition)) + ":" + strconv.FormatInt(off, 10)), Value: []byte(v)},
				func(_ *kgo.Record, err error) {
					if err != nil {
						select {
						case errc <- err:
						default:
						}
					}
				})
		}
	})
	if err := cl.Flush(ctx); err != nil {
		return nil, err
	}
	select {
	case err := <-errc:
		return nil, err
	default:
	}
	rs.Seed = time.Since(start)
	source := "kafka://" + bootstrap + "?topic=" + topic
	for i := range c.Runs {
		p, err := d.runProcess(ctx, source)
		if err != nil {
			return nil, err
		}
		if p.Total != rs.Shown {
			return nil, fmt.Errorf("dlqctl stats with %d state records counted %d entries, want %d", rs.State, p.Total, rs.Shown)
		}
		rs.Runs = append(rs.Runs, p.mem())
		c.logf("kafka-stats: state RSS run %d/%d: %.1f MiB in %s", i+1, c.Runs, mib(p.MaxRSS), p.Wall.Round(time.Millisecond))
	}
	return rs, nil
}

func ptr[T any](v T) *T { return &v }

func (rs *KafkaStateRSS) write(w io.Writer) {
	var peaks []float64
	var each []string
	for _, r := range rs.Runs {
		peaks = append(peaks, mib(r.MaxRSS))
		each = append(each, fmt.Sprintf("%.1f", mib(r.MaxRSS)))
	}
	fmt.Fprintf(w, "\nWith a state topic (made in %.1fs): the DLT holds %s records (its oldest third removed by DeleteRecords), the state topic %s resolve records (half about removed records, half hiding records still there), stats shows %s.\n",
		rs.Seed.Seconds(), group(float64(rs.DLT)), group(float64(rs.State)), group(float64(rs.Shown)))
	fmt.Fprintf(w, "Peak RSS of `dlqctl stats` (ru_maxrss, via bench/launcher) per run: %s MiB; the largest %.1f MiB (target ≤ 128 MiB).\n", strings.Join(each, ", "), slicesMax(peaks))
}
