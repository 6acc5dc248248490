package pulsardlq

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/dlqctl/dlqctl/envelope"
)

// Pulsar property names the client sets on dead letters and retries.
const (
	PulsarRealTopic       = "REAL_TOPIC"
	PulsarOriginMessageID = "ORIGIN_MESSAGE_ID"
	PulsarReconsumeTimes  = "RECONSUMETIMES"
)

// Properties under which the Pulsar mapping keeps message metadata that has
// no envelope field, so that a redrive can restore it.
const (
	PropOrderingKey = "pulsar.ordering_key"
	PropEventTime   = "pulsar.event_time"
)

// PulsarMessage is what the Pulsar backend reads off one DLQ message; it
// keeps this package free of the Pulsar client.
type PulsarMessage struct {
	ID              string // ledger:entry:partition:batch
	Topic           string
	Key             string
	OrderingKey     string
	Properties      map[string]string
	Payload         []byte
	EventTime       time.Time
	PublishTime     time.Time
	RedeliveryCount uint32
}

// FromPulsar maps a Pulsar DLQ message to the canonical envelope (the canonical envelope form, docs/json.md):
// REAL_TOPIC is the origin, RECONSUMETIMES (else the redelivery count) the
// attempts; properties named like envelope fields fill them, and the rest,
// ORIGIN_MESSAGE_ID among them, stay properties. It never fails.
func FromPulsar(m PulsarMessage, from envelope.EventIDSource, names envelope.FieldNames) envelope.Envelope {
	e := envelope.Envelope{ID: m.ID, Origin: envelope.Origin{Backend: "pulsar"}, Key: m.Key}
	kv := envelope.NewKVReader(m.Properties, names)
	if !utf8.ValidString(m.Key) || !utf8.ValidString(m.OrderingKey) {
		kv.Fail(errors.New("message key: invalid UTF-8"))
	}
	kv.ReadCommon(&e)
	kv.SetPayload(&e, m.Payload)
	if e.Key == "" {
		e.Key = m.Key
	}
	if rt, ok := m.Properties[PulsarRealTopic]; ok {
		e.Origin.Topic = rt
		kv.Used.Add(PulsarRealTopic)
	}
	if rc, ok := m.Properties[PulsarReconsumeTimes]; ok {
		n, err := strconv.Atoi(rc)
		if err != nil {
			kv.Fail(fmt.Errorf("%s: want a whole number, got %q", PulsarReconsumeTimes, envelope.TruncateForError(rc)))
		}
		e.Attempts = n
		kv.Used.Add(PulsarReconsumeTimes)
	} else if e.Attempts == 0 {
		e.Attempts = int(m.RedeliveryCount)
	}
	// Without a dead_lettered_at, the DLQ message's publish time is when it
	// was dead-lettered — unless dlqctl import wrote it, when it is only
	// the time of the import.
	if _, imported := m.Properties[envelope.ImportedFromProperty]; e.DeadLetteredAt.IsZero() && !imported {
		e.DeadLetteredAt = m.PublishTime.UTC()
	}
	kv.Rest(&e, false)
	if m.OrderingKey != "" {
		envelope.SetProperty(&e, PropOrderingKey, m.OrderingKey)
	}
	if !m.EventTime.IsZero() {
		envelope.SetProperty(&e, PropEventTime, m.EventTime.UTC().Format(time.RFC3339Nano))
	}
	if from.Kind != "property" || from.Name != "" || e.EventID == "" {
		id, err := from.EventID(m.Key, envelope.MapStore(m.Properties), m.Payload, names)
		if err != nil {
			kv.Fail(err)
		}
		e.EventID = id
	}
	return kv.Finish(e, nil)
}
