package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backend"
)

// The DLQ lease is an exclusive queue, dlqctl.lease.<DLQ>, declared on a
// connection of its own that the run keeps open: the broker lets one
// connection at a time declare it and deletes it when that connection
// closes or dies, so a crashed run frees the DLQ at once (on a half-open
// network, once the broker's heartbeat check has given up on it: about
// two heartbeat intervals). Who holds it is written, as the one message,
// to a second queue, dlqctl.lease.<DLQ>.holder (at most one message,
// newest kept), that a refused run reads and gives back. When the lease
// connection drops (a broker restart), the run declares the queue again;
// the lease is lost only if another run holds it by then.

func (q *Queue) leaseQueue() string  { return "dlqctl.lease." + q.src.queue }
func (q *Queue) holderQueue() string { return q.leaseQueue() + ".holder" }

type lease struct {
	q        *Queue
	h        backend.LeaseHolder
	mu       sync.Mutex
	conn     *amqp.Connection
	lost     chan struct{}
	lostOnce sync.Once
	released chan struct{}
	relOnce  sync.Once
	done     chan struct{}
}

func (l *lease) Lost() <-chan struct{} { return l.lost }

// Release closes the lease connection: the broker deletes the queue.
func (l *lease) Release(context.Context) error {
	l.relOnce.Do(func() { close(l.released) })
	<-l.done
	l.mu.Lock()
	c := l.conn
	l.mu.Unlock()
	if err := c.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
		return err
	}
	return nil
}

// leaseRetry is how often a lease whose connection closed is taken again.
const leaseRetry = 500 * time.Millisecond

// watch keeps the lease: when its connection closes (the broker restarted,
// the network dropped) the queue is gone, so it declares it again on a new
// connection. Only when another connection holds it meanwhile is the
// lease lost; while the broker cannot be reached nobody else can take it
// either, and the run's own moves fail on their own.
func (l *lease) watch() {
	defer close(l.done)
	for {
		l.mu.Lock()
		c := l.conn
		l.mu.Unlock()
		closed := c.NotifyClose(make(chan *amqp.Error, 1))
		select {
		case <-closed:
		case <-l.released:
			return
		}
		for {
			select {
			case <-l.released:
				return
			case <-time.After(leaseRetry):
			}
			ctx, cancel := context.WithTimeout(context.Background(), l.q.src.timeout)
			nc, err := l.q.takeLease(ctx, l.h)
			cancel()
			var be *backend.BusyError
			if errors.As(err, &be) {
				l.lostOnce.Do(func() { close(l.lost) })
				return
			}
			if err == nil {
				l.mu.Lock()
				l.conn = nc
				l.mu.Unlock()
				break
			}
		}
	}
}

func encodeHolder(h backend.LeaseHolder) string {
	return strings.Join([]string{h.RunID, strconv.Itoa(h.PID), h.Host, strconv.FormatInt(h.Since.Unix(), 10)}, "|")
}

func decodeHolder(s string) (backend.LeaseHolder, bool) {
	p := strings.Split(s, "|")
	if len(p) != 4 {
		return backend.LeaseHolder{}, false
	}
	pid, err1 := strconv.Atoi(p[1])
	since, err2 := strconv.ParseInt(p[3], 10, 64)
	if err1 != nil || err2 != nil {
		return backend.LeaseHolder{}, false
	}
	return backend.LeaseHolder{RunID: p[0], PID: pid, Host: p[2], Since: time.Unix(since, 0).UTC()}, true
}

// Lease takes the DLQ for h.RunID, or fails with a *backend.BusyError
// naming the run that holds it.
func (q *Queue) Lease(ctx context.Context, h backend.LeaseHolder) (backend.Lease, error) {
	if h.RunID == "" || strings.Contains(h.RunID, "|") {
		return nil, fmt.Errorf("%s: lease: bad run ID %q", q, h.RunID)
	}
	if h.PID == 0 {
		h.PID = os.Getpid()
	}
	if h.Host == "" {
		h.Host = hostname()
	}
	h.Host = strings.ReplaceAll(h.Host, "|", "_")
	if h.Since.IsZero() {
		h.Since = q.now()
	}
	c, err := q.takeLease(ctx, h)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	q.runID = h.RunID
	q.mu.Unlock()
	l := &lease{q: q, h: h, conn: c, lost: make(chan struct{}), released: make(chan struct{}), done: make(chan struct{})}
	go l.watch()
	return l, nil
}

// takeLease declares the lease queue on a new connection and records the
// holder; a queue another connection holds is a *backend.BusyError.
func (q *Queue) takeLease(ctx context.Context, h backend.LeaseHolder) (*amqp.Connection, error) {
	cfg, err := q.config("dlqctl lease " + h.String())
	if err != nil {
		return nil, err
	}
	c, err := q.dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ch, err := c.Channel()
	if err != nil {
		c.Close()
		return nil, q.wrap(ctx, "lease: open a channel", err)
	}
	if _, err := ch.QueueDeclare(q.leaseQueue(), false, true, true, false, nil); err != nil {
		c.Close()
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.ResourceLocked {
			return nil, q.busy(ctx, h)
		}
		return nil, q.wrap(ctx, "lease: declare "+q.leaseQueue(), err)
	}
	ch2, err := c.Channel()
	if err == nil {
		if _, err = ch2.QueueDeclare(q.holderQueue(), true, false, false, false, amqp.Table{"x-max-length": int32(1)}); err == nil {
			err = ch2.PublishWithContext(ctx, "", q.holderQueue(), false, false, amqp.Publishing{Body: []byte(encodeHolder(h)), DeliveryMode: amqp.Persistent})
		}
	}
	if err != nil {
		c.Close()
		return nil, q.wrap(ctx, "lease: record the holder", err)
	}
	return c, nil
}

func (q *Queue) busy(ctx context.Context, me backend.LeaseHolder) error {
	holder := "another run (its description could not be read)"
	if h, ok := q.readHolder(ctx); ok {
		holder = h.String()
		if h.RunID == me.RunID {
			holder += "; it is this same run's, left by a connection the broker has not yet seen die: it is freed once the heartbeat check gives up on it (about two heartbeats)"
		}
	}
	return &backend.BusyError{What: "DLQ " + q.String(), Holder: holder}
}

// readHolder reads the holder queue's message and gives it back.
func (q *Queue) readHolder(ctx context.Context) (backend.LeaseHolder, bool) {
	ch, err := q.channel(ctx)
	if err != nil {
		return backend.LeaseHolder{}, false
	}
	defer ch.Close()
	d, ok, err := ch.Get(q.holderQueue(), false)
	if err != nil || !ok {
		return backend.LeaseHolder{}, false
	}
	return decodeHolder(string(d.Body))
}

// LeaseHolder describes the run holding the DLQ, "" when none does.
func (q *Queue) LeaseHolder(ctx context.Context) (string, error) {
	ch, err := q.channel(ctx)
	if err != nil {
		return "", err
	}
	_, err = ch.QueueDeclarePassive(q.leaseQueue(), false, true, true, false, nil)
	var ae *amqp.Error
	switch {
	case err == nil:
		// Declared passively by this connection means no other holds it
		// exclusively: a passive declare of another's exclusive queue is
		// refused as locked.
		ch.Close()
		return "", nil
	case errors.As(err, &ae) && ae.Code == amqp.NotFound:
		return "", nil
	case errors.As(err, &ae) && ae.Code == amqp.ResourceLocked:
		if h, ok := q.readHolder(ctx); ok {
			return h.String(), nil
		}
		return "another run", nil
	}
	return "", q.wrap(ctx, "read the lease", err)
}
