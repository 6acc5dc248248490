package rabbitmq

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// Import publishes e to the DLQ queue (default exchange, publisher
// confirm, mandatory) and returns its entry id (on a stream DLQ "": the
// offset a stream gives a message is not in its confirm). The body is the payload;
// message_id is the event ID, and the envelope's fields are headers under
// the first of their names, the origin queue under origin_stream, then
// its properties (amqp.* properties go back to the message properties
// they came from); dlqctl_source_id keeps e.ID. Persistent.
//
// An id already present (an entry id or a dlqctl_source_id) is refused
// with backend.ErrExists.
func (q *Queue) Import(ctx context.Context, e envelope.Envelope) (string, error) {
	if q.missing {
		return "", backend.Configf("%s: the queue %q does not exist: declare it first (dlqctl does not choose its type and dead-letter settings)", q, q.src.queue)
	}
	if e.ID != "" {
		has, err := q.Has(ctx, e.ID)
		if err != nil {
			return "", err
		}
		if has {
			return "", fmt.Errorf("import %s: %w in %s", e.ID, backend.ErrExists, q)
		}
	}
	p := q.importMessage(e)
	ch, err := q.channel(ctx)
	if err != nil {
		return "", err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return "", q.wrap(ctx, "import: confirm mode", err)
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q.src.queue, true, false, p)
	if err != nil {
		return "", q.wrap(ctx, "import "+e.ID, err)
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return "", q.wrap(ctx, "import "+e.ID+": wait for the confirm", err)
	}
	select {
	case r := <-returns:
		return "", fmt.Errorf("%s: import %s: returned: %d %s", q, e.ID, r.ReplyCode, r.ReplyText)
	default:
	}
	if !ok {
		return "", fmt.Errorf("%s: import %s: the broker refused the message (nack)", q, e.ID)
	}
	m := message{props: p, headers: p.Headers}
	q.mu.Lock()
	if q.present != nil && e.ID != "" {
		q.present[e.ID] = true
	}
	q.mu.Unlock()
	if stream, _ := q.streamShaped(ctx); stream {
		return "", nil
	}
	return identity(m, q.dec.carriedFingerprint(p.Headers), death{}), nil
}

// Has reports whether id is the entry id or the dlqctl_source_id of a
// message in the DLQ. The first call reads the whole DLQ and keeps its ids;
// later calls, and this Queue's imports, use and extend them (an import
// asks for every entry before it writes any).
func (q *Queue) Has(ctx context.Context, id string) (bool, error) {
	if q.missing {
		return false, nil
	}
	q.mu.Lock()
	present := q.present
	q.mu.Unlock()
	if present == nil {
		present = map[string]bool{}
		err := q.each(ctx, passOpts{}, func(got string, d *amqp.Delivery) error {
			present[got] = true
			if s, ok := d.Headers[envelope.ImportedFromProperty].(string); ok {
				present[s] = true
			}
			return nil
		})
		if err != nil {
			return false, err
		}
		q.mu.Lock()
		q.present = present
		q.mu.Unlock()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.present[id], nil
}

func (q *Queue) importMessage(e envelope.Envelope) amqp.Publishing {
	w := envelope.NewFieldWriter(q.dec.names)
	payload, _ := envelope.ImportPayload(e)
	w.Identity(e)
	w.Raw(envelope.ImportedFromProperty, e.ID)
	w.Str(envelope.FieldPayloadVersion, e.PayloadVersion)
	w.Str(envelope.FieldKey, e.Key)
	w.Origin(e.Origin, "")
	w.History(e)
	p := amqp.Publishing{Body: payload, ContentType: e.ContentType, MessageId: e.EventID, DeliveryMode: amqp.Persistent}
	for _, k := range slices.Sorted(maps.Keys(e.Properties)) {
		v := e.Properties[k]
		if strings.HasPrefix(k, "amqp.") {
			setProperty(&p, k, v)
			continue
		}
		if k == pXDeath || k == hFirstDeathQueue || k == hFirstDeathReason || k == hFirstDeathExchange {
			continue // the broker's record of the original deaths: not re-creatable
		}
		w.Property(k, v)
	}
	p.Headers = amqp.Table{}
	for i := 0; i+1 < len(w.Pairs); i += 2 {
		if w.Pairs[i+1] != "" {
			p.Headers[w.Pairs[i]] = w.Pairs[i+1]
		}
	}
	return p
}

// setProperty writes an amqp.* property back to the message property.
func setProperty(p *amqp.Publishing, k, v string) {
	switch k {
	case pMessageID:
		if p.MessageId == "" {
			p.MessageId = v
		}
	case pCorrelationID:
		p.CorrelationId = v
	case pContentEncoding:
		p.ContentEncoding = v
	case pDeliveryMode:
		if n, err := strconv.Atoi(v); err == nil && (n == 1 || n == 2) {
			p.DeliveryMode = uint8(n)
		}
	case pPriority:
		if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= 255 {
			p.Priority = uint8(n)
		}
	case pReplyTo:
		p.ReplyTo = v
	case pExpiration:
		p.Expiration = v
	case pTimestamp:
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			p.Timestamp = t
		}
	case pType:
		p.Type = v
	case pAppID:
		p.AppId = v
	}
}
