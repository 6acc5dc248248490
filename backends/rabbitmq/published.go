package rabbitmq

import (
	"context"
	"errors"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backend"
)

var _ backend.PublishedChecker = (*Queue)(nil)

// CheckPublished looks on each query's destination for the message the
// run published, by its markers (dlqctl_run_id and dlqctl_seq): a resume
// then removes from the DLQ what is there instead of sending it a second
// time. A classic queue is read and given back (free); a stream is read by
// offset from the query's Since. A quorum queue is not read (every read
// counts a delivery against its consumers' limit), nor an exchange
// destination (which queues it routes to is not known): their entries are
// PresenceUnknown, as are those not found (a consumer may have taken
// them), and they are sent again as ambiguous.
func (q *Queue) CheckPublished(ctx context.Context, queries []backend.PublishedQuery, m backend.Markers) ([]backend.Presence, error) {
	out := make([]backend.Presence, len(queries))
	byQueue := map[string][]int{}
	since := map[string]time.Time{}
	for i, qu := range queries {
		d, err := parseDest(qu.Item.Dest)
		if err != nil || (d.exchange != "" && d.exchange != "amq.default") {
			continue
		}
		byQueue[d.key] = append(byQueue[d.key], i)
		if s, ok := since[d.key]; !ok || qu.Since.Before(s) {
			since[d.key] = qu.Since
		}
	}
	for name, idx := range byQueue {
		found, err := q.publishedIn(ctx, name, m.RunID, since[name])
		if err != nil {
			return nil, err
		}
		for _, i := range idx {
			if found[queries[i].Item.Seq] {
				out[i] = backend.PresenceFound
			}
		}
	}
	return out, nil
}

// publishedIn reads the queue name for messages carrying run's marker and
// returns their sequence numbers; nothing for a queue it does not read.
func (q *Queue) publishedIn(ctx context.Context, name, run string, since time.Time) (map[int64]bool, error) {
	found := map[int64]bool{}
	note := func(d *amqp.Delivery) {
		if r, _ := d.Headers[backend.MarkerRunID].(string); r == run {
			if s, _ := d.Headers[backend.MarkerSeq].(string); s != "" {
				if n, err := strconv.ParseInt(s, 10, 64); err == nil {
					found[n] = true
				}
			}
		}
	}
	typ, err := q.probeType(ctx, name)
	if errors.Is(err, errNoQueue) {
		return found, nil
	}
	if err != nil {
		return nil, err
	}
	switch typ {
	case "classic":
		return found, q.peekQueue(ctx, name, note)
	case "stream":
		start := streamStart{first: since.IsZero(), at: since}
		_, err := q.readStream(ctx, name, start, func(_ int64, d *amqp.Delivery) error {
			note(d)
			return nil
		})
		return found, err
	}
	return found, nil
}

// peekQueue reads what a classic queue holds ready now and gives it all
// back (channel close), calling fn for each message. Other consumers may
// take messages meanwhile: what it does not see may still have been
// there.
func (q *Queue) peekQueue(ctx context.Context, name string, fn func(d *amqp.Delivery)) error {
	ch, err := q.channel(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	st, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
	if err != nil || st.Messages == 0 {
		return nil
	}
	if err := ch.Qos(0, 0, false); err != nil {
		return q.wrap(ctx, "set QoS", err)
	}
	ds, err := ch.Consume(name, "", false, false, false, false, nil)
	if err != nil {
		return q.wrap(ctx, "read "+name, err)
	}
	timer := time.NewTimer(idleWait)
	defer timer.Stop()
	for got := 0; got < st.Messages; got++ {
		select {
		case d, open := <-ds:
			if !open {
				return q.wrap(ctx, "read "+name, amqp.ErrClosed)
			}
			fn(&d)
			restart(timer, idleWait)
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return q.wrap(ctx, "read "+name, ctx.Err())
		}
	}
	return nil
}
