package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// holding is a consume channel left open by Publish: the planned
// deliveries stay unacknowledged on it, by entry id, until Remove acks
// them and closes it (every other message read on it goes back then).
type holding struct {
	ch   *amqp.Channel
	tags map[string]uint64
}

// dest is where a redriven message goes: an exchange and a routing key
// (the default exchange "" and a queue name for a queue).
type dest struct {
	exchange, key string
}

// parseDest reads a plan's destination: QUEUE, or exchange:EX/KEY.
func parseDest(s string) (dest, error) {
	if rest, ok := strings.CutPrefix(s, "exchange:"); ok {
		ex, key, _ := strings.Cut(rest, "/")
		if ex == "" {
			return dest{}, fmt.Errorf("destination %q: want exchange:EXCHANGE/ROUTINGKEY", s)
		}
		return dest{exchange: ex, key: key}, nil
	}
	if s == "" || len(s) > 255 {
		return dest{}, fmt.Errorf("destination %q is not a queue name", s)
	}
	return dest{key: s}, nil
}

func (d dest) String() string {
	if d.exchange == "" {
		return "queue " + d.key
	}
	return "exchange " + d.exchange + " (routing key " + d.key + ")"
}

// Atomic is false: the publish to the origin and the ack on the DLQ are
// two steps; the journal covers the gap.
func (q *Queue) Atomic() bool { return false }

// DefaultDest is the origin queue (x-first-death-queue), through the
// default exchange.
func (q *Queue) DefaultDest(origin string) string { return origin }

// release closes a channel an earlier Publish left open, giving its
// messages back.
func (q *Queue) release() {
	q.mu.Lock()
	h := q.held
	q.held = nil
	q.mu.Unlock()
	if h != nil {
		h.ch.Close()
	}
}

// take reads the DLQ from its head until every id in want has come (or
// the queue is exhausted) and returns their deliveries, on a channel kept
// open: the caller acks what it moved and closes the channel.
func (q *Queue) take(ctx context.Context, want map[string]bool) (map[string]*amqp.Delivery, *amqp.Channel, error) {
	got := map[string]*amqp.Delivery{}
	var kept *amqp.Channel
	err := q.pass(ctx, len(want)+16, func(id string, d *amqp.Delivery) error {
		if want[id] {
			dd := *d
			got[id] = &dd
			if len(got) == len(want) {
				return backend.ErrStop
			}
		}
		return nil
	}, func(ch *amqp.Channel) { kept = ch })
	if errors.Is(err, errNoQueue) {
		return got, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return got, kept, nil
}

// Publish sends each item's message to item.Dest with publisher confirms
// and mandatory, in order: body and properties as they are (persistent
// stays persistent), the headers without the broker's x-death,
// x-first-death-* and x-delivery-count (the x-death history is kept under
// dlqctl-x-death, which no broker version interprets), redrive_count one
// higher and the markers. The planned deliveries stay unacknowledged for
// Remove.
//
// Per item, nothing is sent and Err is set when the message is not in the
// DLQ (ErrNotFound), its fingerprint is not the planned one (ErrChanged)
// or it has no destination. An unroutable message (no such queue, no
// binding) comes back as basic.return and a message the broker refuses
// as a nack: both are that item's error, never a silent drop. A lost
// connection or a confirm that never came returns an error: the outcome
// of every item is then unknown, and a resend keeps the message_id.
func (q *Queue) Publish(ctx context.Context, items []backend.MoveItem, m backend.Markers) ([]backend.MoveResult, error) {
	q.release()
	results := make([]backend.MoveResult, len(items))
	want := map[string]bool{}
	for _, it := range items {
		want[it.ID] = true
	}
	got, consumeCh, err := q.take(ctx, want)
	if err != nil {
		return nil, err
	}
	hold := &holding{ch: consumeCh, tags: map[string]uint64{}}
	keep := false
	defer func() {
		if !keep && consumeCh != nil {
			consumeCh.Close()
		}
	}()
	pub, returns, err := q.publisher(ctx, len(items))
	if err != nil {
		return nil, err
	}
	var inflight []sentItem
	for i, it := range items {
		d, ok := got[it.ID]
		if !ok {
			results[i].Err = fmt.Errorf("message %s: %w in %s", it.ID, backend.ErrNotFound, q)
			continue
		}
		to, err := q.checkMove(d, it)
		if err != nil {
			results[i].Err = err
			continue
		}
		dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, to.exchange, to.key, true, false, q.redriven(d, it, m))
		if err != nil {
			return nil, q.wrap(ctx, "publish to "+to.String(), err)
		}
		hold.tags[it.ID] = d.DeliveryTag
		results[i].DestID = destID(d, it)
		inflight = append(inflight, sentItem{i, dc})
	}
	if err := q.awaitConfirms(ctx, inflight, items, results); err != nil {
		return nil, err
	}
	// A return comes before its confirm, so every return is in the
	// buffer once every confirm has come.
	takeReturns(returns, items, results)
	for i, it := range items {
		if results[i].Err != nil {
			delete(hold.tags, it.ID)
		}
	}
	if consumeCh != nil {
		keep = true
		q.mu.Lock()
		q.held = hold
		q.mu.Unlock()
	}
	return results, nil
}

