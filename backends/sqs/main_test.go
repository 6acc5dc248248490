package sqsdlq_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/sqs"
	"github.com/dlqctl/dlqctl/backends/sqs/sqstest"
	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/internal/crashhook"
)

// shared is the one ElasticMQ server of this test binary, started by the
// first test that needs it (sqsServer); tests keep apart by queue name.
// The tests that need no server (decoders, URLs, sizes) run without one,
// in the -short tier too.
var shared = sqstest.Shared()

// sqsServer is the package's server for a test that needs one: it skips
// the test under -short (the fast tier starts no Java server) and fails it
// when the server cannot start.
func sqsServer(t testing.TB) *sqstest.Server {
	t.Helper()
	return shared.Get(t)
}

// TestMain also makes this test binary the dlqctl command (through
// testscript's PATH entry), so that the end-to-end tests run the real
// command against the package's one server.
func TestMain(m *testing.M) {
	testscript.Main(withServer{m}, map[string]func(){
		"dlqctl": func() { os.Exit(cmd.MainWith(dlqctlFactory())) },
	})
}

// withServer stops the shared server, if a test started it, once the
// tests have run.
type withServer struct{ m *testing.M }

func (w withServer) Run() int { return shared.Finish(w.m.Run(), os.Stderr) }

// dlqctlFactory is the production factory plus a crash hook: with
// DLQCTL_TEST_CRASH=STEP:N the process kills itself with SIGKILL right
// after the Nth journal step of that type, as a real crash there would.
func dlqctlFactory() *cmd.Factory {
	return &cmd.Factory{Deps: cmd.Deps{IO: cmd.SystemIO(), Now: time.Now, Getenv: os.Getenv, Build: cmd.BuildInfo{Version: "test"},
		Backends:  backend.NewRegistry(testRegistration()),
		CrashHook: crashhook.Parse(os.Getenv("DLQCTL_TEST_CRASH"))}}
}

// scanVisibilityEnv, set to a duration in a dlqctl child's environment,
// is the visibility timeout its scans receive with instead of 30 s: a
// test that kills a scan and waits for the messages it hid waits that
// long, not the production default.
const scanVisibilityEnv = "DLQCTL_TEST_SQS_SCAN_VISIBILITY"

// testRegistration is sqsdlq.Registration for the dlqctl this test binary
// becomes, with scanVisibilityEnv applied to every queue it opens.
func testRegistration() backend.Registration {
	reg := sqsdlq.Registration()
	open := reg.Factory.Open
	reg.Factory.Open = func(ctx context.Context, p backend.Parsed, o backend.OpenOptions) (backend.Source, error) {
		src, err := open(ctx, p, o)
		v := os.Getenv(scanVisibilityEnv)
		if err != nil || v == "" {
			return src, err
		}
		d, perr := time.ParseDuration(v)
		if perr != nil {
			return nil, fmt.Errorf("%s=%q: %v", scanVisibilityEnv, v, perr)
		}
		q, ok := src.(*sqsdlq.Queue)
		if !ok {
			return nil, fmt.Errorf("%s: the source is a %T, not an *sqsdlq.Queue", scanVisibilityEnv, src)
		}
		q.SetScanVisibility(d)
		return q, nil
	}
	return reg
}

var queueSeq atomic.Int64

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// pair is a source queue whose redrive policy dead-letters into dlq after
// maxReceive receives.
type pair struct {
	src, dlq       string // queue URLs
	srcName, name  string
	srcArn, dlqArn string
	endpoint       string // the server's
}

// freshName is a new queue name for the test (fifo adds .fifo).
func freshName(t *testing.T, suffix string) string {
	n := regexp.MustCompile(`[^a-z0-9-]+`).ReplaceAllString(strings.ToLower(t.Name()), "-")
	if len(n) > 50 {
		n = n[:50]
	}
	return fmt.Sprintf("%s-%d%s", n, queueSeq.Add(1), suffix)
}

func arnOf(t *testing.T, ctx context.Context, c *sqs.Client, url string) string {
	t.Helper()
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["QueueArn"]
}

