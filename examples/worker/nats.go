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
		create: func(ctx context.Context, opts Options, stdout io.Writer) error {
			return createNATS(ctx, opts.Source, opts.DLQ, stdout)
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

// natsURL is a parsed nats://[user:pass@]HOST:PORT?stream=ORIGIN&consumer=C[&subject=FILTER][&deadletter=copy|nak|term].
type natsURL struct {
	server   string // scheme://host:port
	user     *url.Userinfo
	stream   string
	consumer string
	subject  string
	mode     string // copy, nak or term
}

// parseNATSURL reads the --source; consumer= is required unless
// forCreate (--create makes streams, not the consumer).
func parseNATSURL(raw string, forCreate bool) (natsURL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return natsURL{}, usagef("--source %s: want nats://HOST:PORT?stream=ORIGIN&consumer=C", sourceURL(raw))
	}
	q, err := sourceQuery(raw, u.RawQuery, u.User != nil, "stream", "consumer", "subject", "deadletter")
	if err != nil {
		return natsURL{}, err
	}
	n := natsURL{server: u.Scheme + "://" + u.Host, user: u.User, stream: q.Get("stream"), consumer: q.Get("consumer"),
		subject: q.Get("subject"), mode: q.Get("deadletter")}
	if n.stream == "" || (n.consumer == "" && !forCreate) {
		return n, usagef("--source: nats needs ?stream=ORIGIN&consumer=C")
	}
	switch n.mode {
	case "":
		n.mode = "copy"
	case "copy", "nak", "term":
	default:
		return n, usagef("--source: deadletter=%s: want copy, nak or term", masked)
	}
	return n, nil
}

// connect dials the server with the URL's user and password, or its
// token (a user without a password).
func (n natsURL) connect() (*nats.Conn, jetstream.JetStream, error) {
	var opts []nats.Option
	if n.user != nil {
		if pass, ok := n.user.Password(); ok {
			opts = append(opts, nats.UserInfo(n.user.Username(), pass))
		} else {
			opts = append(opts, nats.Token(n.user.Username()))
		}
	}
	nc, err := nats.Connect(n.server, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("nats: connect %s: %w", strings.TrimPrefix(n.server, "nats://"), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// copyDLQ is the stream the copy mode dead-letters into: dlq, or
// ORIGIN_DLQ.
func (n natsURL) copyDLQ(dlq string) string {
	if dlq == "" {
		return n.stream + "_DLQ"
	}
	return dlq
}

func openNATSSource(ctx context.Context, raw, dlq string, maxDeliveries int, delay time.Duration) (*natsSource, error) {
	n, err := parseNATSURL(raw, false)
	if err != nil {
		return nil, err
	}
	s := &natsSource{stream: n.stream, group: n.consumer, mode: n.mode, delay: delay, names: envelope.DefaultFieldNames()}
	if s.mode == "copy" {
		s.dlq = n.copyDLQ(dlq)
	}
	if s.nc, s.js, err = n.connect(); err != nil {
		return nil, err
	}
	cfg := jetstream.ConsumerConfig{Durable: s.group, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		MaxDeliver: -1, FilterSubject: n.subject}
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

// createNATS makes the origin stream (its one subject is subject=, else
// the stream's name) and, in copy mode, the stream the copies go to (--dlq,
// default ORIGIN_DLQ, taking dlq.<DLQ>.>, as dlqctl import --init makes
// it); a stream that exists is left as it is. In nak and term modes the
// dead letters are the server's advisories: dlqctl dlq init makes their
// stream.
func createNATS(ctx context.Context, raw, dlq string, stdout io.Writer) error {
	n, err := parseNATSURL(raw, true)
	if err != nil {
		return err
	}
	nc, js, err := n.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	subject := n.subject
	if subject == "" {
		subject = n.stream
	}
	if err := natsStream(ctx, js, jetstream.StreamConfig{Name: n.stream, Subjects: []string{subject}, Storage: jetstream.FileStorage}, stdout); err != nil {
		return err
	}
	if n.mode != "copy" {
		fmt.Fprintf(stdout, "deadletter=%s: the server's advisories are the dead letters (dlqctl dlq init %s&consumer=C makes their stream)\n", n.mode, n.server+"?stream="+n.stream)
		return nil
	}
	d := n.copyDLQ(dlq)
	return natsStream(ctx, js, jetstream.StreamConfig{Name: d, Subjects: natsdlq.CopySubjects(d), Storage: jetstream.FileStorage,
		AllowDirect: true, Description: "dead-letter copies, read by dlqctl"}, stdout)
}

// natsStream creates the stream cfg names unless it exists.
func natsStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig, stdout io.Writer) error {
	if st, err := js.Stream(ctx, cfg.Name); err == nil {
		fmt.Fprintf(stdout, "stream %s exists (subjects %s)\n", cfg.Name, strings.Join(st.CachedInfo().Config.Subjects, ", "))
		return nil
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("nats: look up stream %s: %w", cfg.Name, err)
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("nats: create stream %s: %w", cfg.Name, err)
	}
	fmt.Fprintf(stdout, "created stream %s (subjects %s)\n", cfg.Name, strings.Join(cfg.Subjects, ", "))
	return nil
}
