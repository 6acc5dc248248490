package natsdlq

import (
	"context"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backend/backendtest"
)

// TestContract runs the per-item contract on NATS JetStream, against the
// package's nats-server: a copy stream per case, moved to an origin
// stream of its own.
func TestContract(t *testing.T) {
	backendtest.Suite{
		Registration: Registration(),
		Fresh: func(t *testing.T) backendtest.Fixture {
			url, _, origin, _ := fresh(t)
			return backendtest.Fixture{Source: url, Dest: origin + ".orders"}
		},
		// A lease renewed every 300 ms, so that a holder whose lease was
		// taken over sees it at once.
		Open: func(ctx context.Context, raw string) (backend.Source, error) {
			s, err := Open(ctx, raw, Options{})
			if err == nil {
				s.leaseEvery = 300 * time.Millisecond
			}
			return s, err
		},
		Lease: backendtest.LeaseBehaviour{LostWithin: 3 * time.Second},
	}.Run(t)
}
