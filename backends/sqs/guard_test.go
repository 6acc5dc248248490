package sqsdlq_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// TestGuardDestination: the DLQ itself is refused as a destination by
// name, queue URL and ARN; its source queue is not. A Publish to the DLQ
// is a per-entry failure that leaves the message in the DLQ.
func TestGuardDestination(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 1)
	q := open(t, ctx, p)
	// The shape of backend.DestinationGuard.
	var g interface {
		GuardDestination(ctx context.Context, dest string) error
	} = q
	for _, d := range []string{p.name, p.dlq, p.dlqArn} {
		if err := g.GuardDestination(ctx, d); err == nil || !strings.Contains(err.Error(), "this DLQ") {
			t.Errorf("GuardDestination(%q) = %v, want refused as this DLQ", d, err)
		}
	}
	for _, d := range []string{p.srcName, p.src, p.srcArn} {
		if err := g.GuardDestination(ctx, d); err != nil {
			t.Errorf("GuardDestination(%q) = %v, want nil", d, err)
		}
	}
	send(t, ctx, p.src, event{id: "G1", body: "g"})
	deadLetter(t, ctx, p, 1)
	for _, d := range []string{p.name, p.dlq, p.dlqArn} {
		its := items(scanAll(t, ctx, q), func(envelope.Envelope) string { return d })
		res, err := q.Publish(ctx, its, backend.Markers{RunID: "guard"})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err == nil {
			t.Fatalf("Publish to the DLQ as %q was not refused", d)
		}
	}
	if v, f := counts(t, ctx, p.dlq); v != 1 || f != 0 {
		t.Fatalf("DLQ has %d visible, %d in flight; want the one message visible", v, f)
	}
}
