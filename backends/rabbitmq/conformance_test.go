package rabbitmq_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backends/rabbitmq"
	"github.com/dlqctl/dlqctl/backends/rabbitmq/rabbitmqtest"
	"github.com/dlqctl/dlqctl/conformance"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/internal/testproc"
)

// suite is the shared conformance suite on this backend; in the child
// processes the suite starts, it makes this test binary dlqctl.
var suite = conformance.For(rabbitmq.Registration())

// TestConformance runs the shared conformance suite on RabbitMQ, against
// its real server. It runs beside TestConformanceStream, each on a broker
// of its own: both mostly wait (rates, settles, restarts), and one after
// the other they take the package past ten minutes.
func TestConformance(t *testing.T) {
	t.Parallel()
	suite.Run(t, func(t *testing.T) *conformance.Target {
		b := rabbitmqtest.Start(t)
		n := 0
		plain := func(queue string) string { return strings.TrimSuffix(b.URL(), "/") + "/?queue=" + queue }
		fixture := func(base string) conformance.Fixture {
			return conformance.Fixture{Source: b.Source(base + "-dlq"), Origin: base + "-orders", Consume: []string{"--source", plain(base + "-orders")},
				Self: base + "-dlq", Alias: strings.Replace(b.Source(base+"-dlq"), "127.0.0.1:", "localhost:", 1)}
		}
		newBase := func() string {
			n++
			return fmt.Sprintf("conf-%d-%d", time.Now().UnixNano(), n)
		}
		return &conformance.Target{Down: b.Down, Up: b.Up, Outage: "&timeout=2s", Refuse: func(*testing.T, conformance.Fixture, string, string) {
			// Nothing to do: the refusing origin is a queue that was
			// never declared, and a mandatory publish to it through the
			// default exchange comes back unroutable.
		}, Missing: func(t *testing.T) string {
			return plain(fmt.Sprintf("conf-typo-%d", time.Now().UnixNano()))
		}, Fresh: func(t *testing.T) conformance.Fixture {
			base := newBase()
			if err := rabbitmqtest.DeclareDLX(context.Background(), b.Channel(t), base+"-orders", base+"-dlq", false, 0); err != nil {
				t.Fatal(err)
			}
			return fixture(base)
		},
			Kill: func() error { return killBroker(b) },
			PID:  func() int { return brokerPID(b) },
			Held: func(t *testing.T, fx conformance.Fixture) int {
				return depth(t, b, fx.Self)
			},
			Published: func(t *testing.T, fx conformance.Fixture) int {
				return depth(t, b, fx.Origin)
			},
			Recreate: func(t *testing.T, fx conformance.Fixture) {
				ch := b.Channel(t)
				if _, err := ch.QueueDelete(fx.Self, false, false, false); err != nil {
					t.Fatal(err)
				}
				if err := rabbitmqtest.DeclareDLX(context.Background(), ch, fx.Origin, fx.Self, false, 0); err != nil {
					t.Fatal(err)
				}
			},
			Snapshot: func(t *testing.T, fx conformance.Fixture) []string {
				return snapshot(t, b, fx.Self)
			},
			Limited: func(t *testing.T) conformance.Fixture {
				// A quorum DLQ with the lowest delivery limit RabbitMQ
				// takes: 0 (3.10 drops a message at its first return, as
				// it does for any limit below 1).
				base := newBase()
				ch := b.Channel(t)
				dlx := base + "-dlq.dlx"
				if err := ch.ExchangeDeclare(dlx, "fanout", true, false, false, false, nil); err != nil {
					t.Fatal(err)
				}
				if _, err := ch.QueueDeclare(base+"-dlq", true, false, false, false, amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(0)}); err != nil {
					t.Fatal(err)
				}
				if err := ch.QueueBind(base+"-dlq", "", dlx, false, nil); err != nil {
					t.Fatal(err)
				}
				if _, err := ch.QueueDeclare(base+"-orders", true, false, false, false, amqp.Table{"x-dead-letter-exchange": dlx}); err != nil {
					t.Fatal(err)
				}
				return fixture(base)
			},
			Native:      nativeHook(b),
			Forge:       forgeHook(b),
			Bookkeeping: bookkeeping,
			NotApplicable: map[string]string{
				"two-pointers": "an entry is a dead-lettered copy holding the message whole",
			},
		}
	})
}

// brokerPID is the broker's Erlang VM: the process that listens on the
// AMQP port (its process group holds the rest of the node).
func brokerPID(b *rabbitmqtest.Server) int {
	u, err := url.Parse(b.URL())
	if err != nil {
		return 0
	}
	port, _ := strconv.Atoi(u.Port())
	p, _ := testproc.ListenerPID(port)
	return p
}

// killBroker is a SIGKILL of the node, then the script's stop (its epmd,
// its files) before Up starts it again on the same folder.
func killBroker(b *rabbitmqtest.Server) error {
	if err := testproc.KillProcess(brokerPID(b)); err != nil {
		return err
	}
	return b.Down()
}

