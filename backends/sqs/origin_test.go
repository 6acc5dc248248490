package sqsdlq_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqctl/dlqctl/backends/sqs"
)

// TestRecordedOriginWins: a producer-set origin_stream attribute naming
// another queue does not choose where the message goes on redrive: it goes
// back to the queue SQS recorded in DeadLetterQueueSourceArn, and the
// claim is shown as the sqs.claimed_origin property.
func TestRecordedOriginWins(t *testing.T) {
	server := sqsServer(t)
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 1)
	vName := freshName(t, "-victim")
	victim, err := server.Client().CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(vName)})
	if err != nil {
		t.Fatal(err)
	}
	vURL := aws.ToString(victim.QueueUrl)
	send(t, ctx, p.src, event{id: "H1", body: "hostile", attrs: map[string]string{"origin_stream": vName}})
	deadLetter(t, ctx, p, 1)
	q := open(t, ctx, p)
	all := scanAll(t, ctx, q)
	if len(all) != 1 {
		t.Fatalf("scan saw %d", len(all))
	}
	if all[0].Origin.Topic != p.srcName || all[0].Properties[sqsdlq.SQSClaimedOriginProperty] != vName {
		t.Fatalf("origin %q, claimed %q; want %q and %q", all[0].Origin.Topic, all[0].Properties[sqsdlq.SQSClaimedOriginProperty], p.srcName, vName)
	}
	for i, r := range redriveAll(t, q, "run-origin") {
		if r.Err != nil {
			t.Fatalf("item %d: %v", i, r.Err)
		}
	}
	if n := count(t, ctx, vURL); n != 0 {
		t.Fatalf("%d messages sent to the queue the attribute named", n)
	}
	if n := len(drain(t, ctx, p.src)); n != 1 {
		t.Fatalf("%d messages back on the recorded source, want 1", n)
	}
}
