package pulsardlq

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/pulsar-client-go/pulsar"
)

// The removal record. A broker confirms an acknowledgement once it has
// moved the subscription's cursor in memory, and writes the cursor to its
// store later (at most once a second, and on a flush every minute). A
// broker that crashes in between forgets the acknowledgements: the entries
// come back to the DLQ subscription although a redrive put them back on
// their origin and journaled them as removed, and a new plan would move
// them a second time.
//
// So dlqctl keeps its own record of what it acknowledged, on a topic
// beside the DLQ (TOPIC-dlqctl-removed): before it acknowledges entries it
// sends their locators there and waits until the broker has stored them,
// which for a message, unlike for a cursor, means written to the
// bookies' journals. Every read treats an entry the record holds as
// acknowledged, whatever the cursor says; such entries are counted as
// "came back", said in stats and plan, and acknowledged again by the next
// removal (a redrive or resolve apply, which holds the lease).

// removedSuffix names the record topic: TOPIC-dlqctl-removed.
const removedSuffix = "-dlqctl-removed"

// removedTopic is where the removal record lives.
func (t *Topic) removedTopic() topicName {
	r := wholeTopic(t.topic)
	r.local += removedSuffix
	return r
}

// removals is the record as read, by partition index (-1: not
// partitioned), with what this process added since.
type removals struct {
	// load serializes the first read; loaded says it succeeded (a failed
	// read is tried again by the next caller, as a broker may be back).
	load   sync.Mutex
	loaded bool
	mu     sync.Mutex
	at     map[int32]map[position]bool
	// producer writes the record; made on the first removal.
	producer pulsar.Producer
}

// loadRemovals reads the record once per process.
func (t *Topic) loadRemovals(ctx context.Context) error {
	t.removed.load.Lock()
	defer t.removed.load.Unlock()
	if t.removed.loaded {
		return nil
	}
	t.removed.mu.Lock()
	t.removed.at = map[int32]map[position]bool{}
	t.removed.mu.Unlock()
	if err := t.readRemovals(ctx); err != nil {
		return err
	}
	t.removed.loaded = true
	return nil
}

func (t *Topic) readRemovals(ctx context.Context) error {
	rt := t.removedTopic()
	last, err := t.admin.lastMessageID(ctx, rt)
	if errors.Is(err, errAdminNotFound) {
		return nil // nothing was ever removed by dlqctl
	}
	if err != nil {
		return t.connErr(ctx, "last message id of "+rt.String(), err)
	}
	if last.EntryID < 0 {
		return nil
	}
	end := position{last.LedgerID, last.EntryID}
	r, err := withCtx(ctx, func() (pulsar.Reader, error) {
		return t.client.CreateReader(pulsar.ReaderOptions{
			Topic:                  rt.String(),
			StartMessageID:         pulsar.EarliestMessageID(),
			ReceiverQueueSize:      scanQueueSize,
			SubscriptionRolePrefix: "dlqctl-read",
		})
	}, pulsar.Reader.Close)
	if err != nil {
		return t.connErr(ctx, "open a reader on "+rt.String(), err)
	}
	defer r.Close()
	for {
		m, err := r.Next(ctx)
		if err != nil {
			return t.connErr(ctx, "read "+rt.String(), err)
		}
		if id, ok := parseMsgID(string(m.Payload())); ok {
			t.noteRemoved(id)
		}
		at := position{m.ID().LedgerID(), m.ID().EntryID()}
		if !at.less(end) && lastInEntry(m.ID()) {
			return nil
		}
	}
}

func (t *Topic) noteRemoved(id msgID) {
	t.removed.mu.Lock()
	defer t.removed.mu.Unlock()
	m := t.removed.at[id.partition]
	if m == nil {
		m = map[position]bool{}
		t.removed.at[id.partition] = m
	}
	m[id.position] = true
}

// backAgain lists the entries of partition index p that the record holds
// and the cursor c shows pending: acknowledgements a broker lost.
func (t *Topic) backAgain(p int32, c cursor) []position {
	t.removed.mu.Lock()
	defer t.removed.mu.Unlock()
	var out []position
	for pos := range t.removed.at[p] {
		if c.pending(pos) {
			out = append(out, pos)
		}
	}
	return out
}

// withRemovals is c with the record's entries of partition p counted as
// acknowledged.
func (t *Topic) withRemovals(p int32, c cursor) cursor {
	back := t.backAgain(p, c)
	if len(back) == 0 {
		return c
	}
	c.removed = make(map[position]bool, len(back))
	for _, pos := range back {
		c.removed[pos] = true
	}
	return c
}

// recordRemovals stores ids (entry locators) in the record and waits until
// the broker has them stored: only then may they be acknowledged.
func (t *Topic) recordRemovals(ctx context.Context, ids []msgID) error {
	if len(ids) == 0 {
		return nil
	}
	if err := t.loadRemovals(ctx); err != nil {
		return err
	}
	p, err := t.removalProducer(ctx)
	if err != nil {
		return err
	}
	errs := make(chan error, len(ids))
	for _, id := range ids {
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(id.String())}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			errs <- err
		})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		return t.connErr(ctx, "record the removal in "+t.removedTopic().String(), err)
	}
	for range ids {
		select {
		case err := <-errs:
			if err != nil {
				return t.connErr(ctx, "record the removal in "+t.removedTopic().String(), err)
			}
		case <-ctx.Done():
			return t.connErr(ctx, "record the removal in "+t.removedTopic().String(), ctx.Err())
		}
	}
	for _, id := range ids {
		t.noteRemoved(id)
	}
	return nil
}

func (t *Topic) removalProducer(ctx context.Context) (pulsar.Producer, error) {
	t.removed.mu.Lock()
	defer t.removed.mu.Unlock()
	if t.removed.producer != nil {
		return t.removed.producer, nil
	}
	rt := t.removedTopic()
	p, err := withCtx(ctx, func() (pulsar.Producer, error) {
		return t.client.CreateProducer(pulsar.ProducerOptions{Topic: rt.String(), SendTimeout: t.sendTimeout})
	}, pulsar.Producer.Close)
	if err != nil {
		return nil, t.connErr(ctx, "create a producer on "+rt.String(), err)
	}
	t.removed.producer = p
	return p, nil
}

// reackCameBack acknowledges again, on partition p, the entries the record
// holds that a broker crash brought back, so that the subscription's own
// backlog (which applications may watch) is true again.
func (t *Topic) reackCameBack(ctx context.Context, p part, c cursor) error {
	for pos := range c.removed {
		if err := t.ack(ctx, msgID{position: pos, partition: p.index, batch: -1}); err != nil {
			return err
		}
	}
	return nil
}

// CameBack counts the entries dlqctl acknowledged that are pending on the
// DLQ subscription again (a broker crash lost the acknowledgements).
func (t *Topic) CameBack(ctx context.Context) (int, error) {
	parts, err := t.parts(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range parts {
		c, err := t.cursor(ctx, p)
		if err != nil {
			return 0, err
		}
		n += len(c.removed)
	}
	return n, nil
}

func cameBackNote(n int) string {
	return fmt.Sprintf("%d entries that dlqctl redrove or resolved came back to the DLQ subscription (a broker restart lost their acknowledgements): they are not counted, listed or planned, and the next apply that removes entries acknowledges them again", n)
}
