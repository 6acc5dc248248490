package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backend"
)

// Reading a stream queue. A stream keeps its messages: a consumer names
// the offset it starts from (x-stream-offset: first, last, next, an
// offset), each delivery carries its offset (x-stream-offset header), an
// ack only gives the consumer credit for more, and nothing counts
// deliveries. What AMQP 0-9-1 does not say is where a stream ends: a
// consumer that has read everything just waits, and the queue's
// declare-ok count comes from statistics that lag by seconds. So a read
// first asks for the stream's last chunk (x-stream-offset: last), whose
// first message's offset it learns at once, then reads from where it
// starts until it has passed that offset and the rest of that chunk —
// which the broker sends in the same burst — has come (tailIdle).

const (
	// streamPrefetch is a stream read's credit: a stream consumer must
	// have one, and credit goes back with each ack.
	streamPrefetch = 2000
	// tailIdle is how long a read waits, once past the last chunk's first
	// offset, for the rest of that chunk.
	tailIdle = 150 * time.Millisecond
	// ackEvery acks (multiple) after this many deliveries, well inside
	// the credit.
	ackEvery = streamPrefetch / 4
	// emptyProbe is how long a probe of a stream's first or last chunk
	// waits before it asks the broker whether the stream holds anything:
	// a message, when there is one, comes within milliseconds.
	emptyProbe = 300 * time.Millisecond
)

// hStreamOffset is the header a stream delivery carries its offset in.
const hStreamOffset = "x-stream-offset"

// streamOffset is d's offset in its stream; false when it has none.
func streamOffset(d *amqp.Delivery) (int64, bool) {
	return toInt(d.Headers[hStreamOffset])
}

// streamStart is where a stream read begins: an offset, the first
// message the stream still holds, or the first chunk written at or after
// a time.
type streamStart struct {
	first  bool
	offset int64
	at     time.Time
}

func fromFirst() streamStart         { return streamStart{first: true} }
func fromOffset(o int64) streamStart { return streamStart{offset: max(o, 0)} }

func (s streamStart) arg() any {
	switch {
	case s.first:
		return "first"
	case !s.at.IsZero():
		return s.at
	}
	return s.offset
}

// lastChunk is the offset of the first message of the stream's last
// chunk: every message the stream holds is at an offset below it or in
// that chunk. ok is false for an empty stream.
func (q *Queue) lastChunk(ctx context.Context, ch *amqp.Channel, name string) (int64, bool, error) {
	return q.probeChunk(ctx, ch, name, "last")
}

// probeChunk is the offset of the first message a consumer of name
// starting at spec ("first", "last") gets; ok is false when the stream is
// empty: nothing came within emptyProbe and the broker counts no message
// (its count lags by seconds, so while it says there are some, the probe
// waits on, up to the timeout).
func (q *Queue) probeChunk(ctx context.Context, ch *amqp.Channel, name, spec string) (off int64, ok bool, err error) {
	tag := "dlqctl-" + spec + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := ch.Qos(1, 0, false); err != nil {
		return 0, false, q.wrap(ctx, "set QoS on "+name, err)
	}
	ds, err := ch.Consume(name, tag, false, false, false, false, amqp.Table{hStreamOffset: spec})
	if err != nil {
		return 0, false, q.wrap(ctx, "read the "+spec+" offset of the stream "+name, err)
	}
	defer cancelConsumer(ch, tag, ds)
	timer := time.NewTimer(emptyProbe)
	defer timer.Stop()
	deadline := time.Now().Add(q.src.timeout)
	for {
		select {
		case d, open := <-ds:
			if !open {
				return 0, false, q.wrap(ctx, "read the "+spec+" offset of the stream "+name, amqp.ErrClosed)
			}
			o, ok := streamOffset(&d)
			if !ok {
				return 0, false, fmt.Errorf("%s: %s: a delivery without %s: is it a stream?", q, name, hStreamOffset)
			}
			return o, true, nil
		case <-timer.C:
			st, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
			if err != nil {
				return 0, false, q.wrap(ctx, "declare "+name+" passively", err)
			}
			if st.Messages == 0 {
				return 0, false, nil
			}
			if time.Now().After(deadline) {
				return 0, false, fmt.Errorf("%s: the stream %s counts %d messages, but none came to a reader within %s", q, name, st.Messages, q.src.timeout)
			}
			timer.Reset(emptyProbe)
		case <-ctx.Done():
			return 0, false, q.wrap(ctx, "read the "+spec+" offset of the stream "+name, ctx.Err())
		}
	}
}

// cancelConsumer cancels tag and drains what it had received, so that the
// channel can carry another consumer.
func cancelConsumer(ch *amqp.Channel, tag string, ds <-chan amqp.Delivery) {
	if ch.Cancel(tag, false) != nil {
		return
	}
	for range ds {
	}
}

// readStream reads the stream queue name from start to its end as it was
// when the read began, calling fn with each message's offset; fn may
// return backend.ErrStop. It returns the offset of the last message the
// stream held (-1 for an empty one).
func (q *Queue) readStream(ctx context.Context, name string, start streamStart, fn func(off int64, d *amqp.Delivery) error) (int64, error) {
	ch, err := q.channel(ctx)
	if err != nil {
		return -1, err
	}
	defer ch.Close()
	last, ok, err := q.lastChunk(ctx, ch, name)
	if err != nil || !ok {
		return -1, err
	}
	if err := ch.Qos(streamPrefetch, 0, false); err != nil {
		return -1, q.wrap(ctx, "set QoS on "+name, err)
	}
	tag := "dlqctl-read-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ds, err := ch.Consume(name, tag, false, false, false, false, amqp.Table{hStreamOffset: start.arg()})
	if err != nil {
		return -1, q.wrap(ctx, "read the stream "+name, err)
	}
	end := last
	// Started past the last chunk's first message, only the rest of that
	// chunk can come. From a time, what comes comes at once, if anything
	// (a read that ends early only finds less).
	passed := !start.at.IsZero() || (!start.first && start.offset > last)
	wait := func() time.Duration {
		if passed {
			return tailIdle
		}
		return q.src.timeout
	}
	timer := time.NewTimer(wait())
	defer timer.Stop()
	unacked := 0
	for {
		select {
		case d, open := <-ds:
			if !open {
				return -1, q.wrap(ctx, "read the stream "+name, amqp.ErrClosed)
			}
			off, ok := streamOffset(&d)
			if !ok {
				return -1, fmt.Errorf("%s: %s: a delivery without %s: is it a stream?", q, name, hStreamOffset)
			}
			if unacked++; unacked >= ackEvery {
				if err := d.Ack(true); err != nil {
					return -1, q.wrap(ctx, "read the stream "+name, err)
				}
				unacked = 0
			}
			end = max(end, off)
			if err := fn(off, &d); err != nil {
				if errors.Is(err, backend.ErrStop) {
					return end, nil
				}
				return -1, err
			}
			passed = passed || off >= last
			restart(timer, wait())
		case <-timer.C:
			if passed {
				return end, nil
			}
			return -1, fmt.Errorf("%s: read the stream %s: nothing came for %s before offset %d (its last chunk's start)", q, name, q.src.timeout, last)
		case <-ctx.Done():
			return -1, q.wrap(ctx, "read the stream "+name, ctx.Err())
		}
	}
}
