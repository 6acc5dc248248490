package envelope

import (
	"strconv"
	"time"
)

// FieldWriter lays envelope fields out as key/value pairs, the inverse of
// DecodeFields: each field under the first of its names, each name written
// once (the first write wins), in the order written. Backends that store
// envelopes as fields (Redis entries, Pulsar properties) build on it.
type FieldWriter struct {
	names   FieldNames
	written map[string]bool
	// Pairs are the names and values written: name, value, name, value, …
	Pairs []string
}

// NewFieldWriter writes with names (DefaultFieldNames merged with overrides).
func NewFieldWriter(names FieldNames) *FieldWriter {
	return &FieldWriter{names: names, written: map[string]bool{}}
}

// Put writes an envelope field under its first name.
func (w *FieldWriter) Put(field, value string) { w.Raw(w.names[field][0], value) }

// Raw writes a name that is no envelope field (a property, a marker).
func (w *FieldWriter) Raw(name, value string) {
	if w.written[name] {
		return
	}
	w.written[name] = true
	w.Pairs = append(w.Pairs, name, value)
}

// Str writes a field unless its value is empty.
func (w *FieldWriter) Str(field, value string) {
	if value != "" {
		w.Put(field, value)
	}
}

// Time writes a field as RFC 3339 unless it is zero.
func (w *FieldWriter) Time(field string, t time.Time) {
	if !t.IsZero() {
		w.Put(field, t.UTC().Format(time.RFC3339Nano))
	}
}

// Written says whether name was written.
func (w *FieldWriter) Written(name string) bool { return w.written[name] }

// Map is the pairs as a map.
func (w *FieldWriter) Map() map[string]string {
	m := make(map[string]string, len(w.Pairs)/2)
	for i := 0; i+1 < len(w.Pairs); i += 2 {
		m[w.Pairs[i]] = w.Pairs[i+1]
	}
	return m
}

// Identity writes what identifies e's event: its event ID and, when it
// carries one, its fingerprint (a computed fingerprint is not written: it
// reads back computed, and the same).
func (w *FieldWriter) Identity(e Envelope) {
	w.Str(FieldEventID, e.EventID)
	w.Str(FieldFingerprint, e.CarriedFingerprint())
}

// Origin writes where a dead letter came from: its topic under the
// origin_stream field, or under topicName when the backend has a name of
// its own for it (Pulsar's REAL_TOPIC), then its group and consumer.
func (w *FieldWriter) Origin(o Origin, topicName string) {
	if topicName == "" {
		w.Str(FieldOriginStream, o.Topic)
	} else if o.Topic != "" {
		w.Raw(topicName, o.Topic)
	}
	w.Str(FieldOriginGroup, o.Subscription)
	w.Str(FieldOriginConsumer, o.Consumer)
}

// Property writes a property after the envelope's fields, unless it would
// read back as an envelope field: a name written already, or a field's
// first name. A name that is an alias of a field left out would read back
// as that field too: the field is written first, empty, under its first
// name, which wins over its aliases on reading.
func (w *FieldWriter) Property(name, value string) {
	field, first, isName := w.names.NameOf(name)
	if w.Written(name) || (isName && first) {
		return
	}
	if isName {
		w.Put(field, "")
	}
	w.Raw(name, value)
}

// ImportPayload is the payload an importer writes for e: its payload, or,
// for a malformed entry that has none, the raw form it was read from (and
// then no encoding: it is written as it came).
func ImportPayload(e Envelope) (payload []byte, encoding string) {
	if e.Malformed != "" && len(e.Payload) == 0 && len(e.Raw) > 0 {
		return e.Raw, ""
	}
	return e.Payload, e.PayloadEncoding
}

// NameOf finds the envelope field that name is one of the names of, and
// whether it is that field's first name.
func (names FieldNames) NameOf(name string) (field string, first, ok bool) {
	for f, ns := range names {
		for i, n := range ns {
			if n == name {
				return f, i == 0, true
			}
		}
	}
	return "", false, false
}

// History writes what a dead letter went through, for backends that keep
// fields as headers, properties or attributes (Kafka, Pulsar, SQS):
// attempts and redrive count when not zero, error, error class, the
// times, owner, schema info and a malformed entry's reason.
func (w *FieldWriter) History(e Envelope) {
	if e.Attempts != 0 {
		w.Put(FieldAttempts, strconv.Itoa(e.Attempts))
	}
	w.Str(FieldLastError, e.LastError)
	w.Str(FieldErrorClass, e.ErrorClass)
	w.Time(FieldFirstReceivedAt, e.FirstReceivedAt)
	w.Time(FieldDeadLetteredAt, e.DeadLetteredAt)
	w.Str(FieldOwner, e.Owner)
	w.Time(FieldRecoverBy, e.RecoverBy)
	w.Str(FieldSchemaInfo, e.SchemaInfo)
	if e.RedriveCount != 0 {
		w.Put(FieldRedriveCount, strconv.Itoa(e.RedriveCount))
	}
	if e.Malformed != "" {
		w.Raw(MalformedMarker, e.Malformed)
	}
}
