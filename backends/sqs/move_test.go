package sqsdlq_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

func scanAll(t *testing.T, ctx context.Context, q backend.Source) []envelope.Envelope {
	t.Helper()
	var got []envelope.Envelope
	if err := q.Scan(ctx, "", func(e envelope.Envelope) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func items(envs []envelope.Envelope, dest func(envelope.Envelope) string) []backend.MoveItem {
	out := make([]backend.MoveItem, len(envs))
	for i, e := range envs {
		out[i] = backend.MoveItem{Seq: int64(i + 1), ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint, Dest: dest(e)}
	}
	return out
}

// TestRedriveToOrigin: Publish puts the planned messages back on their
// source queue (body and attributes kept, redrive_count and markers
// added), leaves the others in the DLQ visible, and Remove deletes the
// planned ones from the DLQ.
func TestRedriveToOrigin(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	const n = 24
	for i := range n {
		send(t, ctx, p.src, event{id: fmt.Sprintf("E%02d", i), body: fmt.Sprintf(`{"n":%d}`, i), attrs: map[string]string{"tenant": "acme"}})
	}
	deadLetter(t, ctx, p, n)
	q := open(t, ctx, p)
	all := scanAll(t, ctx, q)
	planned := all[:15]
	its := items(planned, func(e envelope.Envelope) string { return q.DefaultDest(e.Origin.Topic) })
	res, err := q.Publish(ctx, its, backend.Markers{RunID: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.DestID == "" || r.Removed {
			t.Fatalf("item %d: %+v", i, r)
		}
	}
	if v, _ := counts(t, ctx, p.dlq); v != n-15 {
		t.Fatalf("during the move %d visible in the DLQ, want the %d not planned", v, n-15)
	}
	res, err = q.Remove(ctx, its)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || !r.Removed {
			t.Fatalf("remove item %d: %+v", i, r)
		}
	}
	if v, f := counts(t, ctx, p.dlq); v != n-15 || f != 0 {
		t.Fatalf("after the move the DLQ has %d visible, %d in flight; want %d, 0", v, f, n-15)
	}
	back := drain(t, ctx, p.src)
	if len(back) != 15 {
		t.Fatalf("%d messages back on the source, want 15", len(back))
	}
	byEvent := map[string]types.Message{}
	for _, m := range back {
		byEvent[aws.ToString(m.MessageAttributes["event_id"].StringValue)] = m
	}
	for i, e := range planned {
		m, ok := byEvent[e.EventID]
		if !ok {
			t.Fatalf("event %s not back on the source", e.EventID)
		}
		a := func(k string) string { return aws.ToString(m.MessageAttributes[k].StringValue) }
		if aws.ToString(m.Body) != string(e.Payload) || a("tenant") != "acme" || a("redrive_count") != "1" ||
			a(backend.MarkerRunID) != "run-1" || a(backend.MarkerSeq) != strconv.Itoa(i+1) || a(backend.MarkerRedrivenFrom) != e.ID {
			t.Fatalf("event %s came back as body %q attributes %v", e.EventID, aws.ToString(m.Body), m.MessageAttributes)
		}
		if envelope.ComputeFingerprint([]byte(aws.ToString(m.Body))) != e.Fingerprint {
			t.Fatalf("fingerprint changed")
		}
	}
	// A second Remove finds them gone.
	res, err = q.Remove(ctx, its[:2])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !errors.Is(r.Err, backend.ErrNotFound) {
			t.Fatalf("second remove: %+v, want ErrNotFound", r)
		}
	}
}

// TestPublishRefusals: a message no longer in the DLQ, one whose
// fingerprint changed and one without a destination are not sent.
func TestPublishRefusals(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	send(t, ctx, p.src, event{id: "A", body: "a"}, event{id: "B", body: "b"}, event{id: "C", body: "c"})
	deadLetter(t, ctx, p, 3)
	q := open(t, ctx, p)
	all := scanAll(t, ctx, q)
	its := items(all, func(e envelope.Envelope) string { return e.Origin.Topic })
	its[0].ID = "00000000-0000-0000-0000-000000000000"
	its[1].Fingerprint = "sha256:00"
	its[2].Dest = ""
	res, err := q.Publish(ctx, its, backend.Markers{RunID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, backend.ErrNotFound) || !errors.Is(res[1].Err, backend.ErrChanged) || res[2].Err == nil {
		t.Fatalf("results %+v", res)
	}
	if v, f := counts(t, ctx, p.dlq); v != 3 || f != 0 {
		t.Fatalf("DLQ %d visible %d in flight after refusals; want all 3 visible", v, f)
	}
	if got := count(t, ctx, p.src); got != 0 {
		t.Fatalf("%d messages sent to the source", got)
	}
}

// TestRedriveFIFO: a FIFO DLQ goes back to its FIFO source with the same
// MessageGroupId, in order within each group, and a second publish of
// the same events (a resend after an unknown outcome) is dropped by SQS's
// deduplication.
func TestRedriveFIFO(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, true, 1)
	var evs []event
	for i := range 6 {
		evs = append(evs, event{id: fmt.Sprintf("F%d", i), body: fmt.Sprintf("body-%d", i), group: fmt.Sprintf("g%d", i%2)})
	}
	send(t, ctx, p.src, evs...)
	// A FIFO queue hands out a group's next message only once the earlier
	// one is gone: receive one at a time until all are dead letters.
	deadLetter(t, ctx, p, len(evs))
	q := open(t, ctx, p)
	all := scanAll(t, ctx, q)
	if len(all) != len(evs) {
		t.Fatalf("scan saw %d of %d", len(all), len(evs))
	}
	for i := 1; i < len(all); i++ {
		if all[i].Key < all[i-1].Key {
			t.Fatalf("scan not by group: %s after %s", all[i].Key, all[i-1].Key)
		}
	}
	its := items(all, func(e envelope.Envelope) string { return e.Origin.Topic })
	for round := range 2 {
		res, err := q.Publish(ctx, its, backend.Markers{RunID: "fifo-run"})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("round %d item %d: %v", round, i, r.Err)
			}
		}
	}
	if _, err := q.Remove(ctx, its); err != nil {
		t.Fatal(err)
	}
	back := drainFIFO(t, ctx, p.src)
	if len(back) != len(evs) {
		t.Fatalf("%d messages on the FIFO source after two publishes, want %d (the resend deduplicated)", len(back), len(evs))
	}
	last := map[string]int{}
	for _, m := range back {
		g := m.Attributes["MessageGroupId"]
		var n int
		fmt.Sscanf(aws.ToString(m.Body), "body-%d", &n)
		if prev, ok := last[g]; ok && n < prev {
			t.Fatalf("group %s out of order: %d after %d", g, n, prev)
		}
		if fmt.Sprintf("g%d", n%2) != g {
			t.Fatalf("body-%d came back in group %s", n, g)
		}
		last[g] = n
	}
}

