package kafkadlq_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backend/backendtest"
	kafkadlq "github.com/dlqctl/dlqctl/backends/kafka"
)

// TestContract runs the per-item contract on Kafka, against the package's
// broker: a one-partition DLQ topic per case (records imported within one
// millisecond keep their order), moved to an origin topic of its own.
func TestContract(t *testing.T) {
	backendtest.Suite{
		Registration: kafkadlq.Registration(),
		Fresh: func(t *testing.T) backendtest.Fixture {
			ctx := ctxFor(t)
			dlq, origin := freshTopic(t, "-dlq"), freshTopic(t, "-orders")
			createTopic(t, ctx, dlq, 1, nil)
			createTopic(t, ctx, origin, 1, nil)
			return backendtest.Fixture{Source: "kafka://" + kafkaServer(t).Bootstrap() + "?topic=" + dlq, Dest: origin}
		},
		// A lease renewed every second, so that a holder whose lease was
		// taken over sees it soon.
		Open: func(ctx context.Context, raw string) (backend.Source, error) {
			return kafkadlq.Open(ctx, raw, kafkadlq.Options{LeaseTTL: 3 * time.Second})
		},
		Lease: backendtest.LeaseBehaviour{LostWithin: 10 * time.Second},
	}.Run(t)
}
