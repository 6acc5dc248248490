package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
)

// pollWait is how long one Next waits for a message before it reports
// errIdle: the BLOCK of XREADGROUP, the sleep between inbox listings.
const pollWait = 200 * time.Millisecond

// readCount is how many entries one XREADGROUP asks for.
const readCount = 10

// errIdle: no message arrived within pollWait.
var errIdle = errors.New("no message")

// Message is one delivered message, as the worker loop sees it.
type Message struct {
	// ID is the backend's locator: stream entry ID, inbox file name,
	// partition/offset, message or delivery ID.
	ID string
	// Envelope is the message decoded; Malformed is set when it could not
	// be (then there is no event_id to deduplicate on).
	Envelope envelope.Envelope
}

// DeadLetter is what a dead-lettered message carries besides its own
// fields.
type DeadLetter struct {
	LastError string
	Attempts  int64
	At        time.Time
}

// Receipt is a backend's hold on one delivered message: what the loop
// settles it with, once, after the inbox transaction has committed.
type Receipt interface {
	// Ack says the message is done: it is not delivered again.
	Ack(ctx context.Context) error
	// DeadLetter puts the message in the DLQ and acks it: in one atomic
	// step on Redis and dir, a produce (publish) then the ack on Kafka and
	// NATS's copy mode. Where the broker dead-letters by itself (Pulsar's
	// client, SQS's redrive policy, RabbitMQ's dead-letter exchange, NATS's
	// nak and term modes) it hands the message back to the broker instead.
	DeadLetter(ctx context.Context, dl DeadLetter) error
}

// Source delivers messages. Each backend's mode is one Source in its own
// file.
type Source interface {
	// Next returns the next message and its receipt, or errIdle after
	// pollWait without one.
	Next(ctx context.Context) (Message, Receipt, error)
	Close() error
}

func openSource(ctx context.Context, opts Options, stderr io.Writer) (Source, error) {
	raw, dlq := opts.Source, opts.DLQ
	switch {
	case strings.HasPrefix(raw, "dir:"):
		return openDirSource(strings.TrimPrefix(raw, "dir:"))
	case strings.HasPrefix(raw, "redis://"), strings.HasPrefix(raw, "rediss://"):
		return openRedisSource(ctx, raw, dlq)
	case strings.HasPrefix(raw, "kafka://"):
		return openKafkaSource(ctx, raw, dlq)
	case strings.HasPrefix(raw, "pulsar://"), strings.HasPrefix(raw, "pulsar+ssl://"):
		return openPulsarSource(ctx, raw, pulsarOptions{
			DLQ: dlq, MaxDeliveries: opts.MaxDeliveries, RedeliveryDelay: opts.RedeliveryDelay,
			Retry: opts.Retry, Log: stderr,
		})
	case strings.HasPrefix(raw, "sqs://"):
		return openSQSSource(ctx, raw)
	case strings.HasPrefix(raw, "amqp://"), strings.HasPrefix(raw, "amqps://"):
		return openRabbitSource(raw)
	case strings.HasPrefix(raw, "nats://"):
		return openNATSSource(ctx, raw, dlq, opts.MaxDeliveries, opts.RedeliveryDelay)
	}
	return nil, usagef("--source %q: want redis://host:port/db?stream=ORIGIN&group=G, kafka://host:port?topic=ORIGIN&group=G, pulsar://host:port?topic=ORIGIN&subscription=SUB, sqs://QUEUE?region=R&endpoint=URL, amqp://user:pass@host:port/VHOST?queue=Q, nats://host:port?stream=ORIGIN&consumer=C or dir:PATH", raw)
}
