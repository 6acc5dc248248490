// Command bench measures dlqctl against the raw client doing the same work
// in the same run and reports the ratio (docs/performance.md).
//
//	go run ./bench -case all|redis-stats|redis-rss|dir-stats|redis-redrive|rate|redrive-scale|pulsar-stats|kafka-stats|kafka-redrive|sqs-stats|sqs-rss|redis-ui|redis-discover|rabbitmq-stats|rabbitmq-redrive|nats-stats|nats-redrive [-n N]
//
// Cases:
//
//	redis-stats  a real redis-server, a DLQ stream of N entries (default
//	             1,000,000); alternately a go-redis XRANGE loop (json.Unmarshal
//	             and SHA-256 of each payload) and `dlqctl stats -o json` as a
//	             subprocess (and in-process through cmd.Execute).
//	redis-rss    peak RSS (ru_maxrss) of `dlqctl stats` and of `dlqctl list
//	             --limit 0` with its stdout a pipe (TSV) at N/10 and N
//	             (default 100,000 and 1,000,000), and of the raw loop.
//	dir-stats    a directory queue of N/10 files (default 100,000);
//	             alternately os.ReadDir + ReadFile + json.Unmarshal + SHA-256
//	             and `dlqctl --source dir:PATH stats -o json`.
//	redis-redrive  a DLQ stream of -redrive-n entries (default 100,000),
//	             reseeded before each side; alternately a pipelined Lua
//	             move loop (EVALSHA, 256 per pipeline) and `dlqctl redrive
//	             apply` of an approved unlimited-rate plan, as a subprocess.
//	rate         `dlqctl redrive apply` at --rate 200 --burst 10 over
//	             -rate-n entries (default 2,000): achieved rate and the
//	             largest count in any one-second window, from the
//	             destination's stream IDs.
//	redis-ui     `dlqctl ui` on a pty over a DLQ stream of N entries: time
//	             to the first frame, to the first counts, to the end of the
//	             scan, and to a category's first page, against `dlqctl list
//	             --category permission --limit 50` on the same stream (ui.go).
//	redrive-scale  the whole redrive path at -scale-n/10 and -scale-n
//	             entries (default 100,000 and 1,000,000), each step a
//	             subprocess timed with its peak RSS: plan --limit 0, approve,
//	             unthrottled apply (journal on), status, resume of the
//	             finished run, reconcile --journal (bench/scale.go).
//	pulsar-stats a standalone Pulsar broker (backends/pulsar/pulsartest) and a DLQ
//	             topic of -pulsar-n messages (default 100,000); alternately a
//	             pulsar-client-go Reader loop (json.Unmarshal and SHA-256)
//	             and `dlqctl --source pulsar://… stats -o json`.
//	kafka-stats  a single-node Kafka broker (backends/kafka/kafkatest) and a
//	             Spring Kafka dead-letter topic of -kafka-n records (default
//	             1,000,000, 4 partitions); alternately a franz-go consume loop
//	             (kafka_dlt-* headers decoded, SHA-256 of each value) and
//	             `dlqctl --source kafka://… stats -o json`.
//	redis-discover  `dlqctl categorize --discover --all -o json` against
//	             `dlqctl stats -o json` on one Redis DLQ stream of N entries,
//	             both subprocesses, alternately (bench/discover.go).
//	sqs-stats    ElasticMQ (backends/sqs/sqstest) and a DLQ queue of -sqs-n
//	             messages (default 100,000); alternately an aws-sdk-go-v2
//	             receive-and-release loop with 8 receivers (json.Unmarshal
//	             and SHA-256) and `dlqctl --source sqs://…&receivers=8 stats`.
//	sqs-rss      ElasticMQ and DLQ queues of -sqs-n/10 and -sqs-n messages:
//	             the peak RSS of one `dlqctl stats` process at each size.
//	rabbitmq-stats / rabbitmq-redrive  Debian's rabbitmq-server; see
//	             rabbitmq.go.
//	nats-stats / nats-redrive  nats-server (scripts/nats.sh fetch); see
//	             nats.go.
//
// It is not part of `go test ./...`; bench_test.go only runs it small.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/dlqctl/dlqctl/bench/raw"
)

