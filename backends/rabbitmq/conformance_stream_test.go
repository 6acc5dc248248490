package rabbitmq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

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
	t.Parallel() // beside TestConformance (see there)
	suite.Run(t, func(t *testing.T) *conformance.Target {
		return streamTarget(t, rabbitmqtest.Start(t))
	})
}

// streamTarget is the conformance target whose DLQs are streams.
func streamTarget(t *testing.T, b *rabbitmqtest.Server) *conformance.Target {
	n := 0
	plain := func(queue string) string { return strings.TrimSuffix(b.URL(), "/") + "/?queue=" + queue }
	initStream := func(t *testing.T, origin, dlq string) {
		init := rabbitmq.Registration().InitDLQ
		if _, err := init(context.Background(), b.Source(origin)+"&dlq="+dlq, backend.OpenOptions{Getenv: func(string) string { return "" }}, false); err != nil {
			t.Fatal(err)
		}
	}
	return &conformance.Target{Down: b.Down, Up: b.Up, Outage: "&timeout=2s", Refuse: func(*testing.T, conformance.Fixture, string, string) {
		// As for the classic shape: the refusing origin is a queue that
		// was never declared.
	}, Missing: func(t *testing.T) string {
		return plain(fmt.Sprintf("conf-typo-%d", time.Now().UnixNano()))
	}, Fresh: func(t *testing.T) conformance.Fixture {
		n++
		base := fmt.Sprintf("conf-s-%d-%d", time.Now().UnixNano(), n)
		if err := rabbitmqtest.DeclareOrigin(context.Background(), b.Channel(t), base+"-orders", base+"-orders.dlx"); err != nil {
			t.Fatal(err)
		}
		initStream(t, base+"-orders", base+"-dlq")
		return conformance.Fixture{Source: b.Source(base + "-dlq"), Origin: base + "-orders", Consume: []string{"--source", plain(base + "-orders")},
			Self: base + "-dlq", Alias: strings.Replace(b.Source(base+"-dlq"), "127.0.0.1:", "localhost:", 1)}
	},
		Shape: "stream",
		Kill:  func() error { return killBroker(b) },
		PID:   func() int { return brokerPID(b) },
		// Held is nil: a stream keeps every message, so a removal is
		// dlqctl's record alone.
		Published: func(t *testing.T, fx conformance.Fixture) int {
			return depth(t, b, fx.Origin)
		},
		Recreate: func(t *testing.T, fx conformance.Fixture) {
			// Deleted with the broker's tools, made again by dlq init.
			if _, err := b.Channel(t).QueueDelete(fx.Self, false, false, false); err != nil {
				t.Fatal(err)
			}
			initStream(t, fx.Origin, fx.Self)
		},
		Snapshot: func(t *testing.T, fx conformance.Fixture) []string {
			return streamSnapshot(t, b, fx.Self)
		},
		Native:      nativeHook(b),
		Forge:       forgeHook(b),
		Bookkeeping: bookkeeping,
		NotApplicable: map[string]string{
			"two-pointers":      "an entry is a dead-lettered copy holding the message whole",
			"read-only-limited": "a stream is read by offset: no delivery count, no limit",
		},
	}
}

// streamSnapshot reads the stream from its first offset: each message's
// position, offset, properties, headers and body, then the consumers the
// stream has (a read must leave none behind).
func streamSnapshot(t *testing.T, b *rabbitmqtest.Server, stream string) []string {
	c, err := b.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	st, err := ch.QueueDeclarePassive(stream, true, false, false, false, amqp.Table{"x-queue-type": "stream"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(100, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(stream, "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	// The stream's end is where nothing more comes: a second of quiet.
	for i := 1; ; i++ {
		select {
		case d := <-ds:
			h := amqp.Table{}
			for k, v := range d.Headers {
				h[k] = v
			}
			off := h["x-stream-offset"]
			delete(h, "x-stream-offset")
			lines = append(lines, fmt.Sprintf("%d offset=%v message_id=%s type=%s%s %s", i, off, d.MessageId, d.ContentType, conformance.Fields(h), d.Body))
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
			continue
		case <-time.After(time.Second):
		}
		break
	}
	return append(lines, fmt.Sprintf("consumers=%d", st.Consumers))
}
