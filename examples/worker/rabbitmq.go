//go:build !no_rabbitmq

package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backends/rabbitmq"
)

// rabbitMode consumes a queue; its dead-letter exchange dead-letters.
func rabbitMode() mode {
	return mode{
		prefixes: []string{"amqp://", "amqps://"},
		usage:    "amqp://user:pass@host:port/VHOST?queue=Q",
		help:     "amqp://user:pass@host:port/VHOST?queue=Q[&requeue=1]",
		open: func(_ context.Context, opts Options, _ io.Writer) (Source, error) {
			return openRabbitSource(opts.Source)
		},
	}
}

// rabbitSource reads a RabbitMQ queue as a production consumer does:
// consume with manual acknowledgement, process, ack. A failed delivery is
// rejected and the broker dead-letters it through the queue's
// dead-letter exchange: with basic.nack(requeue=false) at once, or, with
// requeue=1 on a quorum queue, by handing it back until the queue's
// delivery limit dead-letters it. Either way the broker writes x-death;
// it cannot carry a last_error, so --fail-error does not reach the DLQ.
type rabbitSource struct {
	conn       *amqp.Connection
	ch         *amqp.Channel
	deliveries <-chan amqp.Delivery
	queue      string
	requeue    bool
}

// openRabbitSource opens amqp://user:pass@host:port/VHOST?queue=Q[&requeue=1].
func openRabbitSource(raw string) (*rabbitSource, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, usagef("--source %s: want amqp://user:pass@host:port/VHOST?queue=Q[&requeue=1]", sourceURL(raw))
	}
	q, err := sourceQuery(raw, u.RawQuery, u.User != nil, "queue", "requeue")
	if err != nil {
		return nil, err
	}
	s := &rabbitSource{queue: q.Get("queue")}
	if s.queue == "" {
		return nil, usagef("--source: queue= is required")
	}
	if q.Bool("requeue", &s.requeue); q.Err() != nil {
		return nil, usagef("--source: %v", q.Err())
	}
	u.RawQuery = ""
	if s.conn, err = amqp.Dial(u.String()); err != nil {
		return nil, fmt.Errorf("rabbitmq: connect: %w", err)
	}
	if s.ch, err = s.conn.Channel(); err == nil {
		if err = s.ch.Qos(readCount, 0, false); err == nil {
			s.deliveries, err = s.ch.Consume(s.queue, "", false, false, false, false, nil)
		}
	}
	if err != nil {
		s.conn.Close()
		return nil, fmt.Errorf("rabbitmq: consume %s: %w", s.queue, err)
	}
	return s, nil
}

func (s *rabbitSource) Next(ctx context.Context) (Message, Receipt, error) {
	select {
	case d, ok := <-s.deliveries:
		if !ok {
			return Message{}, nil, fmt.Errorf("rabbitmq: the channel on %s closed", s.queue)
		}
		id := strconv.FormatUint(d.DeliveryTag, 10)
		return Message{ID: id, Envelope: rabbitmq.DecodeDelivery(&d)}, &rabbitReceipt{id: id, d: &d, requeue: s.requeue}, nil
	case <-time.After(pollWait):
		return Message{}, nil, errIdle
	case <-ctx.Done():
		return Message{}, nil, ctx.Err()
	}
}

// rabbitReceipt is one delivery, unacknowledged on the channel.
type rabbitReceipt struct {
	id      string // the delivery tag
	d       *amqp.Delivery
	requeue bool // the source's requeue=
}

func (r *rabbitReceipt) Ack(_ context.Context) error {
	if err := r.d.Ack(false); err != nil {
		return fmt.Errorf("rabbitmq: ack %s: %w", r.id, err)
	}
	return nil
}

// DeadLetter rejects the message: the queue's dead-letter exchange takes
// it (requeue=false), or the queue hands it out again and dead-letters it
// at its delivery limit (requeue=1, quorum queues).
func (r *rabbitReceipt) DeadLetter(_ context.Context, _ DeadLetter) error {
	if err := r.d.Nack(false, r.requeue); err != nil {
		return fmt.Errorf("rabbitmq: nack %s: %w", r.id, err)
	}
	return nil
}

func (s *rabbitSource) Close() error { return s.conn.Close() }
