// Package natsdlq is the NATS JetStream backend (nats:// and tls://).
// JetStream has no dead-letter queue: when a consumer gives up on a
// message (max deliveries, or a +TERM), the server only emits an advisory
// and the message stays in its stream. dlqctl reads a stream of
// dead-letter copies that consumers publish (shape a): each copy carries
// the original's data, its headers and the envelope fields as headers.
//
// A scan reads the stream through an ordered consumer (ephemeral, no
// acks: nothing is consumed) in stream order, which is dead-letter order.
// A move publishes the copy to its original subject and waits for the
// stream's ack, then deletes the copy by sequence; docs/nats.md says why
// the redrive's Nats-Msg-Id is what it is.
package natsdlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// Name is the backend's name in docs and in envelopes' origin.backend.
const Name = "nats"

var (
	_ backend.Source       = (*Stream)(nil)
	_ backend.LeanScanner  = (*Stream)(nil)
	_ backend.Importer     = (*Stream)(nil)
	_ backend.Mover        = (*Stream)(nil)
	_ backend.Tailer       = (*Stream)(nil)
	_ backend.Leaser       = (*Stream)(nil)
	_ backend.LeaseChecker = (*Stream)(nil)
)

// Options are what Open takes besides the URL.
type Options struct {
	// Fields are the envelope's header names and aliases; nil means
	// envelope.DefaultFieldNames.
	Fields envelope.FieldNames
	// Getenv reads DLQCTL_NATS_PASSWORD; nil reads nothing.
	Getenv func(string) string
	// Now is the clock (lease times); nil is time.Now.
	Now func() time.Time
}

// Stream is a DLQ held in one JetStream stream of dead-letter copies.
type Stream struct {
	src     sourceURL
	dec     decoder
	nc      *nats.Conn
	js      jetstream.JetStream
	now     func() time.Time
	missing bool
	// leaseEvery is how often a held lease is renewed (leaseRenew).
	leaseEvery time.Duration

	mu     sync.Mutex
	stream jetstream.Stream
	// sourceIDs holds the dlqctl_source_id of every copy, read by one
	// scan on first need (import).
	sourceIDs map[string]bool
	// moved maps an advisory's message (target.key) to the entry that
	// moved it in this process; sent holds what Publish sent per DLQ
	// sequence until Remove takes it.
	moved map[string]string
	sent  map[uint64]target
}

// Open parses rawURL, connects and looks the stream up. A stream that
// does not exist reads as empty and says so (Missing, Notice).
func Open(ctx context.Context, rawURL string, opts Options) (*Stream, error) {
	src, err := parseURL(rawURL, opts.Getenv)
	if err != nil {
		return nil, err
	}
	return openURL(ctx, src, opts)
}

// openURL is Open of a parsed URL, its credentials read already.
func openURL(ctx context.Context, src sourceURL, opts Options) (*Stream, error) {
	names, err := opts.Fields.Complete()
	if err != nil {
		return nil, backend.Configf("nats source %s: %v", src.Display(), err)
	}
	nc, js, err := connect(src)
	if err != nil {
		return nil, err
	}
	s := &Stream{src: src, dec: newDecoder(names), nc: nc, js: js, now: opts.Now, leaseEvery: leaseRenew}
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.find(ctx); err != nil {
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			nc.Close()
			return nil, err
		}
		s.missing = true
	}
	return s, nil
}

// connect dials the server with the URL's credentials as options, never in
// the server URL, so that the client has no password to echo.
func connect(src sourceURL) (*nats.Conn, jetstream.JetStream, error) {
	if err := src.checkCreds(); err != nil {
		return nil, nil, err
	}
	opts := []nats.Option{
		nats.Name("dlqctl"),
		nats.Timeout(src.timeout),
		// A server that goes away is waited for as long as one request
		// may take, then the request fails and the journal takes over.
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.NoCallbacksAfterClientClose(),
	}
	switch {
	case src.user != "":
		opts = append(opts, nats.UserInfo(src.user, src.password))
	case src.token != "":
		opts = append(opts, nats.Token(src.token))
	case src.creds != "":
		opts = append(opts, nats.UserCredentials(src.creds))
	}
	tlsConf, err := src.tlsConfig()
	if err != nil {
		return nil, nil, err
	}
	if tlsConf != nil {
		opts = append(opts, nats.Secure(tlsConf))
	}
	nc, err := nats.Connect(src.serverURLs(), opts...)
	if err != nil {
		return nil, nil, backend.Scrub(fmt.Errorf("nats source %s: connect: %w", src.Display(), err), src.Secrets()...)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("nats source %s: %w", src.Display(), err)
	}
	return nc, js, nil
}

