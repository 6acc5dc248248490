package rabbitmq

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// record is this Queue's view of the removal record (record.go).
type record struct {
	mu     sync.Mutex
	loaded bool
	set    *removedSet
	// forged counts messages in the record that dlqctl did not write (no
	// valid MAC): they count for nothing.
	forged int
	// w writes the record; set once this process, holding the lease,
	// removes something.
	w *recordWriter
}

// bookName is the name of one of dlqctl's queues for this DLQ:
// prefix + the DLQ's name, or a hash of it where that would come near
// AMQP's 255 bytes.
func (q *Queue) bookName(prefix string) string { return bookNameOf(prefix, q.src.queue) }

// bookNameOf is bookName for the DLQ queue.
func bookNameOf(prefix, queue string) string {
	if n := prefix + queue; len(n) <= 240 {
		return n
	}
	sum := sha256.Sum256([]byte(queue))
	return prefix + "h-" + hex.EncodeToString(sum[:12])
}

// recordQueue holds the record's pages; keyQueue its key.
func (q *Queue) recordQueue() string { return q.bookName("dlqctl.removed.") }
func (q *Queue) keyQueue() string    { return q.recordQueue() + ".key" }

// recordDLQ is what a record page's MAC binds it to.
func (q *Queue) recordDLQ() string { return q.src.vhost + "/" + q.src.queue }

// recordShape is how the record names this DLQ's entries.
func (q *Queue) recordShape(ctx context.Context) (string, error) {
	sh, err := q.shapeOf(ctx)
	if err != nil {
		return "", err
	}
	if sh.Type == "stream" {
		return shapeStream, nil
	}
	return shapeQueue, nil
}

