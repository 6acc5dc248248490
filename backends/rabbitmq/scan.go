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
	// Limit is the effective delivery limit of a quorum queue, when it
	// has one (Limited): a return that takes a message's delivery count
	// past it drops the message.
	Limit   int
	Limited bool
	// Known: Type and Limit are known (the management API read them, or
	// the queue is not a quorum queue, which has no limit).
	Known bool
}

// shapeOf reads the DLQ's shape once: through the management API when
// admin= is set, else from how the broker answers a consumer under a
// global QoS (probeType).
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
		sh = queueShape{Type: info.Type, Known: true}
		sh.Limit, sh.Limited = info.deliveryLimit(q.server)
	} else {
		t, err := q.probeType(ctx, q.src.queue)
		if err != nil {
			return sh, err
		}
		sh = queueShape{Type: t, Known: t != "quorum"}
	}
	q.mu.Lock()
	q.shape = &sh
	q.mu.Unlock()
	return sh, nil
}

// probeType tells a classic, quorum and stream queue apart without
// costing a delivery: a consumer on a channel with a global QoS of one and
// no prefetch of its own. A quorum queue refuses a global QoS (not
// implemented, which closes the connection: the probe has its own), a
// stream one without a prefetch (precondition failed), and a classic
// queue takes it — whatever one delivery it gets goes back in place, free,
// when the connection closes.
func (q *Queue) probeType(ctx context.Context, queue string) (string, error) {
	c, err := q.dial(ctx, q.cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return "", q.wrap(ctx, "open a channel", err)
	}
	if err := ch.Qos(1, 0, true); err != nil {
		return "", q.wrap(ctx, "set QoS", err)
	}
	tag := "dlqctl-probe-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	_, err = ch.Consume(queue, tag, false, false, false, false, nil)
	var ae *amqp.Error
	switch {
	case err == nil:
		return "classic", nil
	case errors.As(err, &ae) && ae.Code == amqp.NotImplemented && strings.Contains(ae.Reason, "global qos"):
		return "quorum", nil
	case errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed && strings.Contains(ae.Reason, "prefetch count is not set"):
		return "stream", nil
	case errors.As(err, &ae) && ae.Code == amqp.NotFound:
		return "", fmt.Errorf("%s: the queue %q %w", q, queue, errNoQueue)
	}
	return "", q.wrap(ctx, "probe the type of queue "+queue, err)
}

// quorumGuard keeps a read of a quorum DLQ with a delivery limit from
// making the broker drop a message. Each read returns every message it
// saw, and each return counts: a message read with x-delivery-count n is
// at n+1 afterwards and is dropped once that passes the limit. A read
// cannot be undone, so what dlqctl has seen is recorded in the broker
// (reads queue, one message: the highest count a pass left behind), and a
// pass that could bring a message to the limit is refused before it reads
// anything.
//
// That record can be lost (deleted with dlqctl's other queues, a
// definitions reset, an expires policy on idle queues), so a read never
// relies on it alone: it leaves no message above limit-1 (a read without
// the record then brings the head message to the limit at most, and
// stops there), reads with a window that starts at one message and
// widens only while every message seen has room, and checks each
// delivery's own x-delivery-count, stopping at the first that has none.
// Reads start at the head, so the head's count bounds the rest.
type quorumGuard struct {
	q     *Queue
	limit int64
	seen  int64 // highest count this pass leaves behind
	prior int64 // the record when the pass began
}

// ceiling is the highest x-delivery-count a read may leave on a message:
// one below the limit, so that a read that lost the record costs a
// delivery, never a message. A delivery whose return would pass it stops
// the read (that one message then reaches the limit at most).
func (g *quorumGuard) ceiling() int64 { return g.limit - 1 }

func (g *quorumGuard) check(d *amqp.Delivery) error {
	n, _ := toInt(d.Headers[hDeliveryCount])
	if n+1 > g.seen {
		g.seen = n + 1
	}
	if n+1 > g.ceiling() {
		return g.refusal(fmt.Sprintf("a message (message_id %q) has now been delivered %d times", d.MessageId, n+1))
	}
	return nil
}

