package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The broker's epoch. Acks on a classic or quorum queue may be lost by a
// broker crash for as long as the broker has not written them, and
// nothing over AMQP says when it has — except a restart: what a queue
// holds after a restart is what the broker had written, and an entry that
// is not back after one never comes back. So record entries name the
// epoch they were written in, and an entry from an epoch before the
// current one is provably settled: dropped once no copy is in the DLQ.
//
// The epoch is a token in a transient (non-persistent) message, the only
// message of the durable queue dlqctl.epoch.<DLQ>: a broker drops
// transient messages when it restarts, so a missing message means a
// restart since it was written (measured on 3.10.8 after a SIGKILL), and
// the record's writer starts a new epoch. Only the lease holder writes it;
// every read reads it, for only an entry written before a restart can
// hide a message (an ack lost in a crash): within one epoch an entry's
// ack has taken effect, and a copy that arrives later (the same event
// dead-lettered again, the same envelope imported again) is new. Deleting
// or purging the queue by hand reads as a restart:
// the next run may then drop entries of acks still unwritten, which a
// crash right after could bring back.

// epochQueue holds the current epoch's token.
func (q *Queue) epochQueue() string { return q.bookName("dlqctl.epoch.") }

// readEpoch is the current epoch's token, "" when there is none (the
// broker restarted since the last one was written, or none ever was).
func (q *Queue) readEpoch(ctx context.Context) (string, error) {
	token := ""
	_, err := q.readBook(ctx, q.epochQueue(), false, func(d *amqp.Delivery) { token = string(d.Body) })
	if errors.Is(err, errNoQueue) {
		return "", nil
	}
	return token, err
}

// currentEpoch is the broker's current epoch token, starting a new epoch
// when there is none (a restart since the last one, or never one).
func (q *Queue) currentEpoch(ctx context.Context) (string, error) {
	ch, err := q.channel(ctx)
	if err != nil {
		return "", err
	}
	defer ch.Close()
	name := q.epochQueue()
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-max-length": int32(1)}); err != nil {
		return "", q.wrap(ctx, "declare "+name, err)
	}
	token, err := q.readEpoch(ctx)
	if err != nil || token != "" {
		return token, err
	}
	raw := make([]byte, 8)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	token = hex.EncodeToString(raw)
	if err := ch.Confirm(false); err != nil {
		return "", q.wrap(ctx, "confirm mode on "+name, err)
	}
	if err := q.publishConfirmed(ctx, ch, name, amqp.Publishing{Body: []byte(token), DeliveryMode: amqp.Transient}); err != nil {
		return "", fmt.Errorf("%s: start an epoch in %s: %w", q, name, err)
	}
	return token, nil
}
