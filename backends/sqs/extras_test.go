package sqsdlq_test

import (
	"testing"

	"github.com/dlqctl/dlqctl/backends/sqs"
)

// TestExtras: the approximate counts, the source queue with its
// maxReceiveCount, the retention period and the oldest message's expiry.
func TestExtras(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 3)
	send(t, ctx, p.src, event{id: "A", body: "a"}, event{id: "B", body: "b"})
	deadLetter(t, ctx, p, 2)
	q := open(t, ctx, p)
	scanAll(t, ctx, q)
	x, err := q.Extras(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := x.JSON.(sqsdlq.SQSExtras)
	if s.Visible != 2 || s.InFlight != 0 || s.Delayed != 0 {
		t.Fatalf("counts %+v", s.Counts)
	}
	if len(s.Sources) != 1 || s.Sources[0].Name != p.srcName || s.Sources[0].RedrivePolicy.MaxReceiveCount != 3 || s.Sources[0].RedrivePolicy.DeadLetterTargetArn != p.dlqArn {
		t.Fatalf("sources %+v", s.Sources)
	}
	// ElasticMQ has no retention period: none is reported, nor an expiry.
	if s.RetentionSeconds != 0 || s.OldestExpiresAt != "" || len(s.Warnings) != 0 {
		t.Fatalf("retention %d, oldest expires %q, warnings %q", s.RetentionSeconds, s.OldestExpiresAt, s.Warnings)
	}
	if len(x.Rows) < 4 {
		t.Fatalf("rows %v", x.Rows)
	}
}