func (g *quorumGuard) refusal(what string) error {
	return fmt.Errorf("%s: %s from this quorum DLQ, whose delivery limit is %d: dlqctl leaves every message at least one read below it, "+
		"so it does not read this DLQ again; raise the limit with a policy, or move the DLQ's messages to a stream DLQ (dlqctl dlq init) "+
		"or a classic queue, then delete the queue %s (docs/rabbitmq.md)", g.q, what, g.limit, g.q.readsQueue())
}

// noReadInHand refuses every read of a DLQ whose limit leaves no read in
// hand: at 0 (which RabbitMQ 3.x also makes of a negative value) the
// first return drops a message, at 1 a read brings every message it sees
// to the limit, where the next read, by anything, drops it.
func (g *quorumGuard) noReadInHand() error {
	what := "any read would bring every message it sees to that limit, and the next read, by dlqctl or anything else, would drop it"
	if g.limit < 1 {
		what = "the broker drops a message at its first return, and a read of a queue returns every message it sees: any read would drop them"
	}
	return fmt.Errorf("%s: this quorum DLQ's delivery limit is %d: %s; dlqctl reads nothing from it. "+
		"Dead-letter into a stream DLQ instead (dlqctl dlq init amqp://…?queue=ORIGIN makes one; reads of it cost nothing) and move these messages there "+
		"with something that acks what it takes, such as a shovel (a consumer that acks returns nothing); or raise the limit with a policy (docs/rabbitmq.md)", g.q, g.limit, what)
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
	case sh.Type != "quorum":
		return nil, nil
	case !sh.Known:
		return nil, backend.Configf("%s: the queue %q is a quorum queue, which counts every read as a delivery and drops a message "+
			"past its delivery limit; dlqctl reads that limit (queue arguments and policies) through the management API: add admin=http://HOST:15672 "+
			"(docs/rabbitmq.md: a stream DLQ, made by dlqctl dlq init, or a classic one is the safe shape)", q, q.src.queue)
	case !sh.Limited:
		return nil, nil
	}
	g := &quorumGuard{q: q, limit: int64(sh.Limit)}
	if g.ceiling() < 1 {
		return nil, g.noReadInHand()
	}
	if g.prior, err = q.readReads(ctx); err != nil {
		return nil, err
	}
	g.seen = g.prior
	if g.prior+1 > g.ceiling() {
		return nil, g.refusal(fmt.Sprintf("dlqctl has read some messages %d times", g.prior))
	}
	return g, nil
}

// passOpts are what a pass over the DLQ does besides handing entries
// over.
type passOpts struct {
	// window is the prefetch a move's read starts with (see pass); 0
	// reads with unlimited prefetch.
	window int
	// keep, when not nil, takes the channel of a queue-shape pass that
	// ended without error, its deliveries still unacknowledged; it is
	// then responsible for closing it.
	keep func(ch *amqp.Channel)
	// hidden, when not nil, is given each message the removal record
	// hides (dlqctl removed it, and the broker lost or never applied the
	// ack), with its content.
	hidden func(d *amqp.Delivery, b base)
	// from is the offset a stream-shape pass starts at.
	from int64
}

// each reads the DLQ in order and calls fn for every entry it holds (not
// those the removal record hides) with its id, until fn returns
// backend.ErrStop or the DLQ has no more.
func (q *Queue) each(ctx context.Context, o passOpts, fn func(id string, d *amqp.Delivery) error) error {
	sh, err := q.shapeOf(ctx)
	if err != nil {
		return err
	}
	if sh.Type == "stream" {
		return q.streamPass(ctx, o, fn)
	}
	return q.pass(ctx, o, fn)
}