func newPair(t *testing.T, ctx context.Context, fifo bool, maxReceive int) pair {
	t.Helper()
	srv := sqsServer(t)
	c := srv.Client()
	suffix := ""
	attrs := map[string]string{}
	if fifo {
		suffix = ".fifo"
		attrs["FifoQueue"] = "true"
	}
	base := freshName(t, "")
	p := pair{srcName: base + suffix, name: base + "-dlq" + suffix, endpoint: srv.Endpoint()}
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(p.name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	p.dlq = aws.ToString(dlq.QueueUrl)
	p.dlqArn = arnOf(t, ctx, c, p.dlq)
	// Visibility 0 on the source: the tests' consumer, which never
	// deletes, gets each message again at once.
	srcAttrs := map[string]string{"VisibilityTimeout": "0", "RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":"%s","maxReceiveCount":"%d"}`, p.dlqArn, maxReceive)}
	for k, v := range attrs {
		srcAttrs[k] = v
	}
	src, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(p.srcName), Attributes: srcAttrs})
	if err != nil {
		t.Fatal(err)
	}
	p.src = aws.ToString(src.QueueUrl)
	p.srcArn = arnOf(t, ctx, c, p.src)
	return p
}

// sourceURL is the dlqctl source URL of the pair's DLQ on the test server.
func (p pair) sourceURL(extra ...string) string {
	u := "sqs://" + p.name + "?region=" + sqstest.Region + "&endpoint=" + p.endpoint
	for _, e := range extra {
		u += "&" + e
	}
	return u
}

// event is one message the tests send to a source queue.
type event struct {
	id, body, group string
	attrs           map[string]string
}

func send(t *testing.T, ctx context.Context, queueURL string, evs ...event) {
	t.Helper()
	c := sqsServer(t).Client()
	for _, ev := range evs {
		attrs := map[string]types.MessageAttributeValue{"event_id": {DataType: aws.String("String"), StringValue: aws.String(ev.id)}}
		for k, v := range ev.attrs {
			attrs[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
		in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(ev.body), MessageAttributes: attrs}
		if ev.group != "" {
			in.MessageGroupId = aws.String(ev.group)
			in.MessageDeduplicationId = aws.String(ev.id)
		}
		if _, err := c.SendMessage(ctx, in); err != nil {
			t.Fatal(err)
		}
		// Distinct SentTimestamps, so that dead-letter order is the order sent.
		time.Sleep(2 * time.Millisecond)
	}
}

// deadLetter makes the server dead-letter every message of the pair's
// source queue: a consumer that receives and never deletes, with
// visibility 0, until the redrive policy moves them all.
func deadLetter(t *testing.T, ctx context.Context, p pair, n int) {
	t.Helper()
	c := sqsServer(t).Client()
	deadline := time.Now().Add(time.Minute)
	for {
		if got := count(t, ctx, p.dlq); got >= n {
			if got > n {
				t.Fatalf("DLQ holds %d, want %d", got, n)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead letters: %d of %d after a minute", count(t, ctx, p.dlq), n)
		}
		if _, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(p.src), MaxNumberOfMessages: 10, VisibilityTimeout: 0}); err != nil {
			t.Fatal(err)
		}
	}
}

// count is the queue's approximate visible + in-flight count.
func count(t *testing.T, ctx context.Context, queueURL string) int {
	t.Helper()
	v, nv := counts(t, ctx, queueURL)
	return v + nv
}

func counts(t *testing.T, ctx context.Context, queueURL string) (visible, inFlight int) {
	t.Helper()
	out, err := sqsServer(t).Client().GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL), AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	visible, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	inFlight, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	return visible, inFlight
}

func open(t *testing.T, ctx context.Context, p pair, extra ...string) *sqsdlq.Queue {
	t.Helper()
	q, err := sqsdlq.Open(ctx, p.sourceURL(extra...), sqsdlq.Options{Client: sqsServer(t).Client()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// drain receives and deletes everything in queueURL, returning the
// messages (with attributes) in the order received.
func drain(t *testing.T, ctx context.Context, queueURL string) []types.Message {
	t.Helper()
	c := sqsServer(t).Client()
	var all []types.Message
	for empty := 0; ; {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			// ElasticMQ now and then answers a long poll with nothing
			// while messages are visible: ask again while it shows some.
			empty++
			if v, _ := counts(t, ctx, queueURL); v == 0 || empty >= 3 {
				return all
			}
			continue
		}
		for _, m := range out.Messages {
			all = append(all, m)
			if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
