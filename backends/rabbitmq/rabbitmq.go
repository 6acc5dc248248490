// Package rabbitmq is the RabbitMQ backend (amqp:// and amqps://): the DLQ
// is a queue, classic or quorum, that a dead-letter exchange feeds, and
// every dead letter carries the broker's x-death history.
//
// A queue cannot be browsed. A scan consumes with manual acknowledgement,
// hands each message over, and gives every one back by closing the
// channel, never acking: a classic queue puts them back in place (flagged
// redelivered). A quorum queue counts every such return as a delivery and
// drops or dead-letters a message whose count passes the queue's delivery
// limit, so a scan of a quorum DLQ with a limit watches each message's
// x-delivery-count and stops before one could reach it (see guard).
// docs/rabbitmq.md says which DLQ shape is safe.
package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

var (
	_ backend.Source             = (*Queue)(nil)
	_ backend.LeanScanner        = (*Queue)(nil)
	_ backend.Importer           = (*Queue)(nil)
	_ backend.Mover              = (*Queue)(nil)
	_ backend.Leaser             = (*Queue)(nil)
	_ backend.LeaseChecker       = (*Queue)(nil)
	_ backend.Extras             = (*Queue)(nil)
	_ backend.OriginChecker      = (*Queue)(nil)
	_ backend.DoctorChecker      = (*Queue)(nil)
	_ backend.DestinationGuard   = (*Queue)(nil)
	_ backend.Noticer            = (*Queue)(nil)
	_ backend.FingerprintScanner = (*Queue)(nil)
)

// Options are what Open takes besides the URL.
type Options struct {
	// Fields are the envelope's header names and aliases; nil means
	// envelope.DefaultFieldNames.
	Fields envelope.FieldNames
	// EventIDFrom is --event-id-from as given ("" reads message_id, then
	// the event_id header).
	EventIDFrom string
	// KeyFrom is --key-from as given ("" reads the key header, or its
	// aliases in Fields; header:NAME reads that header instead).
	KeyFrom string
	// Password is used when the URL has none (DLQCTL_AMQP_PASSWORD, the
	// profile's amqp_password).
	Password string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Queue is a DLQ held in one RabbitMQ queue.
type Queue struct {
	src     sourceURL
	cfg     amqp.Config
	dec     decoder
	now     func() time.Time
	admin   *adminClient // nil without admin=
	missing bool
	server  string // the broker's version, from the connection

	mu   sync.Mutex
	conn *amqp.Connection
	// shape is the DLQ's type and effective delivery limit, read once.
	shape *queueShape
	// limits caches origin queues' delivery limits (quorum origins).
	limits map[string]int
	// held is the consume channel a Publish left open with the planned
	// deliveries unacked, for the Remove that follows (see move.go).
	held *holding
	// pub is the publish channel moves reuse (see publisher).
	pub *publisher
}

// Open parses rawURL, connects and checks that the DLQ queue exists (a
// missing one reads as empty and says so).
func Open(ctx context.Context, rawURL string, opts Options) (*Queue, error) {
	src, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return openURL(ctx, src, opts)
}

// openURL is Open of a parsed URL.
func openURL(ctx context.Context, src sourceURL, opts Options) (*Queue, error) {
	names, err := opts.Fields.Complete()
	if err != nil {
		return nil, backend.Configf("amqp source %s: %v", src.Display(), err)
	}
	from, err := parseEventIDSource(opts.EventIDFrom)
	if err != nil {
		return nil, &backend.ConfigError{Err: err}
	}
	keyHeader, err := parseKeySource(opts.KeyFrom)
	if err != nil {
		return nil, &backend.ConfigError{Err: err}
	}
	if src.password == "" && opts.Password != "" {
		src.password = opts.Password
		if src.user == "" {
			src.user = "guest"
		}
	}
	q := &Queue{src: src, now: opts.Now, limits: map[string]int{}}
	if q.now == nil {
		q.now = time.Now
	}
	q.dec = decoder{names: names, from: from, keyHeader: keyHeader, quorumLimit: q.originLimit}
	if q.cfg, err = q.config("dlqctl"); err != nil {
		return nil, err
	}
	if src.admin != "" {
		q.admin = newAdminClient(src)
	}
	c, err := q.connection(ctx)
	if err != nil {
		return nil, err
	}
	if v, ok := c.Properties["version"].(string); ok {
		q.server = v
	}
	if _, err := q.inspect(ctx); err != nil {
		if !errors.Is(err, errNoQueue) {
			return nil, err
		}
		q.missing = true
	}
	return q, nil
}

var errNoQueue = errors.New("does not exist")

// config is the AMQP client configuration; name labels the connection in
// the management UI (the lease connection names its run).
func (q *Queue) config(name string) (amqp.Config, error) {
	tc, err := q.src.tlsConfig()
	if err != nil {
		return amqp.Config{}, err
	}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(name)
	timeout := q.src.timeout
	return amqp.Config{
		Vhost:           q.src.vhost,
		Heartbeat:       q.src.heartbeat,
		TLSClientConfig: tc,
		Properties:      props,
		Locale:          "en_US",
		SASL:            []amqp.Authentication{&amqp.PlainAuth{Username: q.user(), Password: q.password()}},
		Dial: func(network, addr string) (net.Conn, error) {
			conn, err := net.DialTimeout(network, addr, timeout)
			if err != nil {
				return nil, err
			}
			// The handshake must finish within the timeout too; the
			// client clears the deadline once it has.
			if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
				return nil, err
			}
			return conn, nil
		},
	}, nil
}