// pass reads a classic or quorum DLQ: it consumes with manual
// acknowledgement on a channel of its own and calls fn for every message
// in queue order with its entry id, until fn returns backend.ErrStop, the
// messages the queue held when the pass began have all come, or none has
// come for idleWait. It never acks: o.keep, when set, takes the channel;
// otherwise the channel is closed and every message goes back.
//
// A move that wants a few entries from the head passes their number as
// o.window: the pass asks for that many and doubles the window (a new
// consumer on the same channel; what the old one holds stays unacked, in
// order) only while what it wants has not all come, so a chunk does not
// pull the whole DLQ over the wire to give it back. A quorum DLQ with a
// delivery limit is always read so, from a window of one (quorumGuard).
func (q *Queue) pass(ctx context.Context, o passOpts, fn func(id string, d *amqp.Delivery) error) (err error) {
	guard, err := q.guard(ctx)
	if err != nil {
		return err
	}
	view, err := q.removedView(ctx)
	if err != nil {
		return err
	}
	ch, err := q.channel(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if o.keep != nil && err == nil {
			o.keep(ch)
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
	want, unseen, err := q.passStart(ctx, ch)
	if err != nil || want == 0 {
		q.notePass(err == nil, unseen, nil)
		return err
	}
	window := o.window
	if guard != nil {
		window = 1
	}
	r := &reader{q: q, ch: ch, guard: guard, ranks: &copyRanks{set: view, seen: map[base]int64{}}, o: o, fn: fn}
	full, err := r.run(ctx, want, window)
	if err == nil && full {
		err = q.checkAlone(ctx, ch, r.consumers)
	}
	q.notePass(err == nil && full, unseen, r)
	return err
}

// reader is one pass's consumer and what it has seen.
type reader struct {
	q      *Queue
	ch     *amqp.Channel
	guard  *quorumGuard
	ranks  *copyRanks
	o      passOpts
	fn     func(id string, d *amqp.Delivery) error
	hidden int
	// consumers is how many consumers the pass started (a quorum queue
	// counts one cancelled while it holds messages).
	consumers int
}

// run reads until want messages came, fn stopped it, or the queue had
// nothing more for this pass; full says it read to the end.
func (r *reader) run(ctx context.Context, want, window int) (full bool, err error) {
	q, ch := r.q, r.ch
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	deliveries, tag, err := q.consume(ctx, ch, window)
	if err != nil {
		return false, err
	}
	r.consumers++
	inWindow := 0 // received by the current consumer
	timer := time.NewTimer(idleWait)
	defer timer.Stop()
	for got := 0; got < want; {
		if window > 0 && inWindow == window && window <= math.MaxUint16 {
			// The window is full and still wanted: a wider one.
			window *= 2
			if deliveries, tag, err = q.widen(ctx, ch, deliveries, tag, window); err != nil {
				return false, err
			}
			r.consumers++
			inWindow = 0
		}
		select {
		case d, ok := <-deliveries:
			if !ok {
				return false, q.wrap(ctx, "consume the DLQ", fmt.Errorf("the channel closed: %v", <-closed))
			}
			got++
			inWindow++
			if err := r.one(&d); err != nil {
				if errors.Is(err, backend.ErrStop) {
					return false, nil
				}
				return false, err
			}
			restart(timer, idleWait)
		case <-timer.C:
			// Silence: done only when the broker has nothing more ready
			// for this pass (the rest, if any, is held by other
			// consumers). A loaded broker can be slow to push; it is not
			// done then.
			more, err := ch.QueueDeclarePassive(q.src.queue, false, false, false, false, nil)
			if err != nil {
				return false, q.wrap(ctx, "declare the DLQ passively", err)
			}
			if more.Messages == 0 {
				return true, nil
			}
			timer.Reset(idleWait)
		case <-ctx.Done():
			return false, q.wrap(ctx, "scan", ctx.Err())
		}
	}
	return true, nil
}

// one checks d against the quorum guard and hands it over with its entry
// id, or to o.hidden when the removal record hides it.
func (r *reader) one(d *amqp.Delivery) error {
	if r.guard != nil {
		if err := r.guard.check(d); err != nil {
			return err
		}
	}
	b, _, _ := splitID(identity(fromDelivery(d), r.q.dec.carriedFingerprint(d.Headers), lastDeath(d.Headers)))
	id, hidden := r.ranks.next(b)
	if hidden {
		r.hidden++
		if r.o.hidden != nil {
			r.o.hidden(d, b)
		}
		return nil
	}
	return r.fn(id, d)
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

// othersWait bounds how long a pass waits for other consumers of the DLQ
// (another dlqctl scan, most often) to give their messages back.
func (q *Queue) othersWait() time.Duration { return q.src.timeout }

// passStart is how many messages a pass reads at most: those the DLQ
// holds now, or no limit on a quorum queue. Messages another consumer
// holds unacknowledged are invisible to a pass, so it first waits for
// other consumers to leave; if they stay, it goes on only when the
// management API can count what they hold (unseen), else it fails: a DLQ
// that could not be seen is never read as empty.
func (q *Queue) passStart(ctx context.Context, ch *amqp.Channel) (want int, unseen int64, err error) {
	deadline := time.Now().Add(q.othersWait())
	for {
		st, err := ch.QueueDeclarePassive(q.src.queue, false, false, false, false, nil)
		if err != nil {
			var ae *amqp.Error
			if errors.As(err, &ae) && ae.Code == amqp.NotFound {
				return 0, 0, fmt.Errorf("%s: the queue %q %w", q, q.src.queue, errNoQueue)
			}
			return 0, 0, q.wrap(ctx, "declare the DLQ passively", err)
		}
		want = st.Messages
		if q.isQuorum() {
			// A quorum queue takes returned messages back asynchronously:
			// its count can lag behind a pass that just ended, so a pass
			// over it ends only when nothing more comes.
			want = math.MaxInt
		}
		if st.Consumers == 0 {
			return want, 0, nil
		}
		if time.Now().After(deadline) {
			return q.othersStay(ctx, st.Consumers, want)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return 0, 0, q.wrap(ctx, "wait for the DLQ's other consumers", ctx.Err())
		}
	}
}

// othersStay decides a pass that other consumers of the DLQ did not leave
// room for: it goes on, counting what they hold as unseen, when the
// management API can count it; else it fails.
func (q *Queue) othersStay(ctx context.Context, consumers, want int) (int, int64, error) {
	if q.admin != nil {
		if info, err := q.admin.queue(ctx, q.src.vhost, q.src.queue); err == nil {
			return want, info.Unacked, nil
		}
	}
	return 0, 0, fmt.Errorf("%s: %d other consumer(s) of the DLQ (another dlqctl scan or move, or an application) stayed for %s: the messages they hold unacknowledged cannot be seen, "+
		"and a read without them would undercount; try again once they are gone, or add admin= so that dlqctl can count what they hold", q, consumers, q.othersWait())
}

// checkAlone fails a pass that read to the end while another consumer
// joined: it may have taken messages this pass then missed. ours is how
// many consumers the pass started.
func (q *Queue) checkAlone(ctx context.Context, ch *amqp.Channel, ours int) error {
	st, err := ch.QueueDeclarePassive(q.src.queue, false, false, false, false, nil)
	if err != nil {
		return q.wrap(ctx, "declare the DLQ passively", err)
	}
	if st.Consumers > ours {
		return fmt.Errorf("%s: another consumer of the DLQ (another dlqctl scan or move, or an application) started during this read and may hold messages it missed; try again", q)
	}
	return nil
}

// notePass keeps what a pass that read the whole DLQ learnt: the messages
// other consumers held (unseen), those the record hides, and how many
// copies of each content with more than one there are.
func (q *Queue) notePass(full bool, unseen int64, r *reader) {
	if !full {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.unseen = unseen
	q.hiddenSeen = 0
	dups := map[base]int64{}
	if r != nil {
		q.hiddenSeen = int64(r.hidden)
		for b, n := range r.ranks.seen {
			if n > 1 {
				dups[b] = n
			}
		}
	}
	q.dups = dups
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

// isQuorum says whether the DLQ is known to be a quorum queue.
func (q *Queue) isQuorum() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shape != nil && q.shape.Type == "quorum"
}

// streamShaped says whether the DLQ is a stream.
func (q *Queue) streamShaped(ctx context.Context) (bool, error) {
	sh, err := q.shapeOf(ctx)
	return sh.Type == "stream", err
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
	give := func(id string, d *amqp.Delivery) error {
		e := q.dec.decode(fromDelivery(d), lean)
		e.ID = id
		return fn(e)
	}
	if run, ok := strings.CutPrefix(after, runWatermark); ok {
		// A batch's watermark (Tail): the dead letters of what this run
		// redrove, which carry its marker.
		return q.each(ctx, passOpts{}, func(id string, d *amqp.Delivery) error {
			if r, _ := d.Headers[backend.MarkerRunID].(string); r != run {
				return nil
			}
			return give(id, d)
		})
	}
	stream, err := q.streamShaped(ctx)
	if err != nil {
		return err
	}
	if stream && after != "" {
		off, err := strconv.ParseInt(after, 10, 64)
		if err != nil || off < -1 {
			return fmt.Errorf("%s: cursor %q: a stream DLQ's entry ids are offsets: %w", q, after, backend.ErrNotFound)
		}
		return q.each(ctx, passOpts{from: off + 1}, give)
	}
	started := after == ""
	err = q.each(ctx, passOpts{}, func(id string, d *amqp.Delivery) error {
		if !started {
			started = id == after
			return nil
		}
		return give(id, d)
	})
	if err == nil && !started {
		return fmt.Errorf("%s: cursor %q: no such message in the DLQ any more (redriven or removed since?): %w", q, after, backend.ErrNotFound)
	}
	return err
}

// Get returns the entry id, reading the DLQ up to it (a stream DLQ: from
// it).
func (q *Queue) Get(ctx context.Context, id string) (envelope.Envelope, error) {
	var out envelope.Envelope
	found := false
	if !q.missing {
		stream, err := q.streamShaped(ctx)
		if err != nil {
			return out, err
		}
		var o passOpts
		if stream {
			off, err := strconv.ParseInt(id, 10, 64)
			if err != nil || off < 0 {
				return out, fmt.Errorf("message %s: %w in %s (a stream DLQ's entry ids are offsets)", id, backend.ErrNotFound, q)
			}
			o.from = off
		}
		err = q.each(ctx, o, func(got string, d *amqp.Delivery) error {
			if got != id {
				if stream {
					return backend.ErrStop // past it: it is not there
				}
				return nil
			}
			out = q.dec.decode(fromDelivery(d), false)
			out.ID, found = got, true
			return backend.ErrStop
		})
		if err != nil {
			return out, err
		}
	}
	if !found {
		return out, fmt.Errorf("message %s: %w in %s", id, backend.ErrNotFound, q)
	}
	return out, nil
}

// originDeliveries is how many deliveries an origin queue that is a
// quorum queue with a delivery limit makes of a message before it
// dead-letters it (a quorum queue dead-letters a message once it has been
// returned more times than its limit: limit + 1 deliveries), read once per
// queue through the management API (0: none, not a quorum queue, or no
// admin=).
func (q *Queue) originDeliveries(queue string) int {
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
		if limit, ok := info.deliveryLimit(q.server); ok {
			n = limit + 1
		}
	}
	q.mu.Lock()
	q.limits[queue] = n
	q.mu.Unlock()
	return n
}

// copyCounts counts, in one whole read of a classic or quorum DLQ, the
// copies of each content in want that it holds, those the removal record
// hides among them.
func (q *Queue) copyCounts(ctx context.Context, want map[base]bool) (map[base]int64, error) {
	counts := map[base]int64{}
	o := passOpts{hidden: func(_ *amqp.Delivery, b base) {
		if want[b] {
			counts[b]++
		}
	}}
	err := q.each(ctx, o, func(id string, _ *amqp.Delivery) error {
		if b, _, ok := splitID(id); ok && want[b] {
			counts[b]++
		}
		return nil
	})
	if errors.Is(err, errNoQueue) {
		return counts, nil
	}
	return counts, err
}

// ScanFingerprints lists each entry's id and fingerprint, decoding a
// message in full only when it carries no fingerprint header (then
// whether it is malformed decides between none and the computed one).
// A plan's staleness check needs no more.
func (q *Queue) ScanFingerprints(ctx context.Context, fn func(id, fingerprint string) error) error {
	if q.missing {
		return nil
	}
	return q.each(ctx, passOpts{}, func(id string, d *amqp.Delivery) error {
		if fp := q.dec.carriedFingerprint(d.Headers); fp != "" && utf8.ValidString(fp) {
			return fn(id, fp)
		}
		return fn(id, q.dec.decode(fromDelivery(d), true).Fingerprint)
	})
}
