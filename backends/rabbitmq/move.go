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

// holding is what a Publish read, for the Remove that follows. On a
// classic or quorum DLQ it is the consume channel, left open with the
// planned deliveries unacknowledged, by entry id, until Remove acks them
// and closes it (every other message read on it goes back then), and the
// copies the read met that the removal record hides (acked again with
// them). On a stream DLQ it is each entry's content, for its record.
type holding struct {
	ch *amqp.Channel
	// order is every delivery tag the read received on ch, in order
	// (ackPlan).
	order  []uint64
	tags   map[string]uint64
	hidden []heldCopy
	bases  map[string]base
}

// heldCopy is a delivery the removal record hides, and its content.
type heldCopy struct {
	tag uint64
	b   base
}

// close gives back what h holds.
func (h *holding) close() {
	if h != nil && h.ch != nil {
		h.ch.Close()
	}
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

var _ backend.ChunkSizer = (*Queue)(nil)

// UnlimitedChunk: an unthrottled redrive moves 2,048 entries per call. A
// chunk costs a read from the DLQ's head (a channel, a consumer, a window),
// a record page and its confirm, a channel close for the acks and the
// journal's syncs, whatever its size; the publishes and their confirms
// are pipelined. 2,048 entries fill one record page.
func (q *Queue) UnlimitedChunk() int { return pageEntries }

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
	h.close()
}

