package rabbitmq

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

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
//
// Anyone who may publish to the queue could otherwise move the epoch on,
// and so make the record's entries look older than a restart: a new copy
// of removed content would then be hidden as one that came back. So the
// token carries an HMAC under the record's key, and the queue takes one
// message and refuses any other (x-overflow reject-publish): a message
// that does not check counts as no token (a restart), and the writer
// takes it away before it writes its own.

// epochQueue holds the current epoch's token.
func (q *Queue) epochQueue() string { return q.bookName("dlqctl.epoch.") }

// epochMAC binds the token to the record's key and the DLQ.
func epochMAC(key []byte, dlq, token string) string {
	m := hmac.New(sha256.New, key)
	for _, s := range []string{recordVersion, dlq, "epoch", token} {
		m.Write([]byte(strconv.Itoa(len(s)) + ":" + s))
	}
	return hex.EncodeToString(m.Sum(nil)[:macLen])
}

// readEpoch is the current epoch's token, "" when there is none (the
// broker restarted since the last one was written, or none ever was) or
// the queue holds none that checks under key; foreign counts the
// messages that do not check.
func (q *Queue) readEpoch(ctx context.Context, key []byte) (token string, foreign int, err error) {
	dlq := q.recordDLQ()
	_, err = q.readBook(ctx, q.epochQueue(), false, func(d *amqp.Delivery) {
		mac, _ := d.Headers[hRecMAC].(string)
		t := string(d.Body)
		if len(key) == keyLen && token == "" && hmac.Equal([]byte(mac), []byte(epochMAC(key, dlq, t))) {
			token = t
			return
		}
		foreign++
	})
	if errors.Is(err, errNoQueue) {
		return "", 0, nil
	}
	return token, foreign, err
}

// currentEpoch is the broker's current epoch token, starting a new epoch
// when there is none (a restart since the last one, or never one).
func (q *Queue) currentEpoch(ctx context.Context, key []byte) (string, error) {
	ch, err := q.channel(ctx)
	if err != nil {
		return "", err
	}
	defer ch.Close()
	name := q.epochQueue()
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"}); err != nil {
		return "", q.wrap(ctx, "declare "+name, err)
	}
	token, foreign, err := q.readEpoch(ctx, key)
	if err != nil || token != "" {
		return token, err
	}
	if foreign > 0 {
		if err := q.dropForeign(ctx, name); err != nil {
			return "", err
		}
	}
	raw := make([]byte, 8)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	token = hex.EncodeToString(raw)
	if err := ch.Confirm(false); err != nil {
		return "", q.wrap(ctx, "confirm mode on "+name, err)
	}
	m := amqp.Publishing{Body: []byte(token), DeliveryMode: amqp.Transient, Headers: amqp.Table{hRecMAC: epochMAC(key, q.recordDLQ(), token)}}
	if err := q.publishConfirmed(ctx, ch, name, m); err != nil {
		return "", fmt.Errorf("%s: start an epoch in %s (does another message fill it? something else publishes to it): %w", q, name, err)
	}
	return token, nil
}

// dropForeign takes away every message of the epoch queue name: none is
// dlqctl's (a restart dropped its token), and the queue takes only one.
func (q *Queue) dropForeign(ctx context.Context, name string) error {
	var tags []uint64
	ch, err := q.readBook(ctx, name, true, func(d *amqp.Delivery) { tags = append(tags, d.DeliveryTag) })
	if err != nil {
		return err
	}
	defer ch.Close()
	for _, t := range tags {
		if err := ch.Ack(t, false); err != nil {
			return q.wrap(ctx, "drop a token dlqctl did not write from "+name, err)
		}
	}
	return nil
}
