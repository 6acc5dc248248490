package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/envelope"
)

// pollWait is how long one Next waits for a message before it reports
// errIdle: the BLOCK of XREADGROUP, the sleep between inbox listings.
const pollWait = 200 * time.Millisecond

// readCount is how many entries one XREADGROUP asks for.
const readCount = 10

// errIdle: no message arrived within pollWait.
var errIdle = errors.New("no message")

// Message is one delivered message.
type Message struct {
	// ID is the backend's locator: stream entry ID or inbox file name.
	ID string
	// Envelope is the message decoded; Malformed is set when it could not
	// be (then there is no event_id to deduplicate on).
	Envelope envelope.Envelope

	fields map[string]string // redis: the entry's fields as delivered
	raw    []byte            // dir: the file's bytes
	pmsg   pulsar.Message    // pulsar: the message as delivered
	krec   *kgo.Record       // kafka: the record as delivered
	smsg   types.Message     // sqs: the message as received
	rdel   *amqp.Delivery    // rabbitmq: the delivery
	jmsg   jetstream.Msg     // nats: the message as delivered
}

// DeadLetter is what a dead-lettered message carries besides its own
// fields.
type DeadLetter struct {
	LastError string
	Attempts  int64
	At        time.Time
}

// Source delivers messages and takes them back.
type Source interface {
	// Next returns the next message, or errIdle after pollWait without one.
	Next(ctx context.Context) (Message, error)
	// Ack says the message is done: it is not delivered again.
	Ack(ctx context.Context, m Message) error
	// DeadLetter puts the message in the DLQ and acks it, in one step where
	// the backend allows (Redis, dir). On Pulsar it hands the message back
	// to the client instead (nack, or reconsume with --retry), and the
	// client dead-letters it once it has been delivered --max-deliveries
	// times.
	DeadLetter(ctx context.Context, m Message, dl DeadLetter) error
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
