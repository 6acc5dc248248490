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
	"strings"
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
	_ backend.Tailer             = (*Queue)(nil)
	_ backend.LenTailer          = (*Queue)(nil)
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
	// limits caches origin queues' deliveries before dead-lettering
	// (quorum origins with a delivery limit).
	limits map[string]int
	// held is what a Publish read, for the Remove that follows: on a
	// classic or quorum DLQ the consume channel left open with the planned
	// deliveries unacked (see move.go).
	held *holding
	// pub is the publish channel moves reuse (see publisher).
	pub *publisher
	// runID is the run holding the DLQ's lease through this Queue: the
	// removal record names it, and its redriven messages carry it.
	runID string

	// rec is the removal record as read and written (record.go).
	rec record
	// What the last pass that read the whole DLQ learnt: messages other
	// consumers held (unseen), those the record hid, and how many copies
	// of each content with more than one (dups; nil: no such pass yet).
	unseen     int64
	hiddenSeen int64
	dups       map[base]int64
	// present are the entry ids and dlqctl_source_ids Has read (nil: not
	// yet), with what this Queue imported since.
	present map[string]bool
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
	if keys := src.initOnly(); keys != "" {
		return nil, backend.Configf("amqp source %s: %s: only dlqctl dlq init takes these (queue= then names the origin whose dead letters to keep)", src.Display(), keys)
	}
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
	q.dec = decoder{names: names, from: from, keyHeader: keyHeader, quorumDeliveries: q.originDeliveries}
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

// A queue that exists but whose replica is not running yet — a stream or
// quorum queue for some seconds after the broker started — answers a
// declare with NOT_FOUND "… is down or inaccessible": it is waited for
// (up to recoverWait), never read as missing.
const recoverWait = 30 * time.Second

func (q *Queue) inspectQueue(ctx context.Context, name string) (amqp.Queue, error) {
	deadline := time.Now().Add(recoverWait)
	for {
		ch, err := q.channel(ctx)
		if err != nil {
			return amqp.Queue{}, err
		}
		st, err := ch.QueueDeclarePassive(name, false, false, false, false, nil)
		if err == nil {
			ch.Close()
			return st, nil
		}
		var ae *amqp.Error
		switch {
		case errors.As(err, &ae) && ae.Code == amqp.NotFound && strings.Contains(ae.Reason, "down or inaccessible") && time.Now().Before(deadline):
			if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
				return amqp.Queue{}, q.wrap(ctx, "wait for the queue "+name+" to come up", err)
			}
		case errors.As(err, &ae) && ae.Code == amqp.NotFound && strings.Contains(ae.Reason, "down or inaccessible"):
			return amqp.Queue{}, fmt.Errorf("%s: the queue %q exists, but the broker has not brought it up within %s: %w", q, name, recoverWait, err)
		case errors.As(err, &ae) && ae.Code == amqp.NotFound:
			return amqp.Queue{}, fmt.Errorf("%s: the queue %q %w", q, name, errNoQueue)
		default:
			return amqp.Queue{}, q.wrap(ctx, "declare "+name+" passively", err)
		}
	}
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
	h.close()
	if p != nil {
		p.ch.Close()
	}
	if c != nil && !c.IsClosed() {
		return c.Close()
	}
	return nil
}

// Len is the number of entries in the DLQ. On a classic or quorum DLQ:
// the messages ready, from a passive declare, less those the removal
// record hid in the last whole read (the management API's counts would
// add messages consumers hold, but lag by seconds — a redrive's batch
// report read them as the DLQ's size after a chunk that had emptied it).
// On a stream DLQ: its offsets less those the record holds.
func (q *Queue) Len(ctx context.Context) (int64, error) {
	if q.missing {
		return 0, nil
	}
	stream, err := q.streamShaped(ctx)
	if err != nil {
		return 0, err
	}
	if stream {
		n, _, err := q.streamLen(ctx)
		return n, err
	}
	st, err := q.inspect(ctx)
	if err != nil {
		return 0, err
	}
	q.mu.Lock()
	hidden := q.hiddenSeen
	q.mu.Unlock()
	return max(int64(st.Messages)-hidden, 0), nil
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
