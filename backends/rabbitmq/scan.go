package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// idleWait is how long a pass waits, with no message coming, before it
// asks the broker whether any are still ready for it: a pass that has
// received fewer messages than the queue held when it began (another
// consumer holds some) ends once none are.
const idleWait = time.Second

// queueShape is what dlqctl knows of the DLQ's type and delivery limit.
type queueShape struct {
	Type string // "classic", "quorum", "stream"
	// Limit is the effective delivery limit of a quorum queue (0: none).
	Limit int
	// Known: Type and Limit were read (management API), not guessed.
	Known bool
}

// shapeOf reads the DLQ's shape once: through the management API when
// admin= is set, else by asking the broker whether the queue takes a
// global QoS consumer (quorum queues refuse one; the refusal closes the
// connection, so the probe has its own).
func (q *Queue) shapeOf(ctx context.Context) (queueShape, error) {
	q.mu.Lock()
	s := q.shape
	q.mu.Unlock()
	if s != nil {
		return *s, nil
	}
	var sh queueShape
	if q.admin != nil {
		info, err := q.admin.queue(ctx, q.src.vhost, q.src.queue)
		if err != nil {
			return sh, err
		}
		sh = queueShape{Type: info.Type, Limit: info.deliveryLimit(q.server), Known: true}
	} else {
		quorum, err := q.probeQuorum(ctx)
		if err != nil {
			return sh, err
		}
		sh.Type = "classic"
		if quorum {
			sh.Type = "quorum"
		}
	}
	q.mu.Lock()
	q.shape = &sh
	q.mu.Unlock()
	return sh, nil
}

func (q *Queue) probeQuorum(ctx context.Context) (bool, error) {
	c, err := q.dial(ctx, q.cfg)
	if err != nil {
		return false, err
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return false, q.wrap(ctx, "open a channel", err)
	}
	if err := ch.Qos(1, 0, true); err != nil {
		return false, q.wrap(ctx, "set QoS", err)
	}
	tag := "dlqctl-probe-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	_, err = ch.Consume(q.src.queue, tag, false, false, false, false, nil)
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotImplemented && strings.Contains(ae.Reason, "global qos") {
		return true, nil
	}
	if err != nil {
		return false, q.wrap(ctx, "probe the queue's type", err)
	}
	// A classic queue: whatever one delivery the probe got goes back when
	// the connection closes (flagged redelivered, in place).
	return false, nil
}

// quorumGuard keeps a pass over a quorum DLQ with a delivery limit from
// making the broker drop a message. Each read returns every message it
// saw, and each return counts: a message read with x-delivery-count n is
// at n+1 afterwards and is dropped once that passes the limit. A read
// cannot be undone, so what dlqctl has seen is recorded in the broker
// (reads queue, one message: the highest count a pass left behind) and a
// pass that could push a message past the limit is refused before it
// reads anything; within a pass, a message at the limit stops it.
type quorumGuard struct {
	q     *Queue
	limit int64
	seen  int64 // highest count this pass leaves behind
	prior int64 // the record when the pass began
}

func (g *quorumGuard) check(d *amqp.Delivery) error {
	n, _ := toInt(d.Headers[hDeliveryCount])
	if n+1 > g.seen {
		g.seen = n + 1
	}
	if n+1 >= g.limit {
		return g.refusal(fmt.Sprintf("a message (message_id %q) has now been delivered %d times", d.MessageId, n+1))
	}
	return nil
}

func (g *quorumGuard) refusal(what string) error {
	return fmt.Errorf("%s: %s from this quorum DLQ, whose delivery limit is %d: one more read could make RabbitMQ drop or dead-letter it, "+
		"so dlqctl does not read it again; raise the limit with a policy or move the DLQ's messages to a classic queue, "+
		"then delete the queue %s (docs/rabbitmq.md)", g.q, what, g.limit, g.q.readsQueue())
}

// done records the highest count this pass left, when it raised it.
func (g *quorumGuard) done(ctx context.Context) error {
	if g.seen <= g.prior {
		return nil
	}
	return g.q.writeReads(ctx, g.seen)
}