func (q *Queue) user() string {
	if q.src.user == "" {
		return "guest"
	}
	return q.src.user
}

func (q *Queue) password() string {
	if q.src.user == "" && q.src.password == "" {
		return "guest"
	}
	return q.src.password
}

func (q *Queue) dialURL() string {
	scheme := "amqp"
	if q.src.scheme == "amqps" {
		scheme = "amqps"
	}
	return scheme + "://" + q.src.host + "/"
}

// dial opens a new connection with cfg.
func (q *Queue) dial(ctx context.Context, cfg amqp.Config) (*amqp.Connection, error) {
	type result struct {
		c   *amqp.Connection
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := amqp.DialConfig(q.dialURL(), cfg)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, q.wrapConnect(r.err)
		}
		return r.c, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func (q *Queue) wrapConnect(err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) && (ae.Code == amqp.AccessRefused || ae.Code == 0 && contains([]string{"username or password not allowed"}, ae.Reason)) {
		return fmt.Errorf("%s: connect: access refused (check user, password and vhost permissions): %w", q, err)
	}
	if errors.Is(err, amqp.ErrCredentials) {
		return fmt.Errorf("%s: connect: the broker refused the user name or password: %w", q, err)
	}
	if errors.Is(err, amqp.ErrVhost) {
		return backend.Configf("%s: connect: the vhost %q does not exist or the user may not use it", q, q.src.vhost)
	}
	return fmt.Errorf("%s: connect: %w", q, err)
}

// connection is the Queue's shared connection, redialled when it closed.
func (q *Queue) connection(ctx context.Context) (*amqp.Connection, error) {
	q.mu.Lock()
	c := q.conn
	q.mu.Unlock()
	if c != nil && !c.IsClosed() {
		return c, nil
	}
	c, err := q.dial(ctx, q.cfg)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	q.conn = c
	q.mu.Unlock()
	return c, nil
}

// channel opens a channel on the shared connection.
func (q *Queue) channel(ctx context.Context) (*amqp.Channel, error) {
	c, err := q.connection(ctx)
	if err != nil {
		return nil, err
	}
	ch, err := c.Channel()
	if err != nil {
		return nil, q.wrap(ctx, "open a channel", err)
	}
	return ch, nil
}

// inspect declares the DLQ passively: its ready messages and consumers.
// A queue that does not exist wraps errNoQueue.
func (q *Queue) inspect(ctx context.Context) (amqp.Queue, error) {
	return q.inspectQueue(ctx, q.src.queue)
}

func (q *Queue) inspectQueue(ctx context.Context, name string) (amqp.Queue, error) {
	ch, err := q.channel(ctx)
	if err != nil {
		return amqp.Queue{}, err
	}
	st, err := ch.QueueDeclarePassive(name, false, false, false, false, nil)
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return amqp.Queue{}, fmt.Errorf("%s: the queue %q %w", q, name, errNoQueue)
		}
		return amqp.Queue{}, q.wrap(ctx, "declare "+name+" passively", err)
	}
	ch.Close()
	return st, nil
}

// MissingDLQ names the DLQ queue and its vhost when the queue did not exist
// when it was opened ("" when it did), after the redacted URL.
func (q *Queue) MissingDLQ() string {
	if !q.missing {
		return ""
	}
	return fmt.Sprintf("%s: the queue %q does not exist in vhost %q", q, q.src.queue, q.src.vhost)
}

// Notice names a DLQ queue that does not exist.
func (q *Queue) Notice() string {
	if !q.missing {
		return ""
	}
	return fmt.Sprintf("%s: the queue %q does not exist in vhost %q: it reads as empty", q, q.src.queue, q.src.vhost)
}

// String names the DLQ with its password replaced.
func (q *Queue) String() string { return q.src.Display() }

// Close gives back any deliveries a Publish held and closes the connection.
func (q *Queue) Close() error {
	q.mu.Lock()
	c, h, p := q.conn, q.held, q.pub
	q.conn, q.held, q.pub = nil, nil, nil
	q.mu.Unlock()
	if h != nil {
		h.ch.Close()
	}
	if p != nil {
		p.ch.Close()
	}
	if c != nil && !c.IsClosed() {
		return c.Close()
	}
	return nil
}

// Len is the number of messages ready in the DLQ, from a passive
// declare: exact when no consumer holds any (the management API's counts
// would add those, but lag by seconds — a redrive's batch report read them
// as the DLQ's size after a chunk that had emptied it).
func (q *Queue) Len(ctx context.Context) (int64, error) {
	if q.missing {
		return 0, nil
	}
	st, err := q.inspect(ctx)
	if err != nil {
		return 0, err
	}
	return int64(st.Messages), nil
}

// wrap names the queue and the step in an error; when ctx has ended, the
// error wraps ctx.Err() too.
func (q *Queue) wrap(ctx context.Context, what string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w (%v)", ctxErr, err)
	}
	return fmt.Errorf("%s: %s: %w", q, what, err)
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}