// sentItem is item i, published, and its confirm to come.
type sentItem struct {
	i  int
	dc *amqp.DeferredConfirmation
}

// checkMove is where it goes, or why d is not moved: its fingerprint is
// not the planned one, or it has no destination, or not one that parses.
func (q *Queue) checkMove(d *amqp.Delivery, it backend.MoveItem) (dest, error) {
	env := q.dec.decode(fromDelivery(d), true)
	if !strings.EqualFold(env.Fingerprint, it.Fingerprint) {
		return dest{}, fmt.Errorf("message %s: %w (planned %s, now %s)", it.ID, backend.ErrChanged, it.Fingerprint, env.Fingerprint)
	}
	if it.Dest == "" {
		return dest{}, fmt.Errorf("move %s: no destination: the message has no x-first-death-queue or x-death (is this queue a DLQ?); give --to QUEUE or --to exchange:EX/KEY", it.ID)
	}
	to, err := parseDest(it.Dest)
	if err != nil {
		return dest{}, fmt.Errorf("move %s: %v", it.ID, err)
	}
	return to, nil
}

// awaitConfirms waits for each publish's confirm, in order; a nack is
// that item's error.
func (q *Queue) awaitConfirms(ctx context.Context, inflight []sentItem, items []backend.MoveItem, results []backend.MoveResult) error {
	for _, s := range inflight {
		ok, err := s.dc.WaitContext(ctx)
		if err != nil {
			return q.wrap(ctx, "wait for the broker's confirm", err)
		}
		if !ok {
			results[s.i].Err = fmt.Errorf("move %s: the broker refused the message (nack) for %s", items[s.i].ID, items[s.i].Dest)
			results[s.i].DestID = ""
		}
	}
	return nil
}

// takeReturns makes each message the broker returned (unroutable) its
// item's error; it takes what returns holds now.
func takeReturns(returns <-chan amqp.Return, items []backend.MoveItem, results []backend.MoveResult) {
	for {
		select {
		case r := <-returns:
			seq, _ := toInt(r.Headers[backend.MarkerSeq])
			if s, ok := r.Headers[backend.MarkerSeq].(string); ok {
				seq, _ = strconv.ParseInt(s, 10, 64)
			}
			for i, it := range items {
				if it.Seq == seq && results[i].Err == nil {
					results[i].Err = fmt.Errorf("move %s: unroutable: %s returned it (%d %s): does the queue exist?", it.ID, items[i].Dest, r.ReplyCode, r.ReplyText)
					results[i].DestID = ""
				}
			}
		default:
			return
		}
	}
}

// publisher is the Queue's publish channel, in confirm mode, with its
// returns; it lasts across chunks (a channel and confirm.select per chunk
// cost two round trips each). A channel that closed (a publish error, a
// lost connection) is replaced, and one too small for this chunk's
// returns is replaced by a larger one.
func (q *Queue) publisher(ctx context.Context, n int) (*amqp.Channel, <-chan amqp.Return, error) {
	q.mu.Lock()
	p := q.pub
	q.mu.Unlock()
	if p != nil && !p.ch.IsClosed() && p.size >= n {
		// Returns of an earlier chunk were all drained after its confirms.
		return p.ch, p.returns, nil
	}
	if p != nil {
		p.ch.Close()
	}
	ch, err := q.channel(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, nil, q.wrap(ctx, "put the publish channel in confirm mode", err)
	}
	size := max(n, 1024)
	p = &publisher{ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, size)), size: size}
	q.mu.Lock()
	q.pub = p
	q.mu.Unlock()
	return p.ch, p.returns, nil
}