func (s *Stream) find(ctx context.Context) error {
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	st, err := s.js.Stream(ctx, s.src.stream)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("%s: stream %q: %w", s, s.src.stream, err)
		}
		return s.wrap("look up the stream", err)
	}
	s.mu.Lock()
	s.stream = st
	s.mu.Unlock()
	return nil
}

// reqCtx bounds one request by the URL's timeout.
func (s *Stream) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.src.timeout)
}

func (s *Stream) wrap(what string, err error) error {
	return backend.Scrub(fmt.Errorf("%s: %s: %w", s, what, err), s.src.Secrets()...)
}

// MissingDLQ names the stream (the advisory stream, in advisory mode) when
// it did not exist when it was opened ("" when it did), after the
// redacted URL.
func (s *Stream) MissingDLQ() string {
	if !s.missing {
		return ""
	}
	if s.src.advisories {
		return fmt.Sprintf("%s: the advisory stream %q does not exist", s, s.src.stream)
	}
	return fmt.Sprintf("%s: the stream %q does not exist", s, s.src.stream)
}

// Notice names a stream that does not exist (backend.Noticer).
func (s *Stream) Notice() string {
	if !s.missing {
		return ""
	}
	if s.src.advisories {
		return fmt.Sprintf("%s: the advisory stream %q does not exist: it reads as empty (dlqctl dlq init 'nats://…?stream=STREAM&consumer=CONSUMER' creates it)", s, s.src.stream)
	}
	return fmt.Sprintf("%s: the stream %q does not exist: it reads as empty", s, s.src.stream)
}

// String is the URL with its secrets replaced.
func (s *Stream) String() string { return s.src.Display() }

// Close closes the connection, after what it has buffered is flushed.
func (s *Stream) Close() error {
	s.nc.Close()
	return nil
}

// parseID reads an entry locator: a stream sequence.
func parseID(id string) (uint64, bool) {
	n, err := strconv.ParseUint(id, 10, 64)
	return n, err == nil && n > 0
}

// Scan reads the stream in order from the message after `after`.
func (s *Stream) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	return s.scan(ctx, after, false, fn)
}

// ScanLean is Scan without properties (backend.LeanScanner).
func (s *Stream) ScanLean(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	return s.scan(ctx, after, true, fn)
}

func (s *Stream) scan(ctx context.Context, after string, lean bool, fn func(envelope.Envelope) error) error {
	if !s.src.advisories {
		return s.each(ctx, after, func(m Message) error { return fn(s.dec.decode(m, lean)) })
	}
	return s.each(ctx, after, func(m Message) error {
		e, _, ok, err := s.decodeAdvisory(ctx, m, lean)
		if err != nil || !ok {
			return err
		}
		return fn(e)
	})
}

// scanBatch is how many messages one pull asks for.
const scanBatch = 1000

// each calls fn for every message after `after`, in stream order. It ends
// at the message the server says is the last one pending, so that a scan
// started while consumers keep dead-lettering still ends.
func (s *Stream) each(ctx context.Context, after string, fn func(Message) error) error {
	if s.missing {
		return nil
	}
	var start uint64 = 1
	if after != "" {
		n, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			return backend.Configf("%s: cursor %q is no stream sequence", s, after)
		}
		start = n + 1
	}
	first, err := s.next(ctx, start)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	oc, err := s.js.OrderedConsumer(ctx, s.src.stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: first,
		InactiveThreshold: scanInactive,
	})
	if err != nil {
		return s.wrap("read the stream", err)
	}
	it, err := oc.Messages(jetstream.PullMaxMessages(scanBatch))
	if err != nil {
		return s.wrap("read the stream", err)
	}
	defer s.endScan(ctx, oc, it)
	for {
		nctx, cancel := context.WithTimeout(ctx, s.src.timeout)
		msg, err := it.Next(jetstream.NextContext(nctx))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
				// What was pending was deleted meanwhile: nothing is left
				// when nothing follows the last message read.
				if _, perr := s.next(ctx, start); errors.Is(perr, jetstream.ErrMsgNotFound) {
					return nil
				}
			}
			return s.wrap("read the stream", err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return s.wrap("read the stream", err)
		}
		start = meta.Sequence.Stream + 1
		if err := fn(Message{Seq: meta.Sequence.Stream, Subject: msg.Subject(), Header: msg.Headers(), Data: msg.Data(), Time: meta.Timestamp}); err != nil {
			if errors.Is(err, backend.ErrStop) {
				return nil
			}
			return err
		}
		if meta.NumPending == 0 {
			return nil
		}
	}
}

