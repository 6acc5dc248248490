package sqsdlq_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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

// TestSizeLimits: a message the run markers would push over a 256 KiB
// limit (the destination's, here given by max_message_size=) moves
// without them (redrive_count still raised); one that redrive_count alone
// pushes over is a named per-entry failure and stays in the DLQ; batches
// are sized by bytes, so big messages do not make a batch over the limit
// and small ones still move.
func TestSizeLimits(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 1)
	const limit = 256 * 1024
	put := func(id string, size int) { putSized(t, p, id, size) }
	put("near", limit-40)    // fits with redrive_count, not with the markers
	put("at-limit", limit-5) // redrive_count alone pushes it over
	for i := range 3 {
		put(fmt.Sprintf("big%d", i), 100*1024)
	}
	for i := range 4 {
		put(fmt.Sprintf("small%d", i), 200)
	}
	rc, batches := batchRecorder(t)
	// ElasticMQ reports no MaximumMessageSize: the URL gives SQS's.
	q, err := sqsdlq.Open(ctx, p.sourceURL("max_message_size=256KiB"), sqsdlq.Options{Client: rc})
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

// bigDeadLetters sends to the pair's DLQ one message per size (the body
// making up the rest), with event IDs PREFIXbig0, PREFIXbig1, …, and n
// small ones, PREFIXsmall0, …
func bigDeadLetters(t *testing.T, p pair, prefix string, n int, sizes ...int) {
	t.Helper()
	for i, size := range sizes {
		putSized(t, p, fmt.Sprintf("%sbig%d", prefix, i), size)
	}
	for i := range n {
		putSized(t, p, fmt.Sprintf("%ssmall%d", prefix, i), 200)
	}
}

// putSized sends the pair's DLQ a message of size bytes as SQS counts
// them, with event ID id and the source as its origin_stream.
func putSized(t *testing.T, p pair, id string, size int) {
	t.Helper()
	a := map[string]types.MessageAttributeValue{
		"event_id":      {DataType: aws.String("String"), StringValue: aws.String(id)},
		"origin_stream": {DataType: aws.String("String"), StringValue: aws.String(p.srcName)},
	}
	body := strings.Repeat("b", size-sqsSize("", a))
	if _, err := sqsServer(t).Client().SendMessage(testCtx(t), &sqs.SendMessageInput{QueueUrl: aws.String(p.dlq), MessageBody: aws.String(body), MessageAttributes: a}); err != nil {
		t.Fatal(err)
	}
}

