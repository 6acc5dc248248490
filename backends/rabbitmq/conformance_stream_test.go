package rabbitmq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/rabbitmq"
	"github.com/dlqctl/dlqctl/backends/rabbitmq/rabbitmqtest"
	"github.com/dlqctl/dlqctl/conformance"
)

// TestConformanceStream runs the shared conformance suite on RabbitMQ's
// stream shape: each fixture's DLQ is a stream that dlq init makes for the
// origin, fed by the origin's dead-letter exchange (on 3.10 through the
// staging queue and shovel dlq init sets up).
func TestConformanceStream(t *testing.T) {
	suite.Run(t, func(t *testing.T) *conformance.Target {
		return streamTarget(t, rabbitmqtest.Start(t))
	})
}

// streamTarget is the conformance target whose DLQs are streams.
func streamTarget(t *testing.T, b *rabbitmqtest.Server) *conformance.Target {
	n := 0
	plain := func(queue string) string { return strings.TrimSuffix(b.URL(), "/") + "/?queue=" + queue }
	return &conformance.Target{Down: b.Down, Up: b.Up, Outage: "&timeout=2s", Refuse: func(*testing.T, conformance.Fixture, string, string) {
		// As for the classic shape: the refusing origin is a queue that
		// was never declared.
	}, Missing: func(t *testing.T) string {
		return plain(fmt.Sprintf("conf-typo-%d", time.Now().UnixNano()))
	}, Fresh: func(t *testing.T) conformance.Fixture {
		n++
		base := fmt.Sprintf("conf-s-%d-%d", time.Now().UnixNano(), n)
		ctx := context.Background()
		if err := rabbitmqtest.DeclareOrigin(ctx, b.Channel(t), base+"-orders", base+"-orders.dlx"); err != nil {
			t.Fatal(err)
		}
		init := rabbitmq.Registration().InitDLQ
		if _, err := init(ctx, b.Source(base+"-orders")+"&dlq="+base+"-dlq", backend.OpenOptions{Getenv: func(string) string { return "" }}, false); err != nil {
			t.Fatal(err)
		}
		return conformance.Fixture{Source: b.Source(base + "-dlq"), Origin: base + "-orders", Consume: []string{"--source", plain(base + "-orders")},
			Self: base + "-dlq", Alias: strings.Replace(b.Source(base+"-dlq"), "127.0.0.1:", "localhost:", 1)}
	}}
}