// nativeHook writes copies of e into fx's DLQ as the broker dead-letters
// a rejected message: the same body, properties and x-death each time (a
// producer that published it three times, rejected within one second).
func nativeHook(b *rabbitmqtest.Server) func(t *testing.T, fx conformance.Fixture, e envelope.Envelope, copies int) {
	return func(t *testing.T, fx conformance.Fixture, e envelope.Envelope, copies int) {
		deadLetterNatively(t, b, fx.Self, e, copies)
	}
}

func deadLetterNatively(t *testing.T, b *rabbitmqtest.Server, dlq string, e envelope.Envelope, copies int) {
	at, origin := e.DeadLetteredAt, e.Origin.Topic
	death := amqp.Table{"count": int64(1), "reason": "rejected", "queue": origin, "time": at,
		"exchange": "", "routing-keys": []any{origin}}
	p := amqp.Publishing{Body: e.Payload, ContentType: e.ContentType, MessageId: e.EventID, DeliveryMode: amqp.Persistent,
		Timestamp: at, Headers: amqp.Table{
			"event_id": e.EventID, "last_error": e.LastError, "key": e.Key,
			"x-death": []any{death}, "x-first-death-queue": origin, "x-first-death-reason": "rejected",
			"x-first-death-exchange": "",
		}}
	ch := b.Channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for range copies {
		dc, err := ch.PublishWithDeferredConfirm("", dlq, true, false, p)
		if err != nil {
			t.Fatal(err)
		}
		if !dc.Wait() {
			t.Fatal("the broker refused a dead letter (nack)")
		}
	}
}

// bookkeeping is every queue dlqctl keeps beside the DLQ fx: its lease
// and the lease's holder, the read count of a quorum DLQ, the record of
// removals with its key, and the broker epoch.
func bookkeeping(fx conformance.Fixture) []string {
	return []string{"dlqctl.lease." + fx.Self, "dlqctl.lease." + fx.Self + ".holder", "dlqctl.reads." + fx.Self,
		"dlqctl.removed." + fx.Self, "dlqctl.removed." + fx.Self + ".key", "dlqctl.epoch." + fx.Self}
}

// forgeHook writes, as a plain producer that may publish to dlqctl's
// queues would, that fx's entry entryID was removed: pages of the record
// of removals exactly as dlqctl writes them, one without a MAC and one
// with a MAC under a key of the forger's; a key of its own to the key
// queue; and, on a classic or quorum DLQ, a broker epoch of its own. A
// producer cannot declare dlqctl's queues, so the record is first made as
// dlqctl's first removal makes it.
func forgeHook(b *rabbitmqtest.Server) func(t *testing.T, fx conformance.Fixture, entryID string) {
	return func(t *testing.T, fx conformance.Fixture, entryID string) { forgeRecord(t, b, fx, entryID) }
}

func forgeRecord(t *testing.T, b *rabbitmqtest.Server, fx conformance.Fixture, entryID string) {
	ctx := context.Background()
	if err := rabbitmq.PrepareRecord(ctx, fx.Source); err != nil {
		t.Fatal(err)
	}
	queue, pages, err := rabbitmq.ForgedPages(ctx, fx.Source, entryID)
	if err != nil {
		t.Fatal(err)
	}
	ch := b.Channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publish := func(queue string, m amqp.Publishing) bool {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, m)
		if err != nil {
			t.Fatal(err)
		}
		return dc.Wait()
	}
	for _, p := range pages {
		if !publish(queue, p) {
			t.Fatalf("the broker refused a forged page in %s", queue)
		}
	}
	key := make([]byte, 32)
	if publish(queue+".key", amqp.Publishing{Body: key, DeliveryMode: amqp.Persistent}) {
		t.Logf("%s took a second key", queue+".key")
	}
	// A stream DLQ's record has no epoch: the publish is unroutable.
	epoch, err := rabbitmq.EpochQueue(ctx, fx.Source)
	if err != nil {
		t.Fatal(err)
	}
	if !publish(epoch, amqp.Publishing{Body: []byte("0123456789abcdef"), DeliveryMode: amqp.Transient}) {
		t.Logf("%s refused a forged epoch token", epoch)
	}
}

// snapshot reads the queue's messages in order (basic.get, never acked)
// with their properties, headers (x-delivery-count among them on a quorum
// queue) and bodies, then closes the channel: they all go back, and a
// quorum queue counts that as one more delivery each.
func snapshot(t *testing.T, b *rabbitmqtest.Server, queue string) []string {
	c, err := b.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := 1; ; i++ {
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		h := map[string]any{}
		for k, v := range d.Headers {
			if k == "x-delivery-count" {
				k = "deliveries"
			}
			h[k] = v
		}
		lines = append(lines, fmt.Sprintf("%d message_id=%s type=%s%s %s", i, d.MessageId, d.ContentType, conformance.Fields(h), d.Body))
	}
	return lines
}
