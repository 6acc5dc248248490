package sqsdlq_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqctl/dlqctl/backend"
	sqsdlq "github.com/dlqctl/dlqctl/backends/sqs"
	"github.com/dlqctl/dlqctl/envelope"
)

// limitedDLQ is a DLQ with a redrive policy of its own (maxReceiveCount
// limit, to another queue, whose URL it returns too) and no source queue,
// holding n messages sent to it directly (never received).
func limitedDLQ(t *testing.T, ctx context.Context, limit, n int) (pair, string) {
	t.Helper()
	srv := sqsServer(t)
	c := srv.Client()
	p := pair{name: freshName(t, ""), endpoint: srv.Endpoint()}
	last, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(p.name + "-last")})
	if err != nil {
		t.Fatal(err)
	}
	lastURL := aws.ToString(last.QueueUrl)
	pol := fmt.Sprintf(`{"deadLetterTargetArn":"%s","maxReceiveCount":"%d"}`, arnOf(t, ctx, c, lastURL), limit)
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(p.name), Attributes: map[string]string{"RedrivePolicy": pol}})
	if err != nil {
		t.Fatal(err)
	}
	p.dlq = aws.ToString(dlq.QueueUrl)
	for i := range n {
		send(t, ctx, p.dlq, event{id: fmt.Sprintf("R%02d", i), body: fmt.Sprintf(`{"n":%d}`, i)})
	}
	return p, lastURL
}

// receiveCounts receives every message of queueURL once (raising its
// count), gives it back, and returns each one's ApproximateReceiveCount
// after that receive.
func receiveCounts(t *testing.T, ctx context.Context, queueURL string) []string {
	t.Helper()
	c := sqsServer(t).Client()
	var counts []string
	var handles []*string
	for empty := 0; empty < 2; {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, VisibilityTimeout: 30, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			empty++
		}
		for _, m := range out.Messages {
			counts = append(counts, m.Attributes[sqsdlq.SQSReceiveCount])
			handles = append(handles, m.ReceiptHandle)
		}
	}
	for _, h := range handles {
		if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(queueURL), ReceiptHandle: h}); err != nil {
			t.Fatal(err)
		}
	}
	return counts
}

// TestReadsKeepClearOfTheDLQsOwnLimit: on a DLQ whose own redrive policy
// moves a message on after 4 receives, each command (a process of its
// own: a Queue opened afresh) reads while every message stays one receive
// short of that limit — 3 scans — and then refuses, saying what reading
// costs, without receiving anything (a redrive's receive too: its entries
// fail, not sent); nothing is moved on, and stats and doctor say how many
// reads are left. Every scan went through before, and
// the fifth moved all 12 messages to the DLQ's DLQ.
func TestReadsKeepClearOfTheDLQsOwnLimit(t *testing.T) {
	ctx := testCtx(t)
	const limit, n = 4, 12
	p, last := limitedDLQ(t, ctx, limit, n)
	var ok, refused int
	for i := range 6 {
		q := open(t, ctx, p)
		err := q.Scan(ctx, "", func(envelope.Envelope) error { return nil })
		var ce *backend.ConfigError
		switch {
		case err == nil:
			ok++
			x, xerr := q.Extras(ctx, nil)
			if xerr != nil {
				t.Fatal(xerr)
			}
			sx := x.JSON.(sqsdlq.SQSExtras)
			if sx.OwnRedrivePolicy == nil || sx.OwnRedrivePolicy.MaxReceiveCount != limit || sx.ReadsLeft == nil || *sx.ReadsLeft != limit-1-(i+1) ||
				*sx.HighestReceiveCount != i+1 {
				t.Errorf("stats after read %d: own policy %+v, highest %s, reads left %s; want maxReceiveCount %d, highest %d, %d left",
					i+1, sx.OwnRedrivePolicy, deref(sx.HighestReceiveCount), deref(sx.ReadsLeft), limit, i+1, limit-1-(i+1))
			}
		case errors.As(err, &ce):
			refused++
			if !strings.Contains(err.Error(), "maxReceiveCount 4") {
				t.Errorf("the refusal does not say what reading costs: %v", err)
			}
		default:
			t.Fatalf("read %d: %v", i+1, err)
		}
	}
	if ok != limit-1 || refused != 6-(limit-1) {
		t.Errorf("%d reads went through and %d were refused, want %d and %d: every message must stay one receive short of maxReceiveCount %d",
			ok, refused, limit-1, 6-(limit-1), limit)
	}
	if v, f := counts(t, ctx, last); v+f != 0 {
		t.Fatalf("the DLQ's DLQ holds %d messages: reads moved them on", v+f)
	}
	got := receiveCounts(t, ctx, p.dlq)
	if len(got) != n {
		t.Fatalf("the DLQ holds %d of its %d messages", len(got), n)
	}
	for _, c := range got {
		// The check's own receive is the 4th.
		if c != "4" {
			t.Fatalf("receive counts after the reads and this check's receive: %v, want every one 4 (3 reads, then this one)", got)
		}
	}
	// A redrive's receive is refused alike, before anything is sent.
	res, err := open(t, ctx, p).Publish(ctx, []backend.MoveItem{{Seq: 1, ID: "m-1", EventID: "R00", Dest: last}}, backend.Markers{RunID: "run-1"})
	if err != nil || len(res) != 1 || res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "not sent") {
		t.Errorf("a redrive past the reads left: %v %+v; want the entry failed, not sent", err, res)
	}
	d := open(t, ctx, p).DoctorChecks(ctx)
	if len(d) != 1 || d[0].OK || !strings.Contains(d[0].Detail, "0 more reads") || d[0].Fix == "" {
		t.Errorf("doctor on a DLQ with no read left: %+v", d)
	}
}