// readBook reads every message of one of dlqctl's classic queues and
// gives each to fn. Reading takes the messages (until the channel closes
// or they are acked), so a read waits for other readers to finish first,
// and reads again when another one started meanwhile. With keep the
// channel is returned with the messages unacknowledged (the caller closes
// it); a queue that does not exist wraps errNoQueue.
func (q *Queue) readBook(ctx context.Context, name string, keep bool, fn func(d *amqp.Delivery)) (*amqp.Channel, error) {
	deadline := time.Now().Add(q.othersWait())
	for {
		ch, again, err := q.readBookOnce(ctx, name, fn, deadline)
		if err != nil || !again {
			if ch != nil && (!keep || err != nil) {
				ch.Close()
				ch = nil
			}
			return ch, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: %s is being read by other consumers all along: dlqctl could not read it alone", q, name)
		}
		if err := sleepCtx(ctx, time.Duration(20+mrand.IntN(80))*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// readBookOnce is one attempt of readBook; again says that another
// consumer read at the same time, so what fn got may be short.
func (q *Queue) readBookOnce(ctx context.Context, name string, fn func(d *amqp.Delivery), deadline time.Time) (*amqp.Channel, bool, error) {
	ch, err := q.channel(ctx)
	if err != nil {
		return nil, false, err
	}
	st, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return nil, false, fmt.Errorf("%s: the queue %q %w", q, name, errNoQueue)
		}
		return nil, false, q.wrap(ctx, "declare "+name+" passively", err)
	}
	if st.Consumers > 0 {
		ch.Close()
		return nil, time.Now().Before(deadline), nil
	}
	if st.Messages == 0 {
		return ch, false, nil
	}
	if err := ch.Qos(0, 0, false); err != nil {
		ch.Close()
		return nil, false, q.wrap(ctx, "set QoS", err)
	}
	ds, err := ch.Consume(name, "", false, false, false, false, nil)
	if err != nil {
		ch.Close()
		return nil, false, q.wrap(ctx, "read "+name, err)
	}
	var batch []amqp.Delivery
	timer := time.NewTimer(idleWait)
	defer timer.Stop()
	for len(batch) < st.Messages {
		select {
		case d, open := <-ds:
			if !open {
				return nil, false, q.wrap(ctx, "read "+name, amqp.ErrClosed)
			}
			batch = append(batch, d)
			restart(timer, idleWait)
		case <-timer.C:
			// Fewer came than the queue held: another reader has the rest.
			ch.Close()
			return nil, true, nil
		case <-ctx.Done():
			ch.Close()
			return nil, false, q.wrap(ctx, "read "+name, ctx.Err())
		}
	}
	after, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
	if err != nil {
		return nil, false, q.wrap(ctx, "declare "+name+" passively", err)
	}
	if after.Consumers > 1 {
		ch.Close()
		return nil, true, nil
	}
	for i := range batch {
		fn(&batch[i])
	}
	return ch, false, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readKey is the record's key, nil when there is none: the key queue
// does not exist (dlqctl never wrote one), or it is empty (a run stopped
// between declaring it and writing the key; or it was purged, which
// readRecord refuses when there are pages the key should check).
func (q *Queue) readKey(ctx context.Context) (key []byte, exists bool, err error) {
	_, err = q.readBook(ctx, q.keyQueue(), false, func(d *amqp.Delivery) {
		if key == nil && len(d.Body) == keyLen {
			key = append([]byte(nil), d.Body...)
		}
	})
	if errors.Is(err, errNoQueue) {
		return nil, false, nil
	}
	return key, err == nil, err
}

// readRecord reads the record: what counts as removed for a DLQ of the
// given shape (with, on a classic or quorum DLQ, the broker epoch), how
// many of its messages dlqctl did not write, and how many messages it
// holds.
func (q *Queue) readRecord(ctx context.Context, shape string) (set *removedSet, forged, pages int, err error) {
	set = newRemovedSet(shape)
	key, keyQueue, err := q.readKey(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	dlq := q.recordDLQ()
	_, err = q.readBook(ctx, q.recordQueue(), false, func(d *amqp.Delivery) {
		pages++
		p, err := decodePage(d, key, dlq)
		switch {
		case err != nil:
			forged++
		case p.shape == shape:
			set.add(p.epoch, p.entries)
		}
	})
	if errors.Is(err, errNoQueue) {
		return set, 0, 0, nil
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s: read dlqctl's record of removals (%s): %w", q, q.recordQueue(), err)
	}
	if key == nil && keyQueue && pages > 0 {
		// Pages are written only once the key is in: it was purged.
		return nil, 0, 0, fmt.Errorf("%s: %s holds no key, but %s holds %d pages: dlqctl cannot tell its record of removals from messages anyone published, so it does not read the DLQ "+
			"(delete both queues to start the record afresh: removed entries that a broker crash brought back would then read as entries again)", q, q.keyQueue(), q.recordQueue(), pages)
	}
	if shape == shapeQueue && set.size() > 0 {
		if set.epoch, _, err = q.readEpoch(ctx, key); err != nil {
			return nil, 0, 0, err
		}
	}
	return set, forged, pages, nil
}

// removedView loads the record (once; again on every call from a process
// that does not write it, so that a long-running reader sees what a run
// removes meanwhile) and returns what counts as removed.
func (q *Queue) removedView(ctx context.Context) (*removedSet, error) {
	q.rec.mu.Lock()
	defer q.rec.mu.Unlock()
	if q.rec.loaded && q.rec.w != nil {
		return q.rec.set, nil
	}
	shape, err := q.recordShape(ctx)
	if err != nil {
		return nil, err
	}
	set, forged, _, err := q.readRecord(ctx, shape)
	if err != nil {
		return nil, err
	}
	q.rec.set, q.rec.forged, q.rec.loaded = set, forged, true
	return set, nil
}

// recordWriter appends pages to the record.
type recordWriter struct {
	conn  *amqp.Connection // the epoch was read on it
	ch    *amqp.Channel    // confirm mode
	key   []byte
	shape string
	epoch string
}

// writeRemovals records es, written as removed by run, and returns once
// the broker has confirmed them: only then may they be acked. Called
// under the DLQ's lease, by one goroutine at a time.
func (q *Queue) writeRemovals(ctx context.Context, run string, es []removal) error {
	if len(es) == 0 {
		return nil
	}
	w, err := q.writer(ctx)
	if err != nil {
		return err
	}
	for len(es) > 0 {
		n := min(len(es), pageEntries)
		p := page{run: run, epoch: w.epoch, shape: w.shape, entries: es[:n]}
		if err := q.publishConfirmed(ctx, w.ch, q.recordQueue(), p.encode(w.key, q.recordDLQ())); err != nil {
			q.rec.mu.Lock()
			q.rec.w = nil // taken afresh, from what the broker holds
			q.rec.mu.Unlock()
			w.ch.Close()
			return fmt.Errorf("%s: record the removals in %s before acking them: %w", q, q.recordQueue(), err)
		}
		q.rec.mu.Lock()
		q.rec.set.add(w.epoch, es[:n])
		q.rec.mu.Unlock()
		es = es[n:]
	}
	return nil
}

// publishConfirmed publishes m to queue (default exchange, mandatory) on
// ch, in confirm mode, and waits for the broker's confirm.
func (q *Queue) publishConfirmed(ctx context.Context, ch *amqp.Channel, queue string, m amqp.Publishing) error {
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, m)
	if err != nil {
		return err
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("the broker did not confirm the message (nack, or the channel closed)")
	}
	return nil
}

// writer is the record's writer for this process, taken on the first
// write and again after the connection was lost (the broker may have
// restarted: a new epoch).
func (q *Queue) writer(ctx context.Context) (*recordWriter, error) {
	conn, err := q.connection(ctx)
	if err != nil {
		return nil, err
	}
	q.rec.mu.Lock()
	w := q.rec.w
	q.rec.mu.Unlock()
	if w != nil && w.conn == conn && !w.ch.IsClosed() {
		return w, nil
	}
	if w != nil {
		w.ch.Close()
	}
	if w, err = q.startWriter(ctx, conn); err != nil {
		return nil, err
	}
	q.rec.mu.Lock()
	q.rec.w = w
	q.rec.mu.Unlock()
	return w, nil
}

// startWriter makes sure the record has a key, learns the broker's
// epoch, reads the record afresh, drops what is provably no longer
// needed (writing what stays as new pages when anything went), and
// returns a writer.
func (q *Queue) startWriter(ctx context.Context, conn *amqp.Connection) (*recordWriter, error) {
	shape, err := q.recordShape(ctx)
	if err != nil {
		return nil, err
	}
	w := &recordWriter{conn: conn, shape: shape}
	if w.ch, err = q.channel(ctx); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			w.ch.Close()
		}
	}()
	if err := w.ch.Confirm(false); err != nil {
		return nil, q.wrap(ctx, "record channel: confirm mode", err)
	}
	if _, err := w.ch.QueueDeclare(q.recordQueue(), true, false, false, false, nil); err != nil {
		return nil, q.wrap(ctx, "declare "+q.recordQueue(), err)
	}
	if w.key, err = q.ensureKey(ctx, w.ch); err != nil {
		return nil, err
	}
	if shape == shapeQueue {
		if w.epoch, err = q.currentEpoch(ctx, w.key); err != nil {
			return nil, err
		}
	}
	set, forged, pages, err := q.readRecord(ctx, shape)
	if err != nil {
		return nil, err
	}
	set.epoch = w.epoch
	dropped, err := q.dropGone(ctx, set, w.epoch)
	if err != nil {
		return nil, err
	}
	if dropped > 0 || forged > 0 || pages > 2*len(set.pages())+16 {
		if err := q.rewriteRecord(ctx, w, set); err != nil {
			return nil, err
		}
	}
	q.rec.mu.Lock()
	q.rec.set, q.rec.forged, q.rec.loaded = set, 0, true
	q.rec.mu.Unlock()
	ok = true
	return w, nil
}

