package sqsdlq_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// redriveAll publishes and removes every message of q's DLQ to its origin
// as run runID, failing the test on any per-item error.
func redriveAll(t *testing.T, q interface {
	backend.Source
	backend.Mover
}, runID string) []backend.MoveResult {
	t.Helper()
	ctx := testCtx(t)
	its := items(scanAll(t, ctx, q), func(e envelope.Envelope) string { return e.Origin.Topic })
	res, err := q.Publish(ctx, its, backend.Markers{RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	var ok []backend.MoveItem
	for i, r := range res {
		if r.Err == nil {
			ok = append(ok, its[i])
		}
	}
	if _, err := q.Remove(ctx, ok); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestFIFORedriveTwiceWithinDedupWindow: the runbook's flow — redrive, the
// consumer fails again, redrive again — inside SQS's five-minute
// deduplication window puts the event back both times: the second run's
// send is not deduplicated against the first run's.
func TestFIFORedriveTwiceWithinDedupWindow(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, true, 1)
	send(t, ctx, p.src, event{id: "T1", body: "twice", group: "g"})
	deadLetter(t, ctx, p, 1)
	q := open(t, ctx, p)
	for run, id := range []string{"run-one", "run-two"} {
		for i, r := range redriveAll(t, q, id) {
			if r.Err != nil {
				t.Fatalf("run %d item %d: %v", run, i, r.Err)
			}
		}
		if run == 0 {
			// The consumer fails again: the event is a dead letter again.
			deadLetter(t, ctx, p, 1)
		}
	}
	if n := count(t, ctx, p.dlq); n != 0 {
		t.Fatalf("%d left in the DLQ", n)
	}
	if back := drainFIFO(t, ctx, p.src); len(back) != 1 {
		t.Fatalf("after the second redrive %d messages on the source, want 1 (the second run's send was deduplicated away and the DLQ copy deleted)", len(back))
	}
}

// TestFIFOTwoCopiesOfOneEvent: two DLQ copies of one event with different
// attributes both go back; neither is absorbed by deduplication while
// counted as moved.
func TestFIFOTwoCopiesOfOneEvent(t *testing.T) {
	server := sqsServer(t)
	ctx := testCtx(t)
	p := newPair(t, ctx, true, 1)
	c := server.Client()
	for i, tenant := range []string{"a", "b"} {
		_, err := c.SendMessage(ctx, &sqs.SendMessageInput{
			QueueUrl: aws.String(p.dlq), MessageBody: aws.String("same body"), MessageGroupId: aws.String("g"),
			MessageDeduplicationId: aws.String("copy-" + tenant),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"event_id":      {DataType: aws.String("String"), StringValue: aws.String("DUP")},
				"tenant":        {DataType: aws.String("String"), StringValue: aws.String(tenant)},
				"origin_stream": {DataType: aws.String("String"), StringValue: aws.String(p.srcName)},
			},
		})
		if err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
	q := open(t, ctx, p)
	res := redriveAll(t, q, "run-dup")
	moved := 0
	for _, r := range res {
		if r.Err == nil {
			moved++
		}
	}
	back := drainFIFO(t, ctx, p.src)
	if len(back) != moved {
		t.Fatalf("%d counted as moved, %d on the source", moved, len(back))
	}
	if len(back) != 2 {
		t.Fatalf("%d copies on the source, want both", len(back))
	}
}