// readsQueue holds the highest x-delivery-count dlqctl has left on the
// DLQ's messages (a classic queue: reading it costs nothing).
func (q *Queue) readsQueue() string { return "dlqctl.reads." + q.src.queue }

func (q *Queue) readReads(ctx context.Context) (int64, error) {
	ch, err := q.channel(ctx)
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	d, ok, err := ch.Get(q.readsQueue(), false)
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return 0, nil
		}
		return 0, q.wrap(ctx, "read "+q.readsQueue(), err)
	}
	if !ok {
		return 0, nil
	}
	n, _ := strconv.ParseInt(string(d.Body), 10, 64)
	return n, nil
}

func (q *Queue) writeReads(ctx context.Context, n int64) error {
	ch, err := q.channel(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(q.readsQueue(), true, false, false, false, amqp.Table{"x-max-length": int32(1)}); err != nil {
		return q.wrap(ctx, "declare "+q.readsQueue(), err)
	}
	if err := ch.PublishWithContext(ctx, "", q.readsQueue(), false, false, amqp.Publishing{
		Body: []byte(strconv.FormatInt(n, 10)), DeliveryMode: amqp.Persistent,
	}); err != nil {
		return q.wrap(ctx, "record the reads in "+q.readsQueue(), err)
	}
	return nil
}

// guard checks, before a pass over the DLQ, that the pass is safe, and
// returns the guard of a quorum DLQ with a delivery limit (nil for any
// other).
func (q *Queue) guard(ctx context.Context) (*quorumGuard, error) {
	sh, err := q.shapeOf(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case sh.Type == "stream":
		return nil, backend.Configf("%s: the queue %q is a stream: dlqctl reads classic and quorum DLQs", q, q.src.queue)
	case sh.Type != "quorum":
		return nil, nil
	case !sh.Known:
		return nil, backend.Configf("%s: the queue %q is a quorum queue, which counts every read as a delivery and drops a message "+
			"past its delivery limit; dlqctl reads that limit (queue arguments and policies) through the management API: add admin=http://HOST:15672 "+
			"(docs/rabbitmq.md: a classic DLQ is the safe shape)", q, q.src.queue)
	case sh.Limit <= 0:
		return nil, nil
	}
	g := &quorumGuard{q: q, limit: int64(sh.Limit)}
	if g.prior, err = q.readReads(ctx); err != nil {
		return nil, err
	}
	g.seen = g.prior
	if g.prior+1 > g.limit {
		return nil, g.refusal(fmt.Sprintf("dlqctl has read some messages %d times", g.prior))
	}
	return g, nil
}

// pass consumes the DLQ with manual acknowledgement on a channel of its
// own and calls fn for every message in queue order with its entry id,
// until fn returns backend.ErrStop, the messages the queue held when the
// pass began have all come, or none has come for idleWait. It never acks:
// keep, when not nil, takes the channel and is responsible for closing
// it; otherwise the channel is closed and every message goes back.
//
// window 0 reads with unlimited prefetch (a whole-DLQ scan: one that never
// acks would stall at any limit). A move that wants a few entries from the
// head passes their number: the pass then asks for that many and doubles
// the window (a new consumer on the same channel; what the old one holds
// stays unacked, in order) only while what it wants has not all come, so
// a chunk does not pull the whole DLQ over the wire to give it back.
func (q *Queue) pass(ctx context.Context, window int, fn func(id string, d *amqp.Delivery) error, keep func(ch *amqp.Channel)) (err error) {
	guard, err := q.guard(ctx)
	if err != nil {
		return err
	}
	ch, err := q.channel(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if keep != nil && err == nil {
			keep(ch)
		} else if cerr := ch.Close(); cerr != nil && err == nil && !errors.Is(cerr, amqp.ErrClosed) {
			err = q.wrap(ctx, "give the messages back (channel close)", cerr)
		}
		if guard != nil {
			// Recorded whatever the pass's outcome: every message it
			// read was returned, or will be, and counted.
			if gerr := guard.done(context.WithoutCancel(ctx)); gerr != nil && err == nil {
				err = gerr
			}
		}
	}()
	want, err := q.passWant(ctx, ch)
	if err != nil || want == 0 {
		return err
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	deliveries, tag, err := q.consume(ctx, ch, window)
	if err != nil {
		return err
	}
	inWindow := 0 // received by the current consumer
	seen := ids{}
	timer := time.NewTimer(idleWait)
	defer timer.Stop()
	for got := 0; got < want; {
		if window > 0 && inWindow == window && window <= math.MaxUint16 {
			// The window is full and still wanted: a wider one.
			window *= 2
			if deliveries, tag, err = q.widen(ctx, ch, deliveries, tag, window); err != nil {
				return err
			}
			inWindow = 0
		}
		select {
		case d, ok := <-deliveries:
			if !ok {
				return q.wrap(ctx, "consume the DLQ", fmt.Errorf("the channel closed: %v", <-closed))
			}
			got++
			inWindow++
			if err := q.passOne(guard, seen, &d, fn); err != nil {
				if errors.Is(err, backend.ErrStop) {
					return nil
				}
				return err
			}
			restart(timer, idleWait)
		case <-timer.C:
			// Silence: done only when the broker has nothing more ready
			// for this pass (the rest, if any, is held by other
			// consumers). A loaded broker can be slow to push; it is not
			// done then.
			more, err := ch.QueueDeclarePassive(q.src.queue, false, false, false, false, nil)
			if err != nil {
				return q.wrap(ctx, "declare the DLQ passively", err)
			}
			if more.Messages == 0 {
				return nil
			}
			timer.Reset(idleWait)
		case <-ctx.Done():
			return q.wrap(ctx, "scan", ctx.Err())
		}
	}
	return nil
}

// restart stops timer, drains it, and starts it again for d.
func restart(timer *time.Timer, d time.Duration) {
	if !timer.Stop() {
		select {
		case <-timer.C:
		default:
		}
	}
	timer.Reset(d)
}

// passWant is how many messages a pass reads at most: those the DLQ holds
// now, or no limit on a quorum queue.
func (q *Queue) passWant(ctx context.Context, ch *amqp.Channel) (int, error) {
	st, err := ch.QueueDeclarePassive(q.src.queue, false, false, false, false, nil)
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return 0, fmt.Errorf("%s: the queue %q %w", q, q.src.queue, errNoQueue)
		}
		return 0, q.wrap(ctx, "declare the DLQ passively", err)
	}
	want := st.Messages
	if q.isQuorum() {
		// A quorum queue takes returned messages back asynchronously: its
		// count can lag behind a pass that just ended, so a pass over it
		// ends only when nothing more comes.
		want = math.MaxInt
	}
	return want, nil
}