// TestReadStopsAtAMessageAtTheLimit: when something other than dlqctl
// received the DLQ's messages (its record says less than they have), the
// scan that meets a message at the limit stops there, gives back what it
// took and refuses; the next read is refused before it receives, and
// nothing is moved on.
func TestReadStopsAtAMessageAtTheLimit(t *testing.T) {
	ctx := testCtx(t)
	const limit, n = 4, 12
	p, last := limitedDLQ(t, ctx, limit, n)
	if err := open(t, ctx, p).Scan(ctx, "", func(envelope.Envelope) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// Another reader: twice through the DLQ, to 3 (one short of the limit).
	receiveCounts(t, ctx, p.dlq)
	receiveCounts(t, ctx, p.dlq)
	var ce *backend.ConfigError
	err := open(t, ctx, p).Scan(ctx, "", func(envelope.Envelope) error { t.Fatal("a scan that met the limit handed over an entry"); return nil })
	if !errors.As(err, &ce) {
		t.Fatalf("a scan meeting messages at the limit: %v, want a refusal", err)
	}
	err = open(t, ctx, p).Scan(ctx, "", func(envelope.Envelope) error { return nil })
	if !errors.As(err, &ce) {
		t.Fatalf("the read after: %v, want a refusal", err)
	}
	if v, f := counts(t, ctx, last); v+f != 0 {
		t.Fatalf("the DLQ's DLQ holds %d messages", v+f)
	}
	if v, f := counts(t, ctx, p.dlq); v != n || f != 0 {
		t.Fatalf("the DLQ: %d visible, %d in flight; want %d, 0 (given back at once)", v, f, n)
	}
}

func deref(n *int) string {
	if n == nil {
		return "none"
	}
	return fmt.Sprint(*n)
}

// TestLostReceiveCounts: a receive pass whose answer was lost (the SDK
// asked again) raised the counts of what it handed out without dlqctl
// seeing them: what it wrote ahead stands. Here show's first receive
// hands out all five messages of a DLQ read twice (to 2 of its limit 4)
// and the answer is lost, so each is at 3 — one receive short of the
// limit, no read left. The pass saw nothing, and recorded 2 (a read left,
// which would bring every message to the limit) before.
func TestLostReceiveCounts(t *testing.T) {
	ctx := testCtx(t)
	const limit, n = 4, 5
	p, last := limitedDLQ(t, ctx, limit, n)
	for range 2 {
		if err := open(t, ctx, p).Scan(ctx, "", func(envelope.Envelope) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	l := &lossyTransport{n: 1, vis: 120}
	if _, err := openLossy(t, p, l, 2*time.Second).Get(ctx, "no-such-id"); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("show of a missing ID: %v", err)
	}
	if l.lost != n {
		t.Fatalf("the lost answer held %d messages, want all %d", l.lost, n)
	}
	c, err := open(t, ctx, p).Cost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Highest != limit-1 || c.ReadsLeft != 0 {
		t.Errorf("after a show whose receive answer was lost: highest %d, %d reads left; want %d and 0 (every message received %d times)", c.Highest, c.ReadsLeft, limit-1, limit-1)
	}
	if v, f := counts(t, ctx, last); v+f != 0 {
		t.Fatalf("the DLQ's DLQ holds %d messages", v+f)
	}
}

// concurrentReader is a fake around the real server: before the first
// ReceiveMessage call of a pass it lets another process's pass run to its
// end, by writing the reads tag as that pass leaves it.
type concurrentReader struct {
	once  sync.Once
	write func()
}

func (c *concurrentReader) RoundTrip(r *http.Request) (*http.Response, error) {
	body, ok, err := callBody(r, "ReceiveMessage")
	if ok && err == nil {
		c.once.Do(c.write)
	}
	return passOn(r, body, err)
}

// TestConcurrentReadKeepsTheHigherCount: while a scan runs, another
// process's pass records a higher count (it received the messages once
// more, after this scan gave them back); the scan, which saw every
// message once, keeps that count rather than writing its own lower one
// over it. It wrote its own, and the next reads went on past the
// other's, before.
func TestConcurrentReadKeepsTheHigherCount(t *testing.T) {
	ctx := testCtx(t)
	const limit, n = 5, 4
	p, last := limitedDLQ(t, ctx, limit, n)
	c := sqsServer(t).Client()
	other := &concurrentReader{write: func() {
		if _, err := c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(p.dlq),
			Tags: map[string]string{sqsdlq.ReadsTag: "3|2026-12-07T00:00:00Z"}}); err != nil {
			t.Error(err)
		}
	}}
	q, err := sqsdlq.Open(ctx, p.sourceURL("receivers=1"), sqsdlq.Options{Client: sqsServer(t).ClientVia(other)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	if err := q.Scan(ctx, "", func(envelope.Envelope) error { return nil }); err != nil {
		t.Fatal(err)
	}
	cost, err := open(t, ctx, p).Cost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cost.Highest != 3 || cost.ReadsLeft != limit-1-3 {
		t.Errorf("after a scan overlapping another pass that left 3: highest %d, %d reads left; want 3 and %d", cost.Highest, cost.ReadsLeft, limit-1-3)
	}
	if v, f := counts(t, ctx, last); v+f != 0 {
		t.Fatalf("the DLQ's DLQ holds %d messages", v+f)
	}
}
