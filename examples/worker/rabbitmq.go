//go:build !no_rabbitmq

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backends/rabbitmq"
)

// rabbitMode consumes a queue; its dead-letter exchange dead-letters.
// --create makes the queue, its dead-letter exchange and the DLQ.
func rabbitMode() mode {
	return mode{
		prefixes: []string{"amqp://", "amqps://"},
		usage:    "amqp://user:pass@host:port/VHOST?queue=Q",
		help:     "amqp://user:pass@host:port/VHOST?queue=Q[&requeue=1]",
		open: func(_ context.Context, opts Options, _ io.Writer) (Source, error) {
			return openRabbitSource(opts.Source)
		},
		create: func(_ context.Context, opts Options, stdout io.Writer) error {
			return createRabbit(opts.Source, opts.DLQ, opts.MaxDeliveries, stdout)
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

// rabbitURL is a parsed amqp://user:pass@host:port/VHOST?queue=Q[&requeue=1].
type rabbitURL struct {
	dial    string // the URL without its query: what amqp.Dial takes
	queue   string
	requeue bool
}

func parseRabbitURL(raw string) (rabbitURL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return rabbitURL{}, usagef("--source %s: want amqp://user:pass@host:port/VHOST?queue=Q[&requeue=1]", sourceURL(raw))
	}
	q, err := sourceQuery(raw, u.RawQuery, u.User != nil, "queue", "requeue")
	if err != nil {
		return rabbitURL{}, err
	}
	r := rabbitURL{queue: q.Get("queue")}
	if r.queue == "" {
		return r, usagef("--source: queue= is required")
	}
	if q.Bool("requeue", &r.requeue); q.Err() != nil {
		return r, usagef("--source: %v", q.Err())
	}
	u.RawQuery = ""
	r.dial = u.String()
	return r, nil
}

// openRabbitSource opens amqp://user:pass@host:port/VHOST?queue=Q[&requeue=1].
func openRabbitSource(raw string) (*rabbitSource, error) {
	r, err := parseRabbitURL(raw)
	if err != nil {
		return nil, err
	}
	s := &rabbitSource{queue: r.queue, requeue: r.requeue}
	if s.conn, err = amqp.Dial(r.dial); err != nil {
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

// createRabbit makes what a rehearsal needs and RabbitMQ does not make by
// itself: the DLQ (a classic queue, which dlqctl reads without spending
// deliveries), a fanout dead-letter exchange DLQ.dlx bound to it, and the
// origin queue, whose dead letters go through that exchange: classic, or
// with requeue=1 a quorum queue that dead-letters a message after
// maxDeliveries deliveries (its x-delivery-limit is maxDeliveries-1
// redeliveries). A queue or exchange that exists is left as it is.
func createRabbit(raw, dlq string, maxDeliveries int, stdout io.Writer) error {
	r, err := parseRabbitURL(raw)
	if err != nil {
		return err
	}
	if dlq == "" {
		dlq = r.queue + "-dlq"
	}
	conn, err := amqp.Dial(r.dial)
	if err != nil {
		return fmt.Errorf("rabbitmq: connect: %w", err)
	}
	defer conn.Close()
	dlx := dlq + ".dlx"
	created, err := rabbitDeclare(conn, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(dlx, "fanout", true, false, false, false, nil)
	}, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(dlx, "fanout", true, false, false, false, nil)
	})
	if err != nil {
		return fmt.Errorf("rabbitmq: dead-letter exchange %s: %w", dlx, err)
	}
	rabbitSays(stdout, "exchange", dlx, created)
	if err := rabbitQueue(conn, dlq, nil, stdout); err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("rabbitmq: channel: %w", err)
	}
	if err := ch.QueueBind(dlq, "", dlx, false, nil); err != nil {
		return fmt.Errorf("rabbitmq: bind %s to %s: %w", dlq, dlx, err)
	}
	ch.Close()
	args := amqp.Table{"x-dead-letter-exchange": dlx}
	if r.requeue {
		args["x-queue-type"] = "quorum"
		args["x-delivery-limit"] = int32(maxDeliveries - 1)
	}
	if err := rabbitQueue(conn, r.queue, args, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "queue %s dead-letters through %s into %s\n", r.queue, dlx, dlq)
	return nil
}

// rabbitQueue declares a durable queue with args unless it exists.
func rabbitQueue(conn *amqp.Connection, name string, args amqp.Table, stdout io.Writer) error {
	created, err := rabbitDeclare(conn, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		return err
	}, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(name, true, false, false, false, args)
		return err
	})
	if err != nil {
		return fmt.Errorf("rabbitmq: queue %s: %w", name, err)
	}
	rabbitSays(stdout, "queue", name, created)
	return nil
}

// rabbitDeclare runs exists on a channel of its own (a passive declare of
// something missing closes its channel), and declare when it failed with
// 404; it says whether it declared.
func rabbitDeclare(conn *amqp.Connection, exists, declare func(*amqp.Channel) error) (bool, error) {
	ch, err := conn.Channel()
	if err != nil {
		return false, err
	}
	err = exists(ch)
	var ae *amqp.Error
	if err == nil {
		ch.Close()
		return false, nil
	}
	if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
		return false, err
	}
	if ch, err = conn.Channel(); err != nil {
		return false, err
	}
	defer ch.Close()
	return true, declare(ch)
}

func rabbitSays(stdout io.Writer, what, name string, created bool) {
	if created {
		fmt.Fprintf(stdout, "created %s %s\n", what, name)
		return
	}
	fmt.Fprintf(stdout, "%s %s exists\n", what, name)
}
