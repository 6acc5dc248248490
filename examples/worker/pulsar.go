//go:build !no_pulsar

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	pulsardlq "github.com/dlqctl/dlqctl/backends/pulsar"
	"github.com/dlqctl/dlqctl/envelope"
)

// The Pulsar mode consumes ORIGIN through a Shared subscription of the
// real pulsar-client-go consumer, and leaves dead-lettering to the client,
// as a Pulsar application does:
//
//	--source pulsar://HOST:PORT?topic=ORIGIN&subscription=SUB[&consumer=NAME][&admin=URL]
//
// A failed delivery (--fail, or a message without an event ID) is nacked:
// the broker redelivers it after --redelivery-delay, and once it has been
// delivered --max-deliveries times the client's DLQPolicy sends it to the
// DLQ topic (--dlq, default ORIGIN-SUB-DLQ, the client's own naming) with
// REAL_TOPIC and ORIGIN_MESSAGE_ID, and acks it on ORIGIN. That is a real
// dead letter, byte for byte what dlqctl meets in production. The client
// copies the message's properties and nothing else, so such a dead letter
// has no last_error (dlqctl categorizes it `unknown`) and its attempts read
// as 0: --fail-error cannot travel that way.
//
// With --retry the client's retry topic is used instead (RetryEnable): a
// failed delivery goes to ORIGIN-SUB-RETRY through
// ReconsumeLaterWithCustomProperties, which adds last_error=--fail-error
// (and blanks a stale error_class), and after --max-deliveries retries the
// client dead-letters it with those properties and RECONSUMETIMES, so
// dlqctl categorizes it by its error and counts its attempts.
//
// Either way InitialSubscriptionName makes the client create the durable
// `dlqctl` subscription on the DLQ topic when it first dead-letters, so
// the DLQ keeps its messages until dlqctl acknowledges them. The DLQ
// producer does not batch: each dead letter is its own entry, which dlqctl
// can redrive alone (it moves a batched entry only whole).
//
// The ack follows the commit and waits for the broker's response
// (AckWithResponse) — except with --retry: the client's retry router acks
// the original from inside the retry producer's send callback, on the
// connection's own goroutine, where an ack that waits for its response
// deadlocks until it times out (pulsar-client-go v0.19.0). With --retry
// every ack is therefore sent at once, ungrouped, without waiting; one
// lost with the connection means a redelivery, which the inbox absorbs.
//
// The admin= parameter of dlqctl's source URL is accepted and ignored, so
// that one URL serves both.

// pulsarMode consumes a topic through a Shared subscription; the client
// dead-letters.
func pulsarMode() mode {
	return mode{
		prefixes: []string{"pulsar://", "pulsar+ssl://"},
		usage:    "pulsar://host:port?topic=ORIGIN&subscription=SUB",
		help:     "pulsar://host:port?topic=ORIGIN&subscription=SUB[&consumer=C]",
		open: func(ctx context.Context, opts Options, stderr io.Writer) (Source, error) {
			return openPulsarSource(ctx, opts.Source, pulsarOptions{
				DLQ: opts.DLQ, MaxDeliveries: opts.MaxDeliveries, RedeliveryDelay: opts.RedeliveryDelay,
				Retry: opts.Retry, Log: stderr,
			})
		},
	}
}

// pulsarDLQSubscription is the DLQ subscription dlqctl reads by default.
const pulsarDLQSubscription = "dlqctl"

// pulsarSource is a Shared consumer on the origin topic.
type pulsarSource struct {
	client   pulsar.Client
	consumer pulsar.Consumer
	retry    bool
	delay    time.Duration
	names    envelope.FieldNames
	// origin, sub and dlq are the full topic names and the subscription.
	origin, sub, dlq string
}

// pulsarOptions are the flags of the Pulsar mode.
type pulsarOptions struct {
	DLQ             string
	MaxDeliveries   int
	RedeliveryDelay time.Duration
	Retry           bool
	Log             io.Writer // the client's errors; nil: discarded
}