// publisher is a confirm-mode channel and the buffer of its returns.
type publisher struct {
	ch      *amqp.Channel
	returns chan amqp.Return
	size    int
}

// destID is what the journal records as the destination's message ID:
// the message_id, which the redriven message keeps.
func destID(d *amqp.Delivery, it backend.MoveItem) string {
	if d.MessageId != "" {
		return d.MessageId
	}
	return "seq-" + strconv.FormatInt(it.Seq, 10)
}

// redriven is the message a redrive publishes for d.
func (q *Queue) redriven(d *amqp.Delivery, it backend.MoveItem, mk backend.Markers) amqp.Publishing {
	h := amqp.Table{}
	for k, v := range d.Headers {
		switch k {
		case hXDeath:
			h[hDeathHistory] = v
		case hFirstDeathQueue, hFirstDeathReason, hFirstDeathExchange, hDeliveryCount,
			"x-last-death-queue", "x-last-death-reason", "x-last-death-exchange", envelope.ImportedFromProperty:
		default:
			h[k] = v
		}
	}
	rcName, count := q.dec.names[envelope.FieldRedriveCount][0], int64(0)
	for _, n := range q.dec.names[envelope.FieldRedriveCount] {
		if v, ok := h[n]; ok {
			rcName = n
			if s, ok := v.(string); ok {
				count, _ = strconv.ParseInt(s, 10, 64)
			} else {
				count, _ = toInt(v)
			}
			break
		}
	}
	h[rcName] = strconv.FormatInt(count+1, 10)
	h[backend.MarkerRunID] = mk.RunID
	h[backend.MarkerSeq] = strconv.FormatInt(it.Seq, 10)
	h[backend.MarkerRedrivenFrom] = it.ID
	p := fromDelivery(d).props
	p.Headers = h
	// The broker refuses a user_id that is not the publishing connection's
	// user; it is dropped then (the consumer never relied on it being
	// validated twice).
	if p.UserId != "" && p.UserId != q.user() {
		p.UserId = ""
	}
	return p
}

// Remove acks each item's DLQ message: on the channel its Publish kept
// when there is one, else after reading the DLQ up to it. The channel is
// closed after the acks, which is how dlqctl knows the broker has them
// (an ack has no answer; the close does, after everything sent before it).
func (q *Queue) Remove(ctx context.Context, items []backend.MoveItem) ([]backend.MoveResult, error) {
	results := make([]backend.MoveResult, len(items))
	q.mu.Lock()
	h := q.held
	q.held = nil
	q.mu.Unlock()
	tags := map[string]uint64{}
	var ch *amqp.Channel
	if h != nil {
		ch = h.ch
		for _, it := range items {
			if t, ok := h.tags[it.ID]; ok {
				tags[it.ID] = t
			}
		}
	}
	if len(tags) < len(items) {
		// Some were not held (a resume, or a resolve): read them afresh.
		if ch != nil {
			ch.Close()
		}
		want := map[string]bool{}
		for _, it := range items {
			want[it.ID] = true
		}
		got, kept, err := q.take(ctx, want)
		if err != nil {
			return nil, err
		}
		ch = kept
		tags = map[string]uint64{}
		for id, d := range got {
			tags[id] = d.DeliveryTag
		}
	}
	if ch == nil {
		for i, it := range items {
			results[i].Err = fmt.Errorf("message %s: %w in %s", it.ID, backend.ErrNotFound, q)
		}
		return results, nil
	}
	for i, it := range items {
		t, ok := tags[it.ID]
		if !ok {
			results[i].Err = fmt.Errorf("message %s: %w in %s", it.ID, backend.ErrNotFound, q)
			continue
		}
		if err := ch.Ack(t, false); err != nil {
			ch.Close()
			return nil, q.wrap(ctx, "ack "+it.ID, err)
		}
	}
	if err := ch.Close(); err != nil {
		return nil, q.wrap(ctx, "ack on the DLQ (channel close)", err)
	}
	for i := range results {
		if results[i].Err == nil {
			results[i].Removed = true
		}
	}
	return results, nil
}
