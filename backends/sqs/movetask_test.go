package sqsdlq_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// TestCompareNativeMoveTask runs SQS's own redrive (StartMessageMoveTask)
// and dlqctl's on the same server over the same dead letters, and checks
// what docs/sqs.md says each keeps: both put every message back on its
// source with its body and attributes; dlqctl's sends get new MessageIds
// (SQS assigns them) and carry the old one in dlqctl_redriven_from, while
// ElasticMQ's move task keeps them (logged). The throughput of each is
// logged for the table (go test -v).
func TestCompareNativeMoveTask(t *testing.T) {
	server := sqsServer(t)
	const n = 300
	ctx := testCtx(t)
	mk := func() (pair, map[string]string) {
		p := newPair(t, ctx, false, 2)
		var evs []event
		for i := range n {
			evs = append(evs, event{id: fmt.Sprintf("M%03d", i), body: fmt.Sprintf(`{"n":%d}`, i), attrs: map[string]string{"tenant": "acme"}})
		}
		send(t, ctx, p.src, evs...)
		deadLetter(t, ctx, p, n)
		ids := map[string]string{} // event ID -> MessageId in the DLQ
		q := open(t, ctx, p)
		for _, e := range scanAll(t, ctx, q) {
			ids[e.EventID] = e.ID
		}
		return p, ids
	}
	check := func(name string, p pair, ids map[string]string, wantMarker bool) {
		t.Helper()
		back := drain(t, ctx, p.src)
		if len(back) != n {
			t.Fatalf("%s: %d of %d back on the source", name, len(back), n)
		}
		sameID := 0
		for _, m := range back {
			ev := aws.ToString(m.MessageAttributes["event_id"].StringValue)
			if aws.ToString(m.MessageAttributes["tenant"].StringValue) != "acme" {
				t.Fatalf("%s: %s lost its attributes", name, ev)
			}
			if aws.ToString(m.MessageId) == ids[ev] {
				sameID++
			}
			if got := aws.ToString(m.MessageAttributes["dlqctl_redriven_from"].StringValue); wantMarker && got != ids[ev] {
				t.Fatalf("%s: %s dlqctl_redriven_from %q, want %s", name, ev, got, ids[ev])
			}
		}
		t.Logf("%s: MessageId kept for %d of %d", name, sameID, n)
	}

	// SQS's own move task.
	p, ids := mk()
	start := time.Now()
	if _, err := server.Client().StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(p.dlqArn)}); err != nil {
		t.Fatal(err)
	}
	for count(t, ctx, p.dlq) > 0 {
		if time.Since(start) > time.Minute {
			t.Fatal("move task did not finish in a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	native := time.Since(start)
	check("StartMessageMoveTask", p, ids, false)

	// dlqctl: plan, approve, apply without a rate limit or reconciliation.
	p, ids = mk()
	dir := t.TempDir()
	src := []string{"--source", p.sourceURL("receivers=8")}
	if code, out := dlqctlRun(t, dir, nil, append(src, "redrive", "plan", "--reason", "compare", "--allow-disposition", "investigate", "--rate", "0", "--ramp", "100",
		"--settle", "0s", "--unverified-ok", "--out", "p.json")...); code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	}
	if code, out := dlqctlRun(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	start = time.Now()
	if code, out := dlqctlRun(t, dir, nil, append(src, "redrive", "apply", "p.json", "-o", "json")...); code != 0 {
		t.Fatalf("apply: %d %s", code, out)
	}
	ours := time.Since(start)
	if got := count(t, ctx, p.dlq); got != 0 {
		t.Fatalf("%d left in the DLQ", got)
	}
	check("dlqctl", p, ids, true)
	t.Logf("%d messages: StartMessageMoveTask %s (%.0f msg/s); dlqctl redrive apply (whole process, with its staleness check) %s (%.0f msg/s)",
		n, native.Round(time.Millisecond), float64(n)/native.Seconds(), ours.Round(time.Millisecond), float64(n)/ours.Seconds())
}