// fullTopic names NAME, TENANT/NS/NAME or persistent://TENANT/NS/NAME in
// full, as the client does.
func fullTopic(s string) (string, error) {
	if strings.Contains(s, "://") {
		if strings.HasPrefix(s, "persistent://") || strings.HasPrefix(s, "non-persistent://") {
			return s, nil
		}
		return "", fmt.Errorf("topic %q: want persistent:// or non-persistent://", s)
	}
	switch parts := strings.Split(s, "/"); {
	case len(parts) == 1 && s != "":
		return "persistent://public/default/" + s, nil
	case len(parts) == 3 && !slices.Contains(parts, ""):
		return "persistent://" + s, nil
	}
	return "", fmt.Errorf("topic %q: want NAME, TENANT/NS/NAME or persistent://TENANT/NS/NAME", s)
}

func openPulsarSource(ctx context.Context, raw string, po pulsarOptions) (*pulsarSource, error) {
	s, u, err := parsePulsarSource(raw, po)
	if err != nil {
		return nil, err
	}
	if s.client, err = newPulsarClient(u, po.Log); err != nil {
		return nil, usagef("--source: %v", err)
	}
	if err := s.subscribe(ctx, u.Host, u.Query().Get("consumer"), po.MaxDeliveries); err != nil {
		return nil, err
	}
	return s, nil
}

// parsePulsarSource checks the --source URL and the flags of the mode,
// and names the topics.
func parsePulsarSource(raw string, po pulsarOptions) (*pulsarSource, *url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, usagef("--source %s: not a valid URL", sourceURL(raw))
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.Host == "" {
		return nil, nil, usagef("--source: want %s://HOST:PORT?topic=ORIGIN&subscription=SUB", u.Scheme)
	}
	q, err := sourceQuery(raw, u.RawQuery, false, "topic", "subscription", "consumer", "admin")
	if err != nil {
		return nil, nil, err
	}
	if q.Get("topic") == "" || q.Get("subscription") == "" {
		return nil, nil, usagef("--source: pulsar needs ?topic=ORIGIN&subscription=SUB")
	}
	s := &pulsarSource{sub: q.Get("subscription"), retry: po.Retry, delay: po.RedeliveryDelay, names: envelope.DefaultFieldNames()}
	if s.origin, err = fullTopic(q.Get("topic")); err != nil {
		return nil, nil, usagef("--source: topic=%s: want NAME, TENANT/NS/NAME or persistent://TENANT/NS/NAME", masked)
	}
	s.dlq = s.origin + "-" + s.sub + pulsar.DlqTopicSuffix
	if po.DLQ != "" {
		if s.dlq, err = fullTopic(po.DLQ); err != nil {
			return nil, nil, usagef("--dlq: %v", err)
		}
	}
	if po.MaxDeliveries < 1 {
		return nil, nil, usagef("--max-deliveries: want N ≥ 1")
	}
	if s.delay <= 0 {
		return nil, nil, usagef("--redelivery-delay: want a duration > 0")
	}
	return s, u, nil
}

// newPulsarClient connects to u's host (port 6650, or 6651 over TLS, when
// it names none); the client logs its errors to log, or nowhere when nil.
func newPulsarClient(u *url.URL, log io.Writer) (pulsar.Client, error) {
	logger := plog.DefaultNopLogger()
	if log != nil {
		logger = plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelError})))
	}
	host := u.Host
	switch {
	case u.Port() != "":
	case u.Scheme == "pulsar+ssl":
		host += ":6651"
	default:
		host += ":6650"
	}
	return pulsar.NewClient(pulsar.ClientOptions{
		URL:               u.Scheme + "://" + host,
		ConnectionTimeout: 10 * time.Second,
		OperationTimeout:  30 * time.Second,
		Logger:            logger,
	})
}