// take reads the DLQ from its head (a stream DLQ: from the lowest offset
// wanted) until every id in want has come, or the DLQ has no more, and
// returns their deliveries and what the read holds (see holding): on a
// classic or quorum DLQ the caller acks what it moved and closes h.ch.
func (q *Queue) take(ctx context.Context, want map[string]bool) (map[string]*amqp.Delivery, *holding, error) {
	got := map[string]*amqp.Delivery{}
	h := &holding{tags: map[string]uint64{}, bases: map[string]base{}}
	o := passOpts{window: len(want) + 16, keep: func(ch *amqp.Channel) { h.ch = ch }}
	o.hidden = func(d *amqp.Delivery, b base) {
		h.order = append(h.order, d.DeliveryTag)
		h.hidden = append(h.hidden, heldCopy{d.DeliveryTag, b})
	}
	stream, err := q.streamShaped(ctx)
	if err != nil {
		return nil, nil, err
	}
	if stream {
		o.from = lowestOffset(want)
	}
	err = q.each(ctx, o, func(id string, d *amqp.Delivery) error {
		h.order = append(h.order, d.DeliveryTag)
		if want[id] {
			dd := *d
			got[id] = &dd
			if len(got) == len(want) {
				return backend.ErrStop
			}
		}
		return nil
	})
	if errors.Is(err, errNoQueue) {
		return got, h, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return got, h, nil
}

// lowestOffset is the lowest of ids read as stream offsets (0 when none
// reads as one).
func lowestOffset(ids map[string]bool) int64 {
	low := int64(-1)
	for id := range ids {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil && n >= 0 && (low < 0 || n < low) {
			low = n
		}
	}
	return max(low, 0)
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
	if err := q.prepareRemovals(ctx); err != nil {
		return nil, err
	}
	results := make([]backend.MoveResult, len(items))
	want := map[string]bool{}
	for _, it := range items {
		want[it.ID] = true
	}
	got, hold, err := q.take(ctx, want)
	if err != nil {
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			hold.close()
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
		hold.bases[it.ID] = contentOf(q, d)
		results[i].DestID = destID(d, it)
		inflight = append(inflight, sentItem{i, dc})
	}
	if err := q.awaitConfirms(ctx, pub, inflight, items, results); err != nil {
		return nil, err
	}
	// A return comes before its confirm, so every return is in the
	// buffer once every confirm has come.
	if !takeReturns(returns, items, results) {
		return nil, q.wrap(ctx, "read the broker's returns", errConfirmsLost)
	}
	for i, it := range items {
		if results[i].Err != nil {
			delete(hold.tags, it.ID)
			delete(hold.bases, it.ID)
		}
	}
	keep = true
	q.mu.Lock()
	q.held = hold
	q.mu.Unlock()
	return results, nil
}

// contentOf is d's content identity (the hash part of its entry id).
func contentOf(q *Queue, d *amqp.Delivery) base {
	b, _, _ := splitID(identity(fromDelivery(d), q.dec.carriedFingerprint(d.Headers), lastDeath(d.Headers)))
	return b
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

// errConfirmsLost: the publish channel closed (a lost connection, a
// broker going down) before every confirm came. The client then resolves
// the pending confirms as nacks, which are no refusal: the broker may
// have taken any of those messages.
var errConfirmsLost = errors.New("the publish channel closed before the broker confirmed every message: the outcome of this chunk's publishes is unknown")

// awaitConfirms waits for each publish's confirm, in order; a nack is
// that item's error. A confirm resolved by the channel's shutdown is an
// unknown outcome, for the whole chunk: an error.
func (q *Queue) awaitConfirms(ctx context.Context, pub *amqp.Channel, inflight []sentItem, items []backend.MoveItem, results []backend.MoveResult) error {
	for _, s := range inflight {
		ok, err := s.dc.WaitContext(ctx)
		if err != nil {
			return q.wrap(ctx, "wait for the broker's confirm", err)
		}
		if !ok {
			if pub.IsClosed() {
				return q.wrap(ctx, "wait for the broker's confirm", errConfirmsLost)
			}
			results[s.i].Err = fmt.Errorf("move %s: the broker refused the message (nack) for %s", items[s.i].ID, items[s.i].Dest)
			results[s.i].DestID = ""
		}
	}
	// A nack that came just before the channel closed reads like one the
	// shutdown made up: count them all unknown.
	if pub.IsClosed() {
		for _, s := range inflight {
			if results[s.i].Err != nil {
				return q.wrap(ctx, "wait for the broker's confirm", errConfirmsLost)
			}
		}
	}
	return nil
}

// takeReturns makes each message the broker returned (unroutable) its
// item's error; it takes what returns holds now. It reports false when
// returns was closed (the channel shut down): what it held is read, and
// whatever was on its way is lost.
func takeReturns(returns <-chan amqp.Return, items []backend.MoveItem, results []backend.MoveResult) bool {
	for {
		select {
		case r, open := <-returns:
			if !open {
				return false
			}
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
			return true
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

// Remove removes each item's DLQ message: it records the removal (and
// waits for the broker's confirm), then, on a classic or quorum DLQ, acks
// the message on the channel its Publish kept when there is one, else
// after reading the DLQ up to it. A message the record hides that the
// read met is acked again with them (a broker crash brought it back). The
// channel is closed after the acks, which is how dlqctl knows the broker
// has them (an ack has no answer; the close does, after everything sent
// before it). On a stream DLQ the record is the removal.
func (q *Queue) Remove(ctx context.Context, items []backend.MoveItem) ([]backend.MoveResult, error) {
	if err := q.prepareRemovals(ctx); err != nil {
		return nil, err
	}
	results := make([]backend.MoveResult, len(items))
	h, err := q.holdFor(ctx, items)
	if err != nil {
		return nil, err
	}
	es, hidden := q.removalEntries(items, h)
	if err := q.writeRemovals(ctx, q.runID, es); err != nil {
		h.close()
		return nil, err
	}
	if h.ch != nil {
		// The planned messages and the copies that came back again.
		ack := make(map[uint64]bool, len(items)+len(hidden))
		for _, it := range items {
			if t, ok := h.tags[it.ID]; ok {
				ack[t] = true
			}
		}
		for _, c := range hidden {
			ack[c.tag] = true
		}
		if err := ackAll(h.ch, h.order, ack); err != nil {
			h.close()
			return nil, q.wrap(ctx, "ack on the DLQ", err)
		}
		if err := h.ch.Close(); err != nil {
			return nil, q.wrap(ctx, "ack on the DLQ (channel close)", err)
		}
		q.noteRemoved(es, len(hidden))
	}
	for i, it := range items {
		if _, ok := h.tags[it.ID]; ok {
			results[i].Removed = true
		} else {
			results[i].Err = fmt.Errorf("message %s: %w in %s", it.ID, backend.ErrNotFound, q)
		}
	}
	return results, nil
}

// holdFor is what Publish held for items, or, when it holds less than all
// of them (a resume, a resolve), a fresh read of the DLQ up to them.
func (q *Queue) holdFor(ctx context.Context, items []backend.MoveItem) (*holding, error) {
	q.mu.Lock()
	h := q.held
	q.held = nil
	q.mu.Unlock()
	if h != nil {
		all := true
		for _, it := range items {
			_, ok := h.tags[it.ID]
			all = all && ok
		}
		if all {
			return h, nil
		}
		h.close()
	}
	want := map[string]bool{}
	for _, it := range items {
		want[it.ID] = true
	}
	got, h, err := q.take(ctx, want)
	if err != nil {
		return nil, err
	}
	for id, d := range got {
		h.tags[id] = d.DeliveryTag
		h.bases[id] = contentOf(q, d)
	}
	return h, nil
}

// removalEntries are the record entries for removing items (those h
// holds) and the hidden copies h met, which are acked again: on a stream
// DLQ each entry's content and offset; on a classic or quorum DLQ each
// one's content, the copies of it in the DLQ before the removal, and its
// rank.
func (q *Queue) removalEntries(items []backend.MoveItem, h *holding) ([]removal, []heldCopy) {
	var es []removal
	if h.ch == nil {
		for _, it := range items {
			if b, ok := h.bases[it.ID]; ok {
				off, _ := strconv.ParseInt(it.ID, 10, 64)
				es = append(es, removal{b: b, n: off})
			}
		}
		return es, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	left := map[base]int64{}
	copies := func(b base) int64 {
		if n, ok := left[b]; ok {
			return n
		}
		n := q.dups[b]
		return max(n, 1)
	}
	for _, it := range items {
		if _, ok := h.tags[it.ID]; !ok {
			continue
		}
		b, rank, ok := splitID(it.ID)
		if !ok {
			b, rank = h.bases[it.ID], 1
		}
		n := copies(b)
		es = append(es, removal{b: b, n: n, rank: rank})
		left[b] = max(n-1, 0)
	}
	set := q.rec.set
	for _, c := range h.hidden {
		rank := int64(1)
		if set != nil && set.bases[c.b] != nil {
			rank = hiddenRank(set.bases[c.b], set.epoch)
		}
		n := copies(c.b)
		es = append(es, removal{b: c.b, n: n, rank: rank})
		left[c.b] = max(n-1, 0)
	}
	return es, h.hidden
}

// noteRemoved counts the removals es (and the hidden copies acked again)
// out of what the last whole read learnt.
func (q *Queue) noteRemoved(es []removal, reacked int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range es {
		if n, ok := q.dups[e.b]; ok {
			if n <= 2 {
				delete(q.dups, e.b)
			} else {
				q.dups[e.b] = n - 1
			}
		}
	}
	q.hiddenSeen = max(q.hiddenSeen-int64(reacked), 0)
}

// prepareRemovals readies what a removal needs before the read that
// finds its messages: the record's writer (which may read the whole DLQ
// once, after a broker restart) and, on a classic or quorum DLQ, the
// number of copies of each content (one whole read per process; an
// apply's staleness check has done it).
func (q *Queue) prepareRemovals(ctx context.Context) error {
	if _, err := q.writer(ctx); err != nil {
		return err
	}
	stream, err := q.streamShaped(ctx)
	if err != nil || stream {
		return err
	}
	q.mu.Lock()
	known := q.dups != nil
	q.mu.Unlock()
	if known || q.missing {
		return nil
	}
	return q.each(ctx, passOpts{}, func(string, *amqp.Delivery) error { return nil })
}
