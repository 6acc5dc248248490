package sqsdlq_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/sqs"
	"github.com/dlqctl/dlqctl/envelope"
)

// sqsSize is a message's size as SQS counts it: body, and each
// attribute's name, data type and value.
func sqsSize(body string, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for k, v := range attrs {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// batchRecorder is an SQS client that records the payload size of every
// SendMessageBatch call made through it.
func batchRecorder(t testing.TB) (*sqs.Client, func() []int) {
	var (
		mu    sync.Mutex
		sizes []int
	)
	opts := sqsServer(t).Client().Options()
	opts.APIOptions = append(opts.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("record-batch", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if b, ok := in.Parameters.(*sqs.SendMessageBatchInput); ok {
				n := 0
				for _, e := range b.Entries {
					n += sqsSize(aws.ToString(e.MessageBody), e.MessageAttributes)
				}
				mu.Lock()
				sizes = append(sizes, n)
				mu.Unlock()
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	})
	return sqs.New(opts), func() []int { mu.Lock(); defer mu.Unlock(); return append([]int(nil), sizes...) }
}

// TestSizeLimits: a message the run markers would push over SQS's 256 KiB
// limit moves without them (redrive_count still raised); one that
// redrive_count alone pushes over is a named per-entry failure and stays
// in the DLQ; batches are sized by bytes, so big messages do not make a
// batch over the limit and small ones still move.
func TestSizeLimits(t *testing.T) {
	server := sqsServer(t)
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 1)
	c := server.Client()
	const limit = 256 * 1024
	attrs := func(id string) map[string]types.MessageAttributeValue {
		return map[string]types.MessageAttributeValue{
			"event_id":      {DataType: aws.String("String"), StringValue: aws.String(id)},
			"origin_stream": {DataType: aws.String("String"), StringValue: aws.String(p.srcName)},
		}
	}
	put := func(id string, size int) {
		a := attrs(id)
		body := strings.Repeat("b", size-sqsSize("", a))
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(p.dlq), MessageBody: aws.String(body), MessageAttributes: a}); err != nil {
			t.Fatal(err)
		}
	}
	put("near", limit-40)    // fits with redrive_count, not with the markers
	put("at-limit", limit-5) // redrive_count alone pushes it over
	for i := range 3 {
		put(fmt.Sprintf("big%d", i), 100*1024)
	}
	for i := range 4 {
		put(fmt.Sprintf("small%d", i), 200)
	}
	rc, batches := batchRecorder(t)
	q, err := sqsdlq.Open(ctx, p.sourceURL(), sqsdlq.Options{Client: rc})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	envs := scanAll(t, ctx, q)
	its := items(envs, func(e envelope.Envelope) string { return e.Origin.Topic })
	res, err := q.Publish(ctx, its, backend.Markers{RunID: "run-size"})
	if err != nil {
		t.Fatal(err)
	}
	var ok []backend.MoveItem
	for i, r := range res {
		switch {
		case envs[i].EventID == "at-limit":
			if r.Err == nil || !strings.Contains(r.Err.Error(), "too large") || !strings.Contains(r.Err.Error(), its[i].ID) {
				t.Fatalf("at-limit: %v, want a named too-large failure", r.Err)
			}
		case r.Err != nil:
			t.Fatalf("%s: %v", envs[i].EventID, r.Err)
		default:
			ok = append(ok, its[i])
		}
	}
	if _, err := q.Remove(ctx, ok); err != nil {
		t.Fatal(err)
	}
	for _, n := range batches() {
		if n > limit {
			t.Errorf("a SendMessageBatch of %d bytes, over the %d-byte batch limit", n, limit)
		}
	}
	back := drain(t, ctx, p.src)
	if len(back) != len(envs)-1 {
		t.Fatalf("%d on the source, want %d", len(back), len(envs)-1)
	}
	for _, m := range back {
		id := aws.ToString(m.MessageAttributes["event_id"].StringValue)
		if n := sqsSize(aws.ToString(m.Body), m.MessageAttributes); n > limit {
			t.Errorf("%s arrived with %d bytes, over the limit", id, n)
		}
		if aws.ToString(m.MessageAttributes["redrive_count"].StringValue) != "1" {
			t.Errorf("%s: redrive_count %v", id, m.MessageAttributes["redrive_count"])
		}
		_, marked := m.MessageAttributes[backend.MarkerRunID]
		if marked == (id == "near") {
			t.Errorf("%s: run marker present %v", id, marked)
		}
	}
	if v, f := counts(t, ctx, p.dlq); v != 1 || f != 0 {
		t.Fatalf("DLQ %d visible %d in flight, want the at-limit message visible", v, f)
	}
}