// consume starts a consumer of the DLQ on ch with the given prefetch (0,
// or past what AMQP can say: unlimited) and returns its deliveries and tag.
func (q *Queue) consume(ctx context.Context, ch *amqp.Channel, prefetch int) (<-chan amqp.Delivery, string, error) {
	if prefetch > math.MaxUint16 {
		prefetch = 0
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return nil, "", q.wrap(ctx, "set QoS", err)
	}
	tag := "dlqctl-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ds, err := ch.Consume(q.src.queue, tag, false, false, false, false, nil)
	if err != nil {
		return nil, "", q.wrap(ctx, "consume the DLQ", err)
	}
	return ds, tag, nil
}

// widen cancels the consumer tag, drains its deliveries and starts one
// with the window as prefetch; what the old one holds stays unacked, in
// order.
func (q *Queue) widen(ctx context.Context, ch *amqp.Channel, deliveries <-chan amqp.Delivery, tag string, window int) (<-chan amqp.Delivery, string, error) {
	if err := ch.Cancel(tag, false); err != nil {
		return nil, "", q.wrap(ctx, "widen the read window", err)
	}
	for range deliveries {
		// Drained: none can be in flight past a full window.
	}
	return q.consume(ctx, ch, window)
}

// passOne checks d against the quorum guard and calls fn with its entry
// id.
func (q *Queue) passOne(guard *quorumGuard, seen ids, d *amqp.Delivery, fn func(id string, d *amqp.Delivery) error) error {
	if guard != nil {
		if err := guard.check(d); err != nil {
			return err
		}
	}
	base := identity(fromDelivery(d), q.dec.carriedFingerprint(d.Headers), lastDeath(d.Headers))
	return fn(seen.next(base), d)
}