func main() {
	var (
		which     = flag.String("case", "all", "all, or a comma-separated list of: "+strings.Join(allCases, ", "))
		n         = flag.Int("n", 1_000_000, "entries in the redis-stats stream; redis-rss uses N/10 and N, dir-stats N/10 files")
		dirN      = flag.Int("dir-n", 0, "files in the dir-stats queue (default N/10)")
		runs      = flag.Int("runs", 3, "alternations of raw and dlqctl per throughput case")
		redriveN  = flag.Int("redrive-n", 100_000, "entries in the redis-redrive DLQ")
		ramp      = flag.String("redrive-ramp", "default", "redis-redrive's --ramp: default (the plan's default ramp, what a user runs), one (one batch of every entry) or sizes")
		rawChunk  = flag.Int("raw-chunk", raw.MoveChunk, "moves per round trip of the raw move loop")
		rateN     = flag.Int("rate-n", 2000, "entries redriven by the rate case (at 200/s)")
		scaleN    = flag.Int("scale-n", 1_000_000, "redrive-scale runs the whole redrive path at N/10 and N entries")
		compact   = flag.Bool("scale-compact", false, "redrive-scale seeds compact entries (about 150 bytes in Redis) and checks the moves by count, so that 10,000,000 entries fit a shared machine")
		pulsarN   = flag.Int("pulsar-n", 100_000, "messages in the pulsar-stats DLQ topic")
		kafkaN    = flag.Int("kafka-n", 1_000_000, "records in the kafka-stats dead-letter topic")
		kafkaRN   = flag.Int("kafka-redrive-n", 100_000, "records in the kafka-redrive dead-letter topic")
		sqsN      = flag.Int("sqs-n", 100_000, "messages in the sqs-stats DLQ queue")
		rabbitN   = flag.Int("rabbitmq-n", 100_000, "messages in the rabbitmq-stats DLQ")
		rabbitRN  = flag.Int("rabbitmq-redrive-n", 100_000, "messages in each rabbitmq-redrive DLQ")
		natsN     = flag.Int("nats-n", 100_000, "copies in the nats-stats DLQ stream")
		natsRN    = flag.Int("nats-redrive-n", 10_000, "copies in each nats-redrive DLQ stream")
		inProcess = flag.Bool("inprocess", true, "also time dlqctl in-process through cmd.Execute")
		rawRSS    = flag.Bool("raw-rss", true, "also measure the raw loop's peak RSS in a child process")
		cpuProf   = flag.String("cpuprofile", "", "write a CPU profile of one extra in-process dlqctl run per throughput case to PREFIX-redis.pprof / PREFIX-dir.pprof / PREFIX-redrive.pprof / PREFIX-pulsar.pprof")
		memProf   = flag.String("memprofile", "", "write the allocation profile after one extra in-process dlqctl run to PREFIX-redis.pprof / PREFIX-dir.pprof / PREFIX-redrive.pprof / PREFIX-pulsar.pprof")
		bin       = flag.String("dlqctl", "", "use this dlqctl binary instead of building one")
	)
	flag.Parse()
	cases, err := parseCases(*which)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if *n < 10 {
		fmt.Fprintln(os.Stderr, "bench: -n must be at least 10")
		os.Exit(2)
	}
	if *scaleN < 10 {
		fmt.Fprintln(os.Stderr, "bench: -scale-n must be at least 10")
		os.Exit(2)
	}
	if *redriveN < 1 || *rateN < 2 || *pulsarN < 1 || *kafkaN < 1 || *sqsN < 1 {
		fmt.Fprintln(os.Stderr, "bench: -redrive-n, -pulsar-n, -kafka-n and -sqs-n must be at least 1, -rate-n at least 2")
		os.Exit(2)
	}
	cfg := Config{
		Cases: cases, N: *n, DirN: *dirN, RSSN: []int{*n / 10, *n}, Runs: *runs,
		RedriveN: *redriveN, RedriveRamp: *ramp, RawChunk: *rawChunk, RateN: *rateN, ScaleN: *scaleN, ScaleCompact: *compact, PulsarN: *pulsarN, KafkaN: *kafkaN, KafkaRedriveN: *kafkaRN, SQSN: *sqsN, RabbitN: *rabbitN, RabbitRedriveN: *rabbitRN,
		NATSN: *natsN, NATSRedriveN: *natsRN,
		InProcess: *inProcess, RawRSS: *rawRSS, CPUProfile: *cpuProf, MemProfile: *memProf,
		Dlqctl: *bin, Log: os.Stderr,
	}
	if cfg.DirN == 0 {
		cfg.DirN = *n / 10
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := cfg.Run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
	res.Command = strings.TrimSpace("go run ./bench " + strings.Join(os.Args[1:], " "))
	res.Write(os.Stdout)
}

func parseCases(s string) ([]string, error) {
	if s == "all" {
		return allCases, nil
	}
	var out []string
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		ok := false
		for _, known := range allCases {
			ok = ok || c == known
		}
		if !ok {
			return nil, fmt.Errorf("unknown case %q (want all, %s)", c, strings.Join(allCases, ", "))
		}
		out = append(out, c)
	}
	return out, nil
}
