package sqsdlq_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backend/backendtest"
	sqsdlq "github.com/dlqctl/dlqctl/backends/sqs"
)

// TestContract runs the per-item contract on SQS, against the package's
// ElasticMQ: a DLQ per case, moved back to its source queue.
func TestContract(t *testing.T) {
	client := sqsServer(t).Client()
	backendtest.Suite{
		Registration: sqsdlq.Registration(),
		Fresh: func(t *testing.T) backendtest.Fixture {
			p := newPair(t, testCtx(t), false, 2)
			return backendtest.Fixture{Source: p.sourceURL("lease_settle=200ms"), Dest: p.srcName}
		},
		// The test server's credentials, which the AWS chain would
		// otherwise look for, and a lease renewed every second, so that a
		// holder whose lease was taken over sees it soon.
		Open: func(ctx context.Context, raw string) (backend.Source, error) {
			q, err := sqsdlq.Open(ctx, raw, sqsdlq.Options{Client: client})
			if err == nil {
				q.SetLeaseRenew(time.Second)
			}
			return q, err
		},
		// Messages sent within one millisecond keep no order.
		Unordered: true,
		Lease:     backendtest.LeaseBehaviour{LostWithin: 5 * time.Second},
	}.Run(t)
}