// isQuorum says whether the DLQ is known to be a quorum queue.
func (q *Queue) isQuorum() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shape != nil && q.shape.Type == "quorum"
}

// carriedFingerprint is the fingerprint header's value, "" when none.
func (d *decoder) carriedFingerprint(h amqp.Table) string {
	for _, n := range d.names[envelope.FieldFingerprint] {
		if s, ok := h[n].(string); ok {
			return s
		}
	}
	return ""
}

// lastDeath is the newest x-death entry, zero when there is none or it
// does not read.
func lastDeath(h amqp.Table) death {
	v, ok := h[hXDeath]
	if !ok {
		return death{}
	}
	ds, _ := parseDeaths(v)
	if len(ds) == 0 {
		return death{}
	}
	return ds[0]
}

// Scan hands over every message in queue (dead-letter) order, starting
// after the entry id after.
func (q *Queue) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	return q.scan(ctx, after, false, fn)
}

// ScanLean is Scan without properties and raw forms.
func (q *Queue) ScanLean(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	return q.scan(ctx, after, true, fn)
}

func (q *Queue) scan(ctx context.Context, after string, lean bool, fn func(envelope.Envelope) error) error {
	if q.missing {
		return nil
	}
	started := after == ""
	err := q.pass(ctx, 0, func(id string, d *amqp.Delivery) error {
		if !started {
			started = id == after
			return nil
		}
		e := q.dec.decode(fromDelivery(d), lean)
		e.ID = id
		return fn(e)
	}, nil)
	if err == nil && !started {
		return fmt.Errorf("%s: cursor %q: no such message in the DLQ any more (redriven or removed since?): %w", q, after, backend.ErrNotFound)
	}
	return err
}

// Get returns the entry id, reading the DLQ up to it.
func (q *Queue) Get(ctx context.Context, id string) (envelope.Envelope, error) {
	var out envelope.Envelope
	found := false
	if !q.missing {
		err := q.pass(ctx, 0, func(got string, d *amqp.Delivery) error {
			if got != id {
				return nil
			}
			out = q.dec.decode(fromDelivery(d), false)
			out.ID, found = got, true
			return backend.ErrStop
		}, nil)
		if err != nil {
			return out, err
		}
	}
	if !found {
		return out, fmt.Errorf("message %s: %w in %s", id, backend.ErrNotFound, q)
	}
	return out, nil
}

// originLimit is the delivery limit of an origin queue that is a quorum
// queue, read once per queue through the management API (0: none, not a
// quorum queue, or no admin=).
func (q *Queue) originLimit(queue string) int {
	if q.admin == nil {
		return 0
	}
	q.mu.Lock()
	n, ok := q.limits[queue]
	q.mu.Unlock()
	if ok {
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.src.timeout)
	defer cancel()
	if info, err := q.admin.queue(ctx, q.src.vhost, queue); err == nil && info.Type == "quorum" {
		n = info.deliveryLimit(q.server)
	}
	q.mu.Lock()
	q.limits[queue] = n
	q.mu.Unlock()
	return n
}

// ScanFingerprints lists each entry's id and fingerprint, decoding a
// message in full only when it carries no fingerprint header (then
// whether it is malformed decides between none and the computed one).
// A plan's staleness check needs no more.
func (q *Queue) ScanFingerprints(ctx context.Context, fn func(id, fingerprint string) error) error {
	if q.missing {
		return nil
	}
	return q.pass(ctx, 0, func(id string, d *amqp.Delivery) error {
		if fp := q.dec.carriedFingerprint(d.Headers); fp != "" && utf8.ValidString(fp) {
			return fn(id, fp)
		}
		return fn(id, q.dec.decode(fromDelivery(d), true).Fingerprint)
	}, nil)
}
