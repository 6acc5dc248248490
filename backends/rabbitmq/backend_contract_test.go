package rabbitmq_test

import (
	"context"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backend/backendtest"
	"github.com/dlqctl/dlqctl/backends/rabbitmq"
	"github.com/dlqctl/dlqctl/backends/rabbitmq/rabbitmqtest"
)

// TestContract runs the per-item contract on RabbitMQ, against the
// package's broker: a classic DLQ behind a dead-letter exchange per case,
// moved back to its origin queue.
func TestContract(t *testing.T) {
	backendtest.Suite{
		Registration: rabbitmq.Registration(),
		Fresh: func(t *testing.T) backendtest.Fixture {
			srv := broker.Get(t)
			base := uniq(t)
			if err := rabbitmqtest.DeclareDLX(context.Background(), srv.Channel(t), base+"-orders", base+"-dlq", false, 0); err != nil {
				t.Fatal(err)
			}
			return backendtest.Fixture{Source: srv.Source(base + "-dlq"), Dest: base + "-orders"}
		},
		TailIsRun: "a classic queue has no offsets: its tail is the run holding the lease, and what comes after it carries that run's marker",
		// An exclusive queue on the holder's connection: the broker
		// deletes it when that connection dies, as Release's close does.
		Lease: backendtest.LeaseBehaviour{Crash: func(t *testing.T, l backend.Lease) {
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
	}.Run(t)
}