// hRecBatch marks the pages one rewrite of the record wrote.
const hRecBatch = "dlqctl-rewrite"

// rewriteRecord replaces the record's pages by set's: it writes set as
// new pages first (the record then holds both, which reads the same),
// then acks every other message of the record — those of earlier writes,
// and any that dlqctl did not write. The old pages are held only for that
// moment; a reader that started meanwhile reads again.
func (q *Queue) rewriteRecord(ctx context.Context, w *recordWriter, set *removedSet) error {
	raw := make([]byte, 8)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	batch := hex.EncodeToString(raw)
	for _, p := range set.pages() {
		m := p.encode(w.key, q.recordDLQ())
		m.Headers[hRecBatch] = batch
		if err := q.publishConfirmed(ctx, w.ch, q.recordQueue(), m); err != nil {
			return fmt.Errorf("%s: rewrite the record of removals in %s: %w", q, q.recordQueue(), err)
		}
	}
	var old []uint64
	ch, err := q.readBook(ctx, q.recordQueue(), true, func(d *amqp.Delivery) {
		if b, _ := d.Headers[hRecBatch].(string); b != batch {
			old = append(old, d.DeliveryTag)
		}
	})
	if err != nil {
		return err
	}
	defer ch.Close()
	for _, t := range old {
		if err := ch.Ack(t, false); err != nil {
			return q.wrap(ctx, "drop old pages of "+q.recordQueue(), err)
		}
	}
	return nil
}

