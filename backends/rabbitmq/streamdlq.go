package rabbitmq

import (
	"context"
	"strconv"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A stream DLQ (x-queue-type: stream; dlqctl dlq init makes one). The
// dead-letter exchange appends each dead letter; a read consumes by
// offset, which counts nothing, so every read is free and the entry id is
// the offset, stable whatever leaves before it. A stream cannot delete a
// message: what dlqctl redrove or resolved is in the removal record
// (record.go), and every read skips it. The stream's own retention
// (x-max-age, x-max-length-bytes, by argument or policy) is what finally
// drops messages, removed or not.

// streamPass reads a stream DLQ from o.from and calls fn for every entry
// the record does not hide, with its id (its offset).
func (q *Queue) streamPass(ctx context.Context, o passOpts, fn func(id string, d *amqp.Delivery) error) error {
	view, err := q.removedView(ctx)
	if err != nil {
		return err
	}
	hidden, full := int64(0), true
	_, err = q.readStream(ctx, q.src.queue, fromOffset(o.from), func(off int64, d *amqp.Delivery) error {
		if b, gone := view.offsets[off]; gone && b == contentOf(q, d) {
			hidden++
			return nil
		}
		err := fn(strconv.FormatInt(off, 10), d)
		full = full && err == nil
		return err
	})
	if err == nil && full && o.from == 0 {
		q.mu.Lock()
		q.hiddenSeen, q.unseen = hidden, 0
		q.mu.Unlock()
	}
	return err
}

// probeOffset is the offset of the first message a consumer starting at
// spec ("first" or "last") gets; ok is false for an empty stream.
func (q *Queue) probeOffset(ctx context.Context, spec string) (int64, bool, error) {
	ch, err := q.channel(ctx)
	if err != nil {
		return 0, false, err
	}
	defer ch.Close()
	if spec == "last" {
		return q.lastChunk(ctx, ch, q.src.queue)
	}
	return q.probeChunk(ctx, ch, q.src.queue, "first")
}

// firstOffset is the offset of the first message the DLQ stream still
// holds (ok false: none).
func (q *Queue) firstOffset(ctx context.Context) (int64, bool, error) {
	return q.probeOffset(ctx, "first")
}

// streamBounds are the first and the last offset the DLQ stream holds
// (ok false: none).
func (q *Queue) streamBounds(ctx context.Context) (first, last int64, ok bool, err error) {
	if first, ok, err = q.firstOffset(ctx); err != nil || !ok {
		return 0, 0, ok, err
	}
	last, ok, err = q.probeOffset(ctx, "last")
	if err != nil || !ok {
		return 0, 0, ok, err
	}
	// The last chunk may hold more than its first message: read it.
	end := last
	if _, err := q.readStream(ctx, q.src.queue, fromOffset(last), func(off int64, _ *amqp.Delivery) error {
		end = max(end, off)
		return nil
	}); err != nil {
		return 0, 0, false, err
	}
	return first, end, true, nil
}

// streamLen is the number of entries of the DLQ stream: the messages it
// holds less those the record says were removed.
func (q *Queue) streamLen(ctx context.Context) (n int64, last int64, err error) {
	view, err := q.removedView(ctx)
	if err != nil {
		return 0, -1, err
	}
	first, last, ok, err := q.streamBounds(ctx)
	if err != nil || !ok {
		return 0, -1, err
	}
	n = last - first + 1
	for off := range view.offsets {
		if off >= first && off <= last {
			n--
		}
	}
	return max(n, 0), last, nil
}