// subscribe makes s.consumer, the Shared consumer named name, with the
// client's dead-letter policy (and retry topic with --retry). It closes the
// client when it fails; host names the broker in its error.
func (s *pulsarSource) subscribe(ctx context.Context, host, name string, maxDeliveries int) error {
	policy := &pulsar.DLQPolicy{
		MaxDeliveries:           uint32(maxDeliveries),
		DeadLetterTopic:         s.dlq,
		InitialSubscriptionName: pulsarDLQSubscription,
		ProducerOptions:         pulsar.ProducerOptions{DisableBatching: true},
	}
	if s.retry {
		policy.RetryLetterTopic = s.origin + "-" + s.sub + pulsar.RetryTopicSuffix
	}
	co := pulsar.ConsumerOptions{
		Topic:                       s.origin,
		SubscriptionName:            s.sub,
		Name:                        name,
		Type:                        pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		DLQ:                         policy,
		RetryEnable:                 s.retry,
		NackRedeliveryDelay:         s.delay,
		AckWithResponse:             !s.retry,
		ReceiverQueueSize:           readCount,
	}
	if s.retry {
		co.AckGroupingOptions = &pulsar.AckGroupingOptions{MaxSize: 1}
	}
	type result struct {
		c   pulsar.Consumer
		err error
	}
	// Subscribe has no context: bound it by ctx here.
	done := make(chan result, 1)
	go func() {
		c, err := s.client.Subscribe(co)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			s.client.Close()
			return fmt.Errorf("pulsar %s: subscribe %s on %s: %w", host, s.sub, s.origin, r.err)
		}
		s.consumer = r.c
		return nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.err == nil {
				r.c.Close()
			}
			s.client.Close()
		}()
		return ctx.Err()
	}
}

func (s *pulsarSource) Next(ctx context.Context) (Message, Receipt, error) {
	rctx, cancel := context.WithTimeout(ctx, pollWait)
	defer cancel()
	pm, err := s.consumer.Receive(rctx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
			return Message{}, nil, errIdle
		}
		if ctx.Err() != nil {
			return Message{}, nil, ctx.Err()
		}
		return Message{}, nil, fmt.Errorf("pulsar: receive %s on %s: %w", s.sub, s.origin, err)
	}
	id := pm.ID()
	loc := fmt.Sprintf("%d:%d:%d:%d", id.LedgerID(), id.EntryID(), id.PartitionIdx(), id.BatchIdx())
	e := pulsardlq.FromPulsar(pulsardlq.PulsarMessage{
		ID:              loc,
		Topic:           pm.Topic(),
		Key:             pm.Key(),
		OrderingKey:     pm.OrderingKey(),
		Properties:      pm.Properties(),
		Payload:         pm.Payload(),
		EventTime:       pm.EventTime(),
		PublishTime:     pm.PublishTime(),
		RedeliveryCount: pm.RedeliveryCount(),
	}, envelope.EventIDSource{Kind: "property"}, s.names)
	return Message{ID: loc, Envelope: e}, &pulsarReceipt{s: s, id: loc, msg: pm}, nil
}

// pulsarReceipt is one message received on the subscription.
type pulsarReceipt struct {
	s   *pulsarSource
	id  string // ledger:entry:partition:batch
	msg pulsar.Message
}

func (r *pulsarReceipt) Ack(ctx context.Context) error {
	if err := r.s.consumer.Ack(r.msg); err != nil {
		return fmt.Errorf("pulsar: ack %s on %s: %w", r.id, r.s.origin, err)
	}
	return nil
}

// DeadLetter hands a failed delivery back to the client's dead-letter
// path: a nack (or, with --retry, a reconsume carrying last_error). The
// client redelivers it and dead-letters it after --max-deliveries.
func (r *pulsarReceipt) DeadLetter(ctx context.Context, dl DeadLetter) error {
	s := r.s
	if !s.retry {
		s.consumer.Nack(r.msg)
		return nil
	}
	props := map[string]string{envelope.FieldLastError: dl.LastError}
	for _, name := range s.names[envelope.FieldErrorClass] {
		if _, ok := r.msg.Properties()[name]; ok {
			props[name] = ""
		}
	}
	s.consumer.ReconsumeLaterWithCustomProperties(r.msg, props, s.delay)
	return nil
}

func (s *pulsarSource) Close() error {
	s.consumer.Close()
	s.client.Close()
	return nil
}
