package natsdlq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	natsdlq "github.com/dlqctl/dlqctl/backends/nats"
	"github.com/dlqctl/dlqctl/backends/nats/natstest"
	"github.com/dlqctl/dlqctl/conformance"
)

// suite is the shared conformance suite on this backend; in the child
// processes the suite starts, it makes this test binary dlqctl.
var suite = conformance.For(natsdlq.Registration())

// TestConformance runs the shared conformance suite on NATS JetStream, against
// its real server.
func TestConformance(t *testing.T) {
	suite.Run(t, func(t *testing.T) *conformance.Target {
		srv := natstest.Start(t)
		_, js := srv.JetStream(t)
		n := 0
		return &conformance.Target{Down: srv.Down, Up: srv.Up, Outage: "&timeout=1s", Refuse: func(*testing.T, conformance.Fixture, string, string) {
			// Nothing to do: no stream takes the refusing origin's
			// subject, so its publish has no responder and stores nothing.
		}, Missing: func(t *testing.T) string {
			return srv.URL() + "?stream=conf-typo-" + fmt.Sprint(time.Now().UnixNano())
		}, Fresh: func(t *testing.T) conformance.Fixture {
			n++
			base := fmt.Sprintf("conf-%d-%d", time.Now().UnixNano(), n)
			ctx := context.Background()
			// The copy stream as import --init makes it; the origin
			// stream takes the subject the seeded envelopes name.
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: base + "_DLQ", Subjects: natsdlq.CopySubjects(base + "_DLQ"), AllowDirect: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: base + "_ORDERS", Subjects: []string{base + ".orders"}}); err != nil {
				t.Fatal(err)
			}
			return conformance.Fixture{Source: srv.URL() + "?stream=" + base + "_DLQ", Origin: base + ".orders",
				Consume: []string{"--source", srv.URL() + "?stream=" + base + "_ORDERS&consumer=workers", "--dlq", base + "_DLQ"},
				Self:    "dlq." + base + "_DLQ." + base + ".orders",
				Alias:   strings.Replace(srv.URL(), "127.0.0.1:", "localhost:", 1) + "?stream=" + base + "_DLQ"}
		}}
	})
}
