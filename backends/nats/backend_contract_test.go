package natsdlq

import (
	"testing"
	"time"

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
		// A KV key: a holder whose lease was taken over sees it at its
		// next renewal, a third of the lease's TTL.
		Lease: backendtest.LeaseBehaviour{LostWithin: LeaseTTL/3 + 2*time.Second},
	}.Run(t)
}