// ensureKey is the record's key, written first when there is none. The
// key queue takes one message and refuses any other (reject-publish), so
// once dlqctl's key is in, nobody can publish another; a key that some
// other publisher got in first is refused loudly.
func (q *Queue) ensureKey(ctx context.Context, ch *amqp.Channel) ([]byte, error) {
	name := q.keyQueue()
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"}); err != nil {
		return nil, q.wrap(ctx, "declare "+name, err)
	}
	var key []byte
	if _, err := q.readBook(ctx, name, false, func(d *amqp.Delivery) {
		if key == nil && len(d.Body) == keyLen {
			key = append([]byte(nil), d.Body...)
		}
	}); err != nil {
		return nil, err
	}
	if key != nil {
		return key, nil
	}
	// Pages without a key: it was purged (pages are written only once it
	// is in); a new key would make them count for nothing, silently.
	if st, err := q.inspectQueue(ctx, q.recordQueue()); err == nil && st.Messages > 0 {
		return nil, fmt.Errorf("%s: %s holds no key, but %s holds %d pages: dlqctl does not write a new key over them "+
			"(delete both queues to start the record afresh: removed entries that a broker crash brought back would then read as entries again)", q, name, q.recordQueue(), st.Messages)
	}
	key = make([]byte, keyLen)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := q.publishConfirmed(ctx, ch, name, amqp.Publishing{Body: key, DeliveryMode: amqp.Persistent}); err != nil {
		return nil, fmt.Errorf("%s: write the record's key to %s (does another message fill it? delete the queue): %w", q, name, err)
	}
	back, _, err := q.readKey(ctx)
	if err != nil {
		return nil, err
	}
	if string(back) != string(key) {
		return nil, fmt.Errorf("%s: %s holds a key dlqctl did not write: something else publishes to it; dlqctl records no removal there (delete the queue and find the publisher)", q, name)
	}
	return key, nil
}

// dropGone removes from set what no read can need any more, and says how
// many entries it removed. Stream shape: offsets the DLQ stream no longer
// holds (its retention dropped them). Queue shape: contents of which no
// copy is left in the DLQ, when every entry of theirs was written before
// the broker's current epoch (a restart since has shown the acks written).
func (q *Queue) dropGone(ctx context.Context, set *removedSet, epoch string) (int, error) {
	dropped := 0
	if set.shape == shapeStream {
		if len(set.offsets) == 0 {
			return 0, nil
		}
		first, ok, err := q.firstOffset(ctx)
		if err != nil {
			return 0, err
		}
		for off := range set.offsets {
			if !ok || off < first {
				delete(set.offsets, off)
				dropped++
			}
		}
		return dropped, nil
	}
	stale := map[base]bool{}
	for b, br := range set.bases {
		old := true
		for _, ep := range br.ranks {
			old = old && ep != epoch
		}
		if old {
			stale[b] = true
		}
	}
	if len(stale) == 0 {
		return 0, nil
	}
	counts, err := q.copyCounts(ctx, stale)
	if err != nil {
		return 0, err
	}
	for b := range stale {
		if counts[b] == 0 {
			dropped += len(set.bases[b].ranks)
			delete(set.bases, b)
		}
	}
	return dropped, nil
}

// recordNote names the record's queues, for doctor.
func (q *Queue) recordNote() string {
	return q.recordQueue() + " (key in " + q.keyQueue() + ", epoch in " + q.epochQueue() + ")"
}
