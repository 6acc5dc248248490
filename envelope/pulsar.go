package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Pulsar property names the client sets on dead letters and retries.
const (
	PulsarRealTopic       = "REAL_TOPIC"
	PulsarOriginMessageID = "ORIGIN_MESSAGE_ID"
	PulsarReconsumeTimes  = "RECONSUMETIMES"
)

// ImportedFromProperty marks a message or entry written by dlqctl import;
// its value is the envelope's id where it came from.
const ImportedFromProperty = "dlqctl_source_id"

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

// EventIDSource says where a Pulsar message's event ID is read from
// (--event-id-from property:NAME | json:PATH | key).
type EventIDSource struct {
	Kind string // "property" (default, names event_id then eventId), "json" or "key"
	Name string // property name or dotted JSON path
}

// ParseEventIDSource parses --event-id-from.
func ParseEventIDSource(s string) (EventIDSource, error) {
	if s == "" {
		return EventIDSource{Kind: "property"}, nil
	}
	if s == "key" {
		return EventIDSource{Kind: "key"}, nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if ok && name != "" && (kind == "property" || kind == "json") {
		return EventIDSource{Kind: kind, Name: name}, nil
	}
	return EventIDSource{}, fmt.Errorf("--event-id-from %q: want property:NAME, json:PATH or key", s)
}

func (s EventIDSource) EventID(key string, props FieldStore, payload []byte, names FieldNames) (string, error) {
	switch s.Kind {
	case "key":
		if key == "" {
			return "", fmt.Errorf("no message key to take the event ID from")
		}
		if !utf8.ValidString(key) {
			return "", fmt.Errorf("message key: invalid UTF-8")
		}
		return key, nil
	case "json":
		return EventIDAtJSONPath(payload, s.Name)
	}
	candidates := names[FieldEventID]
	if s.Name != "" {
		candidates = []string{s.Name}
	}
	for _, n := range candidates {
		if v, _ := props.Lookup(n); v != "" {
			return v, nil
		}
	}
	return "", fmt.Errorf("no event ID property (looked for %s)", strings.Join(candidates, ", "))
}

// EventIDAtJSONPath reads an event ID, a string or a number, at a dotted
// path in a JSON payload (--event-id-from json:PATH); decoders share it.
func EventIDAtJSONPath(payload []byte, path string) (string, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber() // a large numeric ID keeps every digit
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("event ID path %q: payload is not JSON", path)
	}
	for _, part := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return "", fmt.Errorf("event ID path %q: %q is not inside an object", path, part)
		}
		if v, ok = obj[part]; !ok {
			return "", fmt.Errorf("event ID path %q: no field %q", path, part)
		}
	}
	switch t := v.(type) {
	case string:
		if t != "" {
			return t, nil
		}
	case json.Number:
		return t.String(), nil
	}
	return "", fmt.Errorf("event ID path %q: not a string or number", path)
}

// FromPulsar maps a Pulsar DLQ message to the canonical envelope (the canonical envelope form, docs/json.md):
// REAL_TOPIC is the origin, RECONSUMETIMES (else the redelivery count) the
// attempts; properties named like envelope fields fill them, and the rest,
// ORIGIN_MESSAGE_ID among them, stay properties. It never fails.
func FromPulsar(m PulsarMessage, from EventIDSource, names FieldNames) Envelope {
	e := Envelope{ID: m.ID, Origin: Origin{Backend: "pulsar"}, Key: m.Key}
	kv := NewKVReader(m.Properties, names)
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
			kv.Fail(fmt.Errorf("%s: want a whole number, got %q", PulsarReconsumeTimes, TruncateForError(rc)))
		}
		e.Attempts = n
		kv.Used.Add(PulsarReconsumeTimes)
	} else if e.Attempts == 0 {
		e.Attempts = int(m.RedeliveryCount)
	}
	// Without a dead_lettered_at, the DLQ message's publish time is when it
	// was dead-lettered — unless dlqctl import wrote it, when it is only
	// the time of the import.
	if _, imported := m.Properties[ImportedFromProperty]; e.DeadLetteredAt.IsZero() && !imported {
		e.DeadLetteredAt = m.PublishTime.UTC()
	}
	kv.Rest(&e, false)
	if m.OrderingKey != "" {
		SetProperty(&e, PropOrderingKey, m.OrderingKey)
	}
	if !m.EventTime.IsZero() {
		SetProperty(&e, PropEventTime, m.EventTime.UTC().Format(time.RFC3339Nano))
	}
	if from.Kind != "property" || from.Name != "" || e.EventID == "" {
		id, err := from.EventID(m.Key, MapStore(m.Properties), m.Payload, names)
		if err != nil {
			kv.Fail(err)
		}
		e.EventID = id
	}
	return kv.Finish(e, nil)
}

func SetProperty(e *Envelope, k, v string) {
	if e.Properties == nil {
		e.Properties = map[string]string{}
	}
	e.Properties[k] = v
}
