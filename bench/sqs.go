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

	"github.com/dlqctl/dlqctl/backends/sqs/sqstest"
	"github.com/dlqctl/dlqctl/bench/rawsqs"
)

// sqsReceivers is the parallelism of both sides of sqs-stats: dlqctl's
// ?receivers= and the raw loop's receive and release goroutines.
const sqsReceivers = 8

// SQSStats is the sqs-stats case: `dlqctl stats` on an SQS DLQ against a
// raw aws-sdk-go-v2 receive-and-release loop with the same parallelism,
// on ElasticMQ.
type SQSStats struct {
	T *Throughput
	// Lost counts messages missing from a pass because a receive call's
	// answer was dropped (lostToDroppedAnswers), over all passes.
	Lost        int
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

// rawVisibility is the raw loop's visibility timeout for a pass over n
// messages, sized to the pass up front (60 s and a second per 100
// messages): the raw loop has no extender, and a fixed 600 s was shorter
// than a 100,000-message pass here (10 minutes on ElasticMQ), so messages
// came back mid-pass. dlqctl receives with 30 s and extends it in flight,
// one ChangeMessageVisibilityBatch per received batch each time, which
// the raw loop does not pay for.
func rawVisibility(n int) int32 { return int32(min(60+n/100, 12*3600)) }

func rawSQSScan(ctx context.Context, c *sqs.Client, queueURL string, n int) (rawRedisResult, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0, start := cpuTime(), time.Now()
	n, err := rawsqs.ReceiveAndRelease(ctx, c, queueURL, sqsReceivers, rawVisibility(n))
	wall, cpu := time.Since(start), cpuTime()-cpu0
	runtime.ReadMemStats(&after)
	return rawRedisResult{Wall: wall, CPU: cpu, Count: n, Allocs: after.Mallocs - before.Mallocs, Bytes: after.TotalAlloc - before.TotalAlloc}, err
}

func (c Config) runSQS(ctx context.Context, d *dlqctl, now time.Time, res *Results) error {
	n := c.SQSN
	sqsServerEnv()
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
	return c.sqsStatsPasses(ctx, d, s, n, now, res, time.Since(start))
}

// sqsServerEnv sets the environment of an ElasticMQ server for a bench
// case (and dlqctl's AWS chain credentials), where not set already.
func sqsServerEnv() {
	// dlqctl finds credentials through the AWS chain; ElasticMQ takes any.
	for _, kv := range sqstest.Env() {
		k, v, _ := cutKV(kv)
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	if os.Getenv("ELASTICMQ_HEAP") == "" {
		// The server holds the whole queue; at 512 MiB and 100,000
		// messages it spent its time collecting and answered 503.
		os.Setenv("ELASTICMQ_HEAP", "2g")
	}
	if os.Getenv("ELASTICMQ_JAVA_OPTS") == "" {
		// The tests' options favour start-up; a pass of minutes wants the
		// optimizing compiler.
		os.Setenv("ELASTICMQ_JAVA_OPTS", "-XX:+UseSerialGC")
	}
	// The case never restarts the server, so it keeps messages in memory:
	// with the H2 store on, both sides wait on the store's writes (about
	// 125 messages/s here), and the ratio would measure the store.
	if os.Getenv("ELASTICMQ_PERSIST") == "" {
		os.Setenv("ELASTICMQ_PERSIST", "0")
	}
}

// sqsStatsPasses is the sqs-stats case on a running server.
func (c Config) sqsStatsPasses(ctx context.Context, d *dlqctl, s *sqstest.Server, n int, now time.Time, res *Results, serverStart time.Duration) error {
	ss := &SQSStats{ServerStart: serverStart}
	t := &Throughput{Case: caseSQSStats, N: n, InProcess: c.InProcess, Server: "ElasticMQ"}
	sp := &sqsPasses{c: c, s: s, client: s.Client(), n: n, now: now, t: t, ss: ss}
	ss.T = t
	res.SQS = ss
	ss.Command = d.commandLine(d.args(sp.source("QUEUE")), s.Endpoint(), "http://127.0.0.1:PORT")
	// The warm-up (the server's compiler, both sides' connections) reads a
	// small queue: a pass over 100,000 messages takes ten minutes here.
	warm := min(n, 5000)
	_, url, err := sp.queue(ctx, warm)
	if err != nil {
		return err
	}
	raw, err := rawSQSScan(ctx, sp.client, url, warm)
	if err != nil {
		return fmt.Errorf("raw sqs loop (warm-up): %v", err)
	}
	if err := sp.done(ctx, url, "raw sqs loop (warm-up)", warm, raw.Count); err != nil {
		return err
	}
	c.logf("sqs-stats: warm-up raw pass %s", raw.Wall.Round(time.Millisecond))
	for i := range c.Runs {
		var r Run
		if err := sp.rawPass(ctx, &r); err != nil {
			return err
		}
		if err := sp.dlqctlPasses(ctx, d, &r); err != nil {
			return err
		}
		t.Runs = append(t.Runs, r)
		c.logf("sqs-stats run %d/%d: raw %s, dlqctl %s (in-process %s)", i+1, c.Runs, r.Raw.Round(time.Millisecond), r.Proc.Round(time.Millisecond), r.In.Round(time.Millisecond))
	}
	return nil
}

// sqsPasses is the sqs-stats case's server and client and what it has
// counted. Every pass reads a queue of its own, seeded afresh: a pass can
// lose a receive call's answer (see lostToDroppedAnswers), and the
// messages that answer carried stay invisible for the pass's visibility
// timeout (minutes), which would make every later pass on the same queue
// short.
type sqsPasses struct {
	c      Config
	s      *sqstest.Server
	client *sqs.Client
	n      int
	now    time.Time
	t      *Throughput
	ss     *SQSStats
	pass   int
}

// queue creates a queue of its own for the next pass and seeds it with
// size messages; the first full queue's seed time is the case's.
func (sp *sqsPasses) queue(ctx context.Context, size int) (name, url string, err error) {
	sp.pass++
	name = fmt.Sprintf("bench-dlq-%d-%d", time.Now().UnixNano(), sp.pass)
	q, err := sp.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return "", "", err
	}
	sp.c.logf("sqs-stats: sending %d messages to %s", size, name)
	st := time.Now()
	if err := seedSQS(ctx, sp.client, aws.ToString(q.QueueUrl), size, sp.now); err != nil {
		return "", "", fmt.Errorf("seed: %v", err)
	}
	if size == sp.n && sp.t.Seed == 0 {
		sp.t.Seed = time.Since(st)
	}
	sp.c.logf("sqs-stats: seeded in %s", time.Since(st).Round(time.Millisecond))
	return name, aws.ToString(q.QueueUrl), nil
}

// done checks a pass by who over the queue at url (count of size read,
// short only by dropped answers) and deletes the queue.
func (sp *sqsPasses) done(ctx context.Context, url, who string, size, count int) error {
	lost, err := lostToDroppedAnswers(ctx, sp.client, url, size, count)
	if err != nil {
		return fmt.Errorf("%s read %d messages, want %d: %v", who, count, size, err)
	}
	sp.ss.Lost += lost
	if lost > 0 {
		sp.c.logf("sqs-stats: %s: %d messages stayed in flight after a dropped answer", who, lost)
	}
	_, err = sp.client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	return err
}

// source is dlqctl's source URL for the queue name.
func (sp *sqsPasses) source(name string) string {
	return fmt.Sprintf("sqs://%s?region=%s&endpoint=%s&receivers=%d", name, sqstest.Region, sp.s.Endpoint(), sqsReceivers)
}

// rawPass times the raw loop over a fresh queue into r.
func (sp *sqsPasses) rawPass(ctx context.Context, r *Run) error {
	_, url, err := sp.queue(ctx, sp.n)
	if err != nil {
		return err
	}
	raw, err := rawSQSScan(ctx, sp.client, url, sp.n)
	if err != nil {
		return fmt.Errorf("raw sqs loop: %v", err)
	}
	if err := sp.done(ctx, url, "raw sqs loop", sp.n, raw.Count); err != nil {
		return err
	}
	r.Raw, r.RawCPU, r.RawAllocs, r.RawBytes = raw.Wall, raw.CPU, raw.Allocs, raw.Bytes
	return nil
}

// dlqctlPasses times `dlqctl stats` over a fresh queue as a subprocess
// and, when asked, over another in this process, into r.
func (sp *sqsPasses) dlqctlPasses(ctx context.Context, d *dlqctl, r *Run) error {
	n := sp.n
	name, url, err := sp.queue(ctx, n)
	if err != nil {
		return err
	}
	p, err := d.runProcess(ctx, sp.source(name))
	if err != nil {
		return err
	}
	if err := sp.done(ctx, url, "dlqctl stats", n, p.Total); err != nil {
		return err
	}
	r.Proc, r.ProcUser, r.ProcSys, r.ProcMem = p.Wall, p.User, p.Sys, p.mem()
	if !sp.c.InProcess {
		return nil
	}
	name, url, err = sp.queue(ctx, n)
	if err != nil {
		return err
	}
	in, err := d.runInProcess(ctx, sp.source(name), "", "")
	if err != nil {
		return err
	}
	if err := sp.done(ctx, url, "in-process dlqctl stats", n, in.Total); err != nil {
		return err
	}
	r.In, r.InAllocs, r.InBytes = in.Wall, in.Allocs, in.Bytes
	return nil
}

// lostToDroppedAnswers accepts a pass that read fewer than n messages only
// when every missing one is still in flight after the pass released what
// it read: the server handed them to a receive call whose answer never
// arrived (ElasticMQ under load here drops a connection mid-answer now and
// then; the SDK retries the call, and what the lost answer carried stays
// invisible until its visibility timeout). Any other shortfall is an
// error. It returns how many were lost that way.
func lostToDroppedAnswers(ctx context.Context, c *sqs.Client, url string, n, count int) (int, error) {
	if count == n {
		return 0, nil
	}
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		return 0, err
	}
	visible, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	if count > n || visible != count || inFlight != n-count {
		return 0, fmt.Errorf("afterwards the queue holds %d visible and %d in flight: not a dropped answer", visible, inFlight)
	}
	return n - count, nil
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
	fmt.Fprintf(w, "Server: ElasticMQ 1.7.1 (backends/sqs/sqstest, started in %.1fs). Both sides use %d receivers, 10 messages per receive, and make every message visible again at the end.\n",
		ss.ServerStart.Seconds(), sqsReceivers)
	fmt.Fprintf(w, "dlqctl: `%s`.\n", ss.Command)
	fmt.Fprintf(w, "Each pass read a queue of its own, seeded afresh (the seed time is the first full queue's; the warm-up pass reads min(N, 5,000)). Messages missing from a pass because the server dropped a receive call's answer (they stay in flight; any other shortfall fails the run): %d over all passes.\n", ss.Lost)
}
