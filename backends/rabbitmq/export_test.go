package rabbitmq

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backend"
)

// ForgedPages are what a producer that is not dlqctl could write into the
// removal record of the DLQ source to say that its entry id was removed:
// pages exactly as dlqctl writes them, written before a restart of the
// broker, but one without a MAC and one with a MAC under a key that is
// not the record's. It returns them with the record's queue. For the
// conformance suite's Forge hook.
func ForgedPages(ctx context.Context, source, id string) (string, []amqp.Publishing, error) {
	q, err := Open(ctx, source, Options{})
	if err != nil {
		return "", nil, err
	}
	defer q.Close()
	shape, err := q.recordShape(ctx)
	if err != nil {
		return "", nil, err
	}
	var e removal
	if shape == shapeStream {
		off, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return "", nil, fmt.Errorf("a stream entry's id is an offset: %q", id)
		}
		found := false
		if err := q.each(ctx, passOpts{from: off}, func(got string, d *amqp.Delivery) error {
			e, found = removal{b: contentOf(q, d), n: off}, got == id
			return backend.ErrStop
		}); err != nil {
			return "", nil, err
		}
		if !found {
			return "", nil, fmt.Errorf("no entry %s in %s", id, q)
		}
	} else {
		b, rank, ok := splitID(id)
		if !ok {
			return "", nil, fmt.Errorf("not an entry id of a queue: %q", id)
		}
		e = removal{b: b, n: rank, rank: rank}
	}
	p := page{run: "forger", epoch: "before-a-restart", shape: shape, entries: []removal{e}}
	other := make([]byte, keyLen)
	if _, err := rand.Read(other); err != nil {
		return "", nil, err
	}
	unsigned := p.encode(other, q.recordDLQ())
	delete(unsigned.Headers, hRecMAC)
	return q.recordQueue(), []amqp.Publishing{unsigned, p.encode(other, q.recordDLQ())}, nil
}

// PrepareRecord makes the removal record of the DLQ source as dlqctl's
// first removal there does (its queue, its key, on a classic or quorum
// DLQ the broker epoch), removing nothing: a plain producer can publish
// only to queues that exist. For the conformance suite's Forge hook.
func PrepareRecord(ctx context.Context, source string) error {
	q, err := Open(ctx, source, Options{})
	if err != nil {
		return err
	}
	defer q.Close()
	_, err = q.writer(ctx)
	return err
}

// EpochQueue names the queue holding the broker epoch of the DLQ source.
func EpochQueue(ctx context.Context, source string) (string, error) {
	q, err := Open(ctx, source, Options{})
	if err != nil {
		return "", err
	}
	defer q.Close()
	return q.epochQueue(), nil
}
