package pulsardlq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// SourceIDProperty keeps the id an imported envelope had where it came
// from (a file name, a stream entry id, another topic's message id): a
// Pulsar message id is the broker's to give.
const SourceIDProperty = "dlqctl_source_id"

// Import produces e to the DLQ topic and returns its message id.
//
// The payload is the message payload and the key the message key; the
// envelope's fields become properties under the first of their names in
// Options.Fields (event_id, fingerprint when carried, payload_version,
// content_type, origin_group, origin_consumer, attempts, last_error,
// error_class, first_received_at, dead_lettered_at, owner, recover_by,
// schema_info, redrive_count, payload_encoding when the bytes alone would
// read otherwise), except origin.topic, which is REAL_TOPIC as the
// client's dead-letter producer writes it. The envelope's properties
// follow; pulsar.ordering_key and pulsar.event_time go back to the
// message's ordering key and event time. dlqctl_source_id keeps e.ID.
//
// attempts is written under its own name, not as RECONSUMETIMES: that one
// is the client's retry counter, which a consumer with retry enabled acts
// on (and a redrive drops), while attempts is only a record.
//
// An id already present (as dlqctl_source_id of a pending message, or as
// a pending message's id) is refused with backend.ErrExists.
func (t *Topic) Import(ctx context.Context, e envelope.Envelope) (string, error) {
	if e.ID != "" {
		has, err := t.Has(ctx, e.ID)
		if err != nil {
			return "", err
		}
		if has {
			return "", fmt.Errorf("import %s: %w in %s", e.ID, backend.ErrExists, t)
		}
	}
	p, err := t.importProducer(ctx)
	if err != nil {
		return "", err
	}
	id, err := p.send(ctx, t.importMessage(e))
	if err != nil {
		return "", t.connErr(ctx, "import "+e.ID, err)
	}
	part := int32(-1)
	t.mu.Lock()
	if t.partitions > 0 {
		part = id.PartitionIdx()
	}
	if t.sourceIDs != nil && e.ID != "" {
		t.sourceIDs[e.ID] = true
	}
	t.mu.Unlock()
	return idOf(id, part).String(), nil
}

// Has reports whether id is the dlqctl_source_id of a pending message
// (one scan on first call, then kept for the life of the Topic) or the id
// of a pending message.
func (t *Topic) Has(ctx context.Context, id string) (bool, error) {
	t.mu.Lock()
	ids := t.sourceIDs
	t.mu.Unlock()
	if ids == nil {
		ids = map[string]bool{}
		err := t.Scan(ctx, "", func(e envelope.Envelope) error {
			if v, ok := e.Properties[SourceIDProperty]; ok {
				ids[v] = true
			}
			return nil
		})
		if err != nil {
			return false, err
		}
		t.mu.Lock()
		if t.sourceIDs == nil {
			t.sourceIDs = ids
		}
		ids = t.sourceIDs
		t.mu.Unlock()
	}
	t.mu.Lock()
	found := ids[id]
	t.mu.Unlock()
	if found {
		return true, nil
	}
	if _, ok := parseMsgID(id); !ok {
		return false, nil
	}
	_, _, err := t.getMessage(ctx, id, nil)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, backend.ErrNotFound):
		return false, nil
	}
	return false, err
}

// importProducer is the producer of imports, never reconnected by the
// client (sendonce.go): a copy the client wrote again would be a second
// dead letter, redriven twice. One whose connection was lost is replaced.
func (t *Topic) importProducer(ctx context.Context) (onceProducer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.importer.Producer != nil {
		if !t.importer.isLost() {
			return t.importer, nil
		}
		t.importer.Close()
		t.importer = onceProducer{}
	}
	p, err := withCtx(ctx, func() (onceProducer, error) {
		return t.createOnceProducer(pulsar.ProducerOptions{
			Topic:           t.topic.String(),
			DisableBatching: true, // one message per entry: each can be acked alone
			SendTimeout:     t.sendTimeout,
		})
	}, func(p onceProducer) { p.Close() })
	if err != nil {
		return onceProducer{}, t.connErr(ctx, "create a producer", err)
	}
	t.importer = p
	return p, nil
}

// importMessage lays e out as a Pulsar message (see Import).
func (t *Topic) importMessage(e envelope.Envelope) *pulsar.ProducerMessage {
	w := envelope.NewFieldWriter(t.names)
	payload, _ := envelope.ImportPayload(e)
	w.Identity(e)
	if e.PayloadEncoding != "" && e.PayloadEncoding != envelope.ClassifyPayload(payload) {
		w.Put(envelope.FieldPayloadEncoding, e.PayloadEncoding)
	}
	w.Str(envelope.FieldPayloadVersion, e.PayloadVersion)
	w.Str(envelope.FieldContentType, e.ContentType)
	w.Origin(e.Origin, PulsarRealTopic)
	w.History(e)
	msg := &pulsar.ProducerMessage{Payload: payload, Key: e.Key}
	for _, k := range slices.Sorted(maps.Keys(e.Properties)) {
		v := e.Properties[k]
		switch k {
		case PropOrderingKey:
			if v != "" {
				msg.OrderingKey = v
				continue
			}
		case PropEventTime:
			if ts, ok := eventTime(v); ok {
				msg.EventTime = ts
				continue
			}
		case PulsarRealTopic, PulsarReconsumeTimes:
			// Left out: they would read back as the origin or the attempts.
			continue
		}
		w.Property(k, v)
	}
	msg.Properties = w.Map()
	if e.ID != "" {
		msg.Properties[SourceIDProperty] = e.ID
	}
	return msg
}

// eventTime reads an event time that survives the trip through Pulsar's
// milliseconds unchanged, as FromPulsar would print it.
func eventTime(s string) (time.Time, bool) {
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || ts.UnixMilli() <= 0 {
		return time.Time{}, false
	}
	back := time.UnixMilli(ts.UnixMilli()).UTC()
	return back, back.Format(time.RFC3339Nano) == s
}

// withCtx runs a client call that takes no context, and gives up when ctx
// ends; a result that arrives later is released with drop.
func withCtx[T any](ctx context.Context, call func() (T, error), drop func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.err == nil && drop != nil {
				drop(r.v)
			}
		}()
		var zero T
		return zero, ctx.Err()
	}
}
