package rabbitmq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backends/rabbitmq"
	"github.com/dlqctl/dlqctl/backends/rabbitmq/rabbitmqtest"
	"github.com/dlqctl/dlqctl/conformance"
)

// suite is the shared conformance suite on this backend; in the child
// processes the suite starts, it makes this test binary dlqctl.
var suite = conformance.For(rabbitmq.Registration())

// TestConformance runs the shared conformance suite on RabbitMQ, against
// its real server.
func TestConformance(t *testing.T) {
	suite.Run(t, func(t *testing.T) *conformance.Target {
		b := rabbitmqtest.Start(t)
		n := 0
		plain := func(queue string) string { return strings.TrimSuffix(b.URL(), "/") + "/?queue=" + queue }
		return &conformance.Target{Down: b.Down, Up: b.Up, Outage: "&timeout=2s", Refuse: func(*testing.T, conformance.Fixture, string, string) {
			// Nothing to do: the refusing origin is a queue that was
			// never declared, and a mandatory publish to it through the
			// default exchange comes back unroutable.
		}, Missing: func(t *testing.T) string {
			return plain(fmt.Sprintf("conf-typo-%d", time.Now().UnixNano()))
		}, Fresh: func(t *testing.T) conformance.Fixture {
			n++
			base := fmt.Sprintf("conf-%d-%d", time.Now().UnixNano(), n)
			if err := rabbitmqtest.DeclareDLX(context.Background(), b.Channel(t), base+"-orders", base+"-dlq", false, 0); err != nil {
				t.Fatal(err)
			}
			return conformance.Fixture{Source: b.Source(base + "-dlq"), Origin: base + "-orders", Consume: []string{"--source", plain(base + "-orders")},
				Self: base + "-dlq", Alias: strings.Replace(b.Source(base+"-dlq"), "127.0.0.1:", "localhost:", 1)}
		}}
	})
}
