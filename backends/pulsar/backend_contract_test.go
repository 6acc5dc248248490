package pulsardlq_test

import (
	"context"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backend/backendtest"
	pulsardlq "github.com/dlqctl/dlqctl/backends/pulsar"
)

// TestContract runs the per-item contract on Pulsar, against the
// package's broker: a DLQ topic per case, moved to a topic of its own.
func TestContract(t *testing.T) {
	backendtest.Suite{
		Registration: pulsardlq.Registration(),
		Fresh: func(t *testing.T) backendtest.Fixture {
			return backendtest.Fixture{Source: sourceURL(t, freshTopic(t, "")), Dest: freshTopic(t, "")}
		},
		// An exclusive consumer: the broker drops it when the holder's
		// connection dies, as Release's close does.
		Lease: backendtest.LeaseBehaviour{Crash: func(t *testing.T, l backend.Lease) {
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
	}.Run(t)
}