// moveAll publishes every entry of q to its origin and removes what moved;
// it returns each entry's error by event ID (nil for moved).
func moveAll(t *testing.T, q *sqsdlq.Queue) map[string]error {
	t.Helper()
	ctx := testCtx(t)
	envs := scanAll(t, ctx, q)
	its := items(envs, func(e envelope.Envelope) string { return e.Origin.Topic })
	res, err := q.Publish(ctx, its, backend.Markers{RunID: "run-size"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]error{}
	var ok []backend.MoveItem
	for i, r := range res {
		out[envs[i].EventID] = r.Err
		if r.Err == nil {
			ok = append(ok, its[i])
		}
	}
	if _, err := q.Remove(ctx, ok); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUnreportedSizeLimit: ElasticMQ reports no MaximumMessageSize and
// takes messages up to 1 MiB. A 300 KiB dead letter there moves (it was
// refused as over 256 KiB, never sent, before), alone in its batch;
// small ones still go in batches of at most 256 KiB. With
// max_message_size= the URL's limit holds instead.
func TestUnreportedSizeLimit(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 1)
	bigDeadLetters(t, p, "", 3, 300*1024, 700*1024)
	rc, batches := batchRecorder(t)
	q, err := sqsdlq.Open(ctx, p.sourceURL(), sqsdlq.Options{Client: rc})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for id, err := range moveAll(t, q) {
		if err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	for _, n := range batches() {
		if n > 256*1024 && n > 700*1024+200 {
			t.Errorf("a SendMessageBatch of %d bytes: a big message shares its batch", n)
		}
	}
	back := drain(t, ctx, p.src)
	sizes := map[string]int{}
	for _, m := range back {
		sizes[aws.ToString(m.MessageAttributes["event_id"].StringValue)] = len(aws.ToString(m.Body))
	}
	if len(back) != 5 || sizes["big0"] < 300*1024-100 || sizes["big1"] < 700*1024-100 {
		t.Fatalf("on the source: %v, want big0 (300 KiB), big1 (700 KiB) and 3 small ones, once each", sizes)
	}
	if v, f := counts(t, ctx, p.dlq); v != 0 || f != 0 {
		t.Fatalf("DLQ %d visible %d in flight, want empty", v, f)
	}

	// The URL's limit, when given, is the destination's.
	bigDeadLetters(t, p, "b-", 1, 300*1024)
	q2, err := sqsdlq.Open(ctx, p.sourceURL("max_message_size=256KiB"), sqsdlq.Options{Client: sqsServer(t).Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	res := moveAll(t, q2)
	if err := res["b-big0"]; err == nil || !strings.Contains(err.Error(), "too large") || !strings.Contains(err.Error(), "limit of 262144 bytes") {
		t.Fatalf("300 KiB with max_message_size=256KiB: %v, want refused as too large before sending", err)
	}
	if res["b-small0"] != nil {
		t.Fatalf("small0: %v", res["b-small0"])
	}
}

// sizeCapped is a fake in front of the real server, for a limit
// ElasticMQ does not enforce (it counts bodies alone, up to 1 MiB): it
// answers SendMessageBatch as SQS does for a queue whose message limit
// is message bytes and batch limit batch bytes, counting body and
// attributes: a request over either is refused whole, naming the limit,
// and nothing of it reaches the server. Everything else passes through.
type sizeCapped struct {
	message, batch int

	mu      sync.Mutex
	refused int
}

func (s *sizeCapped) RoundTrip(r *http.Request) (*http.Response, error) {
	body, ok, err := callBody(r, "SendMessageBatch")
	if !ok || err != nil {
		return passOn(r, body, err)
	}
	var in struct {
		Entries []types.SendMessageBatchRequestEntry
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	total, largest := 0, 0
	for _, e := range in.Entries {
		n := sqsSize(aws.ToString(e.MessageBody), e.MessageAttributes)
		total, largest = total+n, max(largest, n)
	}
	refuse := func(code, msg string) (*http.Response, error) {
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		b, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.sqs#" + code, "message": msg})
		return &http.Response{StatusCode: 400, Status: "400 Bad Request", Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
			Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: r}, nil
	}
	switch {
	case largest > s.message:
		return refuse("InvalidParameterValue", fmt.Sprintf("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", s.message))
	case total > s.batch:
		return refuse("BatchRequestTooLong", fmt.Sprintf("Batch requests cannot be longer than %d bytes. You have sent %d bytes.", s.batch, total))
	}
	return passOn(r, body, nil)
}

// TestSizeLimitFromRefusals: a destination that takes less than the
// limit dlqctl was given (max_message_size=1MiB; sizeCapped takes 500 KiB
// per message and per batch, as SQS does with MaximumMessageSize 500
// KiB). A batch refused as too long is sent again in halves; a message
// that its run markers push over is sent again without them; one refused
// alone fails alone, named with the server's reason, and the entries after
// it still move; the limits the refusals named are kept, so a later run
// sends nothing the server refuses. Nothing is enqueued twice.
func TestSizeLimitFromRefusals(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 1)
	const kib = 1024
	fake := &sizeCapped{message: 500 * kib, batch: 500 * kib}
	// big0 and big1 share a batch under 1 MiB, which the server refuses;
	// big2 fits only without the markers; big3 does not fit at all.
	bigDeadLetters(t, p, "", 12, 300*kib, 300*kib, 500*kib-30, 600*kib)
	q, err := sqsdlq.Open(ctx, p.sourceURL("max_message_size=1MiB"), sqsdlq.Options{Client: sqsServer(t).ClientVia(fake)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	res := moveAll(t, q)
	for id, err := range res {
		switch {
		case id == "big3":
			if err == nil || !strings.Contains(err.Error(), "too large") || !strings.Contains(err.Error(), "shorter than 512000 bytes") {
				t.Errorf("big3 (600 KiB): %v, want a named too-large failure with the server's reason", err)
			}
		case err != nil:
			t.Errorf("%s: %v", id, err)
		}
	}
	if fake.refused < 3 {
		t.Fatalf("the server refused %d requests, want the batch, big2 with markers and big3 twice", fake.refused)
	}
	back := drain(t, ctx, p.src)
	seen := map[string]int{}
	for _, m := range back {
		id := aws.ToString(m.MessageAttributes["event_id"].StringValue)
		seen[id]++
		_, marked := m.MessageAttributes[backend.MarkerRunID]
		if id == "big2" && marked {
			t.Errorf("big2 arrived with its run markers, over the limit")
		}
	}
	if len(back) != 15 || seen["big3"] != 0 {
		t.Fatalf("on the source %d messages %v; want the 15 others once each", len(back), seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s arrived %d times", id, n)
		}
	}
	if v, f := counts(t, ctx, p.dlq); v != 1 || f != 0 {
		t.Fatalf("DLQ %d visible %d in flight, want big3 alone", v, f)
	}
	// The named limits are kept: a second run sends nothing the server
	// refuses (big3 fails its size check before it is sent; two 300 KiB
	// messages go in batches of their own).
	before := fake.refused
	bigDeadLetters(t, p, "2-", 0, 300*kib, 300*kib)
	res = moveAll(t, q)
	if fake.refused != before || res["2-big0"] != nil || res["2-big1"] != nil || res["big3"] == nil {
		t.Errorf("second run: %d more refusals, results %v; want none, the new ones moved, big3 failed", fake.refused-before, res)
	}
}
