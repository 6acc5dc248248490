//go:build !no_nats

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natsdlq "github.com/dlqctl/dlqctl/backends/nats"
	"github.com/dlqctl/dlqctl/envelope"
)

// natsMode consumes a JetStream stream through a durable pull consumer,
// acking explicitly after the inbox transaction:
//
//	--source nats://[user:pass@]HOST:PORT?stream=ORIGIN&consumer=C[&subject=FILTER][&deadletter=copy|nak|term]
//
// JetStream has no dead-letter queue, so a failed delivery goes one of
// three ways (deadletter=):
//
//	copy (default) publish a dead-letter copy to the stream --dlq (subject
//	     dlq.<DLQ>.<original subject>) with the original's data and headers,
//	     event_id, x-original-subject, last_error, attempts,
//	     dead_lettered_at and origin_group; its Nats-Msg-Id is its own
//	     (dead:<ORIGIN>:<stream sequence>:<stored, Unix ns>), so a crash
//	     before the ack that copies it again is deduplicated, and a later
//	     dead-lettering of a redriven message (a new sequence), or of a
//	     message of the stream made again, is not; then ack the original
//	nak  nak it (after --redelivery-delay) until the consumer's MaxDeliver
//	     (--max-deliveries) is reached: the server then emits a
//	     MAX_DELIVERIES advisory
//	term terminate it with --fail-error as the reason: the server emits a
//	     MSG_TERMINATED advisory carrying it
func natsMode() mode {
	return mode{
		prefixes: []string{"nats://"},
		usage:    "nats://host:port?stream=ORIGIN&consumer=C",
		help:     "nats://host:port?stream=ORIGIN&consumer=C[&deadletter=copy|nak|term]",
		open: func(ctx context.Context, opts Options, _ io.Writer) (Source, error) {
			return openNATSSource(ctx, opts.Source, opts.DLQ, opts.MaxDeliveries, opts.RedeliveryDelay)
		},
	}
}

// natsSource is a durable pull consumer on the stream.
type natsSource struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	cons   jetstream.Consumer
	stream string
	group  string
	dlq    string
	mode   string
	delay  time.Duration
	names  envelope.FieldNames
	buf    []jetstream.Msg
}

func openNATSSource(ctx context.Context, raw, dlq string, maxDeliveries int, delay time.Duration) (*natsSource, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, usagef("--source %s: want nats://HOST:PORT?stream=ORIGIN&consumer=C", sourceURL(raw))
	}
	q, err := sourceQuery(raw, u.RawQuery, u.User != nil, "stream", "consumer", "subject", "deadletter")
	if err != nil {
		return nil, err
	}
	s := &natsSource{stream: q.Get("stream"), group: q.Get("consumer"), dlq: dlq, mode: q.Get("deadletter"),
		delay: delay, names: envelope.DefaultFieldNames()}
	if s.stream == "" || s.group == "" {
		return nil, usagef("--source: nats needs ?stream=ORIGIN&consumer=C")
	}
	switch s.mode {
	case "":
		s.mode = "copy"
	case "copy", "nak", "term":
	default:
		return nil, usagef("--source: deadletter=%s: want copy, nak or term", masked)
	}
	if s.mode == "copy" && s.dlq == "" {
		s.dlq = s.stream + "_DLQ"
	}
	var opts []nats.Option
	if u.User != nil {
		if pass, ok := u.User.Password(); ok {
			opts = append(opts, nats.UserInfo(u.User.Username(), pass))
		} else {
			opts = append(opts, nats.Token(u.User.Username()))
		}
	}
	if s.nc, err = nats.Connect(u.Scheme+"://"+u.Host, opts...); err != nil {
		return nil, fmt.Errorf("nats: connect %s: %w", u.Host, err)
	}
	if s.js, err = jetstream.New(s.nc); err != nil {
		s.nc.Close()
		return nil, err
	}
	cfg := jetstream.ConsumerConfig{Durable: s.group, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		MaxDeliver: -1, FilterSubject: q.Get("subject")}
	if s.mode == "nak" {
		cfg.MaxDeliver = maxDeliveries
	}
	if s.cons, err = s.js.CreateOrUpdateConsumer(ctx, s.stream, cfg); err != nil {
		s.nc.Close()
		return nil, fmt.Errorf("nats: consumer %s on %s: %w", s.group, s.stream, err)
	}
	return s, nil
}