// scanInactive is how long the server keeps a scan's consumer once its
// reader is gone without deleting it (a killed process).
const scanInactive = 30 * time.Second

// endScan stops a scan and deletes its consumer, which the server would
// otherwise keep for scanInactive: a read leaves the stream with the
// consumers it had.
func (s *Stream) endScan(ctx context.Context, oc jetstream.Consumer, it jetstream.MessagesContext) {
	it.Stop()
	info := oc.CachedInfo()
	if info == nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.src.timeout)
	defer cancel()
	// A consumer that cannot be deleted now expires by itself.
	_ = s.js.DeleteConsumer(dctx, s.src.stream, info.Name)
}

// next returns the sequence of the first message at or after seq, or
// jetstream.ErrMsgNotFound.
func (s *Stream) next(ctx context.Context, seq uint64) (uint64, error) {
	st, err := s.handle(ctx)
	if err != nil {
		return 0, err
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	m, err := st.GetMsg(rctx, seq, jetstream.WithGetMsgSubject(">"))
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, err
		}
		return 0, s.wrap("read the stream", err)
	}
	return m.Sequence, nil
}

// handle is the stream, looked up again when it was missing at Open.
func (s *Stream) handle(ctx context.Context) (jetstream.Stream, error) {
	s.mu.Lock()
	st := s.stream
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	if err := s.find(ctx); err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("%w (%w): %v", jetstream.ErrMsgNotFound, backend.ErrNotFound, err)
		}
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream, nil
}

// get reads one message by sequence, without the headers the server adds
// to a direct get.
func (s *Stream) get(ctx context.Context, seq uint64) (Message, error) {
	st, err := s.handle(ctx)
	if err != nil {
		return Message{}, err
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	m, err := st.GetMsg(rctx, seq)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return Message{}, fmt.Errorf("message %d: %w in %s", seq, backend.ErrNotFound, s)
		}
		return Message{}, s.wrap(fmt.Sprintf("read message %d", seq), err)
	}
	return Message{Seq: m.Sequence, Subject: m.Subject, Header: withoutServerHeaders(m.Header), Data: m.Data, Time: m.Time}, nil
}

// withoutServerHeaders drops the headers a direct get adds.
func withoutServerHeaders(h nats.Header) nats.Header {
	if h == nil {
		return nil
	}
	out := nats.Header{}
	for k, vs := range h {
		if !serverHeaders[k] {
			out[k] = vs
		}
	}
	return out
}

// Get returns the entry at stream sequence id.
func (s *Stream) Get(ctx context.Context, id string) (envelope.Envelope, error) {
	seq, ok := parseID(id)
	if !ok {
		return envelope.Envelope{}, fmt.Errorf("%q is no stream sequence: %w", id, backend.ErrNotFound)
	}
	m, err := s.get(ctx, seq)
	if err != nil {
		return envelope.Envelope{}, err
	}
	if !s.src.advisories {
		return s.dec.decode(m, false), nil
	}
	e, _, ok, err := s.decodeAdvisory(ctx, m, false)
	if err == nil && !ok {
		err = fmt.Errorf("message %d is no dead-letter advisory: %w", seq, backend.ErrNotFound)
	}
	return e, err
}

// info is the stream's state now.
func (s *Stream) info(ctx context.Context) (*jetstream.StreamInfo, error) {
	st, err := s.handle(ctx)
	if err != nil {
		return nil, err
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	in, err := st.Info(rctx)
	if err != nil {
		return nil, s.wrap("read the stream's state", err)
	}
	return in, nil
}

// Len is the number of messages in the stream.
func (s *Stream) Len(ctx context.Context) (int64, error) {
	if s.missing {
		return 0, nil
	}
	in, err := s.info(ctx)
	if err != nil {
		return 0, err
	}
	return int64(in.State.Msgs), nil
}

// Tail is the stream's last sequence: copies dead-lettered later have
// higher ones.
func (s *Stream) Tail(ctx context.Context) (string, error) {
	if s.missing {
		return "", nil
	}
	in, err := s.info(ctx)
	if err != nil {
		return "", err
	}
	if in.State.LastSeq == 0 {
		return "", nil
	}
	return strconv.FormatUint(in.State.LastSeq, 10), nil
}