// drainFIFO receives one message at a time and deletes it, so that a
// group's order shows.
func drainFIFO(t *testing.T, ctx context.Context, queueURL string) []types.Message {
	t.Helper()
	server := sqsServer(t)
	c := server.Client()
	var all []types.Message
	for {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 1, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return all
		}
		m := out.Messages[0]
		all = append(all, m)
		if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRemoveAfterReceiptExpired: a message whose receipt handle the
// Publish held was received again by someone else (its visibility ran
// out) is received once more and deleted, not left behind.
func TestRemoveAfterReceiptExpired(t *testing.T) {
	server := sqsServer(t)
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	send(t, ctx, p.src, event{id: "X", body: "x"})
	deadLetter(t, ctx, p, 1)
	q := open(t, ctx, p)
	all := scanAll(t, ctx, q)
	its := items(all, func(e envelope.Envelope) string { return e.Origin.Topic })
	if _, err := q.Publish(ctx, its, backend.Markers{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	other := open(t, ctx, p)
	c := server.Client()
	// Make the message visible again as an expired timeout would.
	msgs := heldReceipt(t, ctx, q, its[0].ID)
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(p.dlq), ReceiptHandle: aws.String(msgs), VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	// Another reader receives it (a new receipt handle) and lets it go.
	if got := scanAll(t, ctx, other); len(got) != 1 {
		t.Fatalf("other reader saw %d", len(got))
	}
	res, err := q.Remove(ctx, its)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || !res[0].Removed {
		t.Fatalf("remove with an expired receipt handle: %+v", res[0])
	}
	if n := count(t, ctx, p.dlq); n != 0 {
		t.Fatalf("%d left in the DLQ", n)
	}
}

func heldReceipt(t *testing.T, _ context.Context, q interface{ HeldReceipt(string) string }, id string) string {
	t.Helper()
	h := q.HeldReceipt(id)
	if h == "" {
		t.Fatalf("no receipt handle held for %s", id)
	}
	return h
}
