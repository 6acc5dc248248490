package redisstream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backend/backendtest"
)

// TestContract runs the per-item contract on Redis Streams, against the
// package's redis-server: a stream per case, moved to a stream of its own.
func TestContract(t *testing.T) {
	n := 0
	backendtest.Suite{
		Registration: Registration(),
		Fresh: func(t *testing.T) backendtest.Fixture {
			n++
			dlq, dest := key(t, fmt.Sprintf("dlq%d", n)), key(t, fmt.Sprintf("orders%d", n))
			shared.Client().Del(context.Background(), "dlqctl:lease:{"+dlq+"}")
			return backendtest.Fixture{Source: shared.URL(0, dlq), Dest: dest}
		},
		// A lease renewed every 200 ms, so that a holder whose lease was
		// taken over sees it at once.
		Open: func(ctx context.Context, raw string) (backend.Source, error) {
			return Open(ctx, raw, Options{LeaseTTL: 600 * time.Millisecond})
		},
		// Redis Lua has no SHA-256, and a stream entry never changes.
		UncheckedComputed: true,
		Lease:             backendtest.LeaseBehaviour{LostWithin: 3 * time.Second},
	}.Run(t)
}