func (s *natsSource) Next(ctx context.Context) (Message, Receipt, error) {
	if len(s.buf) == 0 {
		batch, err := s.cons.Fetch(readCount, jetstream.FetchMaxWait(pollWait))
		if err != nil {
			if ctx.Err() != nil {
				return Message{}, nil, ctx.Err()
			}
			return Message{}, nil, fmt.Errorf("nats: fetch from %s: %w", s.stream, err)
		}
		for m := range batch.Messages() {
			s.buf = append(s.buf, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && len(s.buf) == 0 {
			if ctx.Err() != nil {
				return Message{}, nil, ctx.Err()
			}
			return Message{}, nil, fmt.Errorf("nats: fetch from %s: %w", s.stream, err)
		}
		if len(s.buf) == 0 {
			return Message{}, nil, errIdle
		}
	}
	m := s.buf[0]
	s.buf = s.buf[1:]
	md, err := m.Metadata()
	if err != nil {
		return Message{}, nil, fmt.Errorf("nats: %w", err)
	}
	e := natsdlq.Decode(natsdlq.Message{Seq: md.Sequence.Stream, Subject: m.Subject(), Header: m.Headers(), Data: m.Data(), Time: md.Timestamp}, s.names)
	id := strconv.FormatUint(md.Sequence.Stream, 10)
	return Message{ID: id, Envelope: e}, &natsReceipt{s: s, id: id, eventID: e.EventID, msg: m}, nil
}

// natsReceipt is one message fetched by the pull consumer, pending until
// it is acked, nakked or terminated.
type natsReceipt struct {
	s       *natsSource
	id      string // the stream sequence
	eventID string // the decoded event ID, which the copy carries
	msg     jetstream.Msg
}

// Ack waits for the server to confirm it, so that a worker that exits
// right after has not left the message to be delivered again.
func (r *natsReceipt) Ack(ctx context.Context) error {
	if err := r.msg.DoubleAck(ctx); err != nil {
		return fmt.Errorf("nats: ack %s: %w", r.id, err)
	}
	return nil
}

func (r *natsReceipt) DeadLetter(ctx context.Context, dl DeadLetter) error {
	s := r.s
	switch s.mode {
	case "nak":
		return r.msg.NakWithDelay(s.delay)
	case "term":
		return r.msg.TermWithReason(dl.LastError)
	}
	h := nats.Header{}
	for k, vs := range r.msg.Headers() {
		if k == nats.MsgIdHdr || strings.HasPrefix(k, "Nats-Expected-") {
			continue
		}
		h[k] = vs
	}
	if r.eventID != "" && h.Get(envelope.FieldEventID) == "" {
		h.Set(envelope.FieldEventID, r.eventID)
	}
	for _, n := range s.names[envelope.FieldErrorClass] {
		h.Del(n) // a stale class would categorize the new failure by the old one
	}
	h.Set(natsdlq.HeaderOriginalSubject, r.msg.Subject())
	h.Set(envelope.FieldLastError, dl.LastError)
	h.Set(envelope.FieldAttempts, strconv.FormatInt(dl.Attempts, 10))
	h.Set(envelope.FieldDeadLetteredAt, dl.At.UTC().Format(time.RFC3339Nano))
	h.Set(envelope.FieldOriginGroup, s.group)
	md, err := r.msg.Metadata()
	if err != nil {
		return fmt.Errorf("nats: dead-letter %s: %w", r.id, err)
	}
	// The original's store time tells a stream made again (which numbers
	// from 1 again) from the one before: only a second copy of this very
	// delivery's message is a duplicate.
	h.Set(nats.MsgIdHdr, "dead:"+s.stream+":"+r.id+":"+strconv.FormatInt(md.Timestamp.UnixNano(), 10))
	out := &nats.Msg{Subject: "dlq." + s.dlq + "." + r.msg.Subject(), Header: h, Data: r.msg.Data()}
	if _, err := s.js.PublishMsg(ctx, out); err != nil {
		return fmt.Errorf("nats: dead-letter %s to %s: %w", r.id, s.dlq, err)
	}
	return r.Ack(ctx)
}

func (s *natsSource) Close() error {
	s.nc.Close()
	return nil
}
