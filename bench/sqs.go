package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqctl/dlqctl/bench/rawsqs"
	"github.com/dlqctl/dlqctl/internal/sqstest"
)

// sqsReceivers is the parallelism of both sides of sqs-stats: dlqctl's
// ?receivers= and the raw loop's receive and release goroutines.
const sqsReceivers = 8

// SQSStats is the sqs-stats case: `dlqctl stats` on an SQS DLQ against a
// raw aws-sdk-go-v2 receive-and-release loop with the same parallelism,
// on ElasticMQ.
type SQSStats struct {
	T           *Throughput
	ServerStart time.Duration
	Command     string
}

// seedSQS sends n generated entries to queueURL with SendMessageBatch, the
// envelope fields as message attributes (at most 10: the rest of what the
// other cases carry is left out).
func seedSQS(ctx context.Context, c *sqs.Client, queueURL string, n int, now time.Time) error {
	g := newGenerator(n, now)
	work := make(chan int)
	errc := make(chan error, sqsReceivers)
	var wg sync.WaitGroup
	for range sqsReceivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := range work {
				var entries []types.SendMessageBatchRequestEntry
				for i := start; i < min(start+10, n); i++ {
					e := g.entry(i)
					str := func(v string) types.MessageAttributeValue {
						return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
					}
					attrs := map[string]types.MessageAttributeValue{
						"event_id": str(e.EventID), "fingerprint": str(e.Fingerprint), "origin_stream": str(e.OriginStream),
						"attempts": str(strconv.Itoa(e.Attempts)), "last_error": str(e.LastError),
						"dead_lettered_at": str(e.DeadLetteredAt.Format(time.RFC3339)), "owner": str(e.Owner),
						"key": str(e.Key), "tenant": str(e.Tenant),
					}
					if e.ErrorClass != "" {
						attrs["error_class"] = str(e.ErrorClass)
					}
					entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i - start)), MessageBody: aws.String(string(e.Payload)), MessageAttributes: attrs})
				}
				out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
				if err == nil && len(out.Failed) > 0 {
					err = fmt.Errorf("%s: %s", aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message))
				}
				if err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		}()
	}
	for i := 0; i < n; i += 10 {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

func rawSQSScan(ctx context.Context, c *sqs.Client, queueURL string) (rawRedisResult, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0, start := cpuTime(), time.Now()
	n, err := rawsqs.ReceiveAndRelease(ctx, c, queueURL, sqsReceivers, 600)
	wall, cpu := time.Since(start), cpuTime()-cpu0
	runtime.ReadMemStats(&after)
	return rawRedisResult{Wall: wall, CPU: cpu, Count: n, Allocs: after.Mallocs - before.Mallocs, Bytes: after.TotalAlloc - before.TotalAlloc}, err
}

func (c Config) runSQS(ctx context.Context, d *dlqctl, now time.Time, res *Results) error {
	n := c.SQSN
	// dlqctl finds credentials through the AWS chain; ElasticMQ takes any.
	for _, kv := range sqstest.Env() {
		k, v, _ := cutKV(kv)
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	if os.Getenv("ELASTICMQ_HEAP") == "" {
		os.Setenv("ELASTICMQ_HEAP", "512m") // the whole DLQ is held in memory by the server
	}
	// The subprocess runs with the bench's clean environment: add the
	// chain's test credentials to a copy.
	withCreds := *d
	withCreds.env = append(slices.Clone(d.env), sqstest.Env()...)
	d = &withCreds
	c.logf("sqs-stats: starting ElasticMQ")
	start := time.Now()
	s, err := sqstest.StartProcess()
	if err != nil {
		return err
	}
	defer func() {
		if err := s.Stop(); err != nil {
			c.logf("sqs-stats: %v", err)
		}
	}()
	ss := &SQSStats{ServerStart: time.Since(start)}
	client := s.Client()
	name := fmt.Sprintf("bench-dlq-%d", time.Now().UnixNano())
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return err
	}
	c.logf("sqs-stats: sending %d messages to %s", n, name)
	start = time.Now()
	if err := seedSQS(ctx, client, aws.ToString(q.QueueUrl), n, now); err != nil {
		return fmt.Errorf("seed: %v", err)
	}
	source := fmt.Sprintf("sqs://%s?region=%s&endpoint=%s&receivers=%d", name, sqstest.Region, s.Endpoint(), sqsReceivers)
	ss.Command = d.commandLine(d.args(source), s.Endpoint(), "http://127.0.0.1:PORT")
	t := &Throughput{Case: caseSQSStats, N: n, Seed: time.Since(start), InProcess: c.InProcess, Server: "ElasticMQ"}
	ss.T = t
	res.SQS = ss
	if raw, err := rawSQSScan(ctx, client, aws.ToString(q.QueueUrl)); err != nil || raw.Count != n {
		return fmt.Errorf("raw sqs loop (warm-up) read %d messages, want %d: %v", raw.Count, n, err)
	}
	for i := range c.Runs {
		var r Run
		raw, err := rawSQSScan(ctx, client, aws.ToString(q.QueueUrl))
		if err != nil {
			return fmt.Errorf("raw sqs loop: %v", err)
		}
		if raw.Count != n {
			return fmt.Errorf("raw sqs loop read %d messages, want %d", raw.Count, n)
		}
		r.Raw, r.RawCPU, r.RawAllocs, r.RawBytes = raw.Wall, raw.CPU, raw.Allocs, raw.Bytes
		p, err := d.runProcess(ctx, source)
		if err != nil {
			return err
		}
		if p.Total != n {
			return fmt.Errorf("dlqctl stats counted %d messages, want %d", p.Total, n)
		}
		r.Proc, r.ProcUser, r.ProcSys, r.ProcMem = p.Wall, p.User, p.Sys, p.mem()
		if c.InProcess {
			in, err := d.runInProcess(ctx, source, "", "")
			if err != nil {
				return err
			}
			if in.Total != n {
				return fmt.Errorf("in-process dlqctl stats counted %d messages, want %d", in.Total, n)
			}
			r.In, r.InAllocs, r.InBytes = in.Wall, in.Allocs, in.Bytes
		}
		t.Runs = append(t.Runs, r)
		c.logf("sqs-stats run %d/%d: raw %s, dlqctl %s (in-process %s)", i+1, c.Runs, r.Raw.Round(time.Millisecond), r.Proc.Round(time.Millisecond), r.In.Round(time.Millisecond))
	}
	return nil
}

func cutKV(kv string) (string, string, bool) {
	for i := range len(kv) {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

func (ss *SQSStats) write(w io.Writer) {
	ss.T.write(w, "sqs-stats", "messages")
	fmt.Fprintf(w, "Server: ElasticMQ 1.7.1 (internal/sqstest, started in %.1fs). Both sides use %d receivers, 10 messages per receive, and make every message visible again at the end.\n",
		ss.ServerStart.Seconds(), sqsReceivers)
	fmt.Fprintf(w, "dlqctl: `%s`.\n", ss.Command)
}
