package natsdlq

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/dlqctl/dlqctl/envelope"
)

// Header names with a meaning of their own on a dead-letter copy.
const (
	// HeaderMsgID is JetStream's deduplication ID; it is the event ID of a
	// copy that carries no event_id header.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderOriginalSubject and HeaderNatsOriginalSubject name the subject
	// the copy's original was published to, when no origin_stream header
	// (or its aliases) does.
	HeaderOriginalSubject     = "x-original-subject"
	HeaderNatsOriginalSubject = "Nats-Original-Subject"
	// SourceIDHeader keeps the id an imported envelope had where it came
	// from, so that a second import of it is refused.
	SourceIDHeader = "dlqctl_source_id"
)

// maxEventID bounds an event ID: a header value is otherwise bounded only
// by the server's max_payload, and an ID that long is a producer's bug.
const maxEventID = 1024

// serverHeaders are what the server adds to a message it hands out (a
// direct get, a republish): facts about the copy in the DLQ stream, not
// part of what the consumer dead-lettered.
var serverHeaders = map[string]bool{
	"Nats-Stream": true, "Nats-Sequence": true, "Nats-Time-Stamp": true, "Nats-Subject": true,
	"Nats-Last-Sequence": true, "Nats-Num-Pending": true,
}

// staleHeader says whether a header must not travel with a republished
// message: JetStream's publish expectations (Nats-Expected-*) belong to
// the original publish and would make the redrive fail or, worse, pass by
// accident; the server's own headers describe the DLQ copy.
func staleHeader(name string) bool {
	return serverHeaders[name] || strings.HasPrefix(name, "Nats-Expected-")
}

// Message is one JetStream message: a copy in the DLQ stream, or (for a
// consumer that decodes what it receives, as the reference worker does)
// an original.
type Message struct {
	Seq     uint64
	Subject string
	Header  nats.Header
	Data    []byte
	Time    time.Time
}

// Decode maps m to the canonical envelope as a scan does (names: the
// envelope's header names and aliases, envelope.DefaultFieldNames when
// nil). It never fails; see decoder.decode.
func Decode(m Message, names envelope.FieldNames) envelope.Envelope {
	if names == nil {
		names = envelope.DefaultFieldNames()
	}
	return newDecoder(names).decode(m, false)
}

// decoder turns copies into envelopes.
type decoder struct {
	names envelope.FieldNames
	// origin is origin_stream's names, then the original-subject headers.
	origin []string
}

func (d decoder) originNames() []string {
	if d.origin != nil {
		return d.origin
	}
	return append(append([]string{}, d.names[envelope.FieldOriginStream]...), HeaderOriginalSubject, HeaderNatsOriginalSubject)
}

func newDecoder(names envelope.FieldNames) decoder {
	d := decoder{names: names}
	d.origin = d.originNames()
	return d
}

// headerReader reads envelope fields from a message's headers and keeps
// the first error.
type headerReader struct {
	h    nats.Header
	used map[string]bool
	err  error
}

func (r *headerReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// get returns the first value of the first of names present.
func (r *headerReader) get(names ...string) (string, bool) {
	for _, n := range names {
		vs, ok := r.h[n]
		if !ok {
			continue
		}
		if r.used != nil {
			r.used[n] = true
		}
		if len(vs) == 0 {
			return "", true
		}
		return vs[0], true
	}
	return "", false
}

func (r *headerReader) str(names []string) string {
	v, _ := r.get(names...)
	return v
}

func (r *headerReader) int(field string, names []string) int {
	v, ok := r.get(names...)
	if !ok || v == "" {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		r.fail(fmt.Errorf("header %s: want a whole number, got %q", field, truncate(v)))
	}
	return n
}

func (r *headerReader) time(field string, names []string) time.Time {
	v, ok := r.get(names...)
	if !ok || v == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		r.fail(fmt.Errorf("header %s: want an RFC 3339 time, got %q", field, truncate(v)))
		return time.Time{}
	}
	return t.UTC()
}

func truncate(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// decode maps a copy to the canonical envelope: id is the DLQ stream
// sequence; headers named like envelope fields fill them (event ID from
// event_id, else Nats-Msg-Id; origin from origin_stream, else
// x-original-subject or Nats-Original-Subject); the rest become
// properties; the stream's timestamp is the dead-letter time when no
// header gives one. lean leaves properties out. It never fails: what cannot
// be read makes the envelope malformed with the reason, and keeps the
// message's raw form.
func (d decoder) decode(m Message, lean bool) envelope.Envelope {
	e := envelope.Envelope{ID: strconv.FormatUint(m.Seq, 10), Origin: envelope.Origin{Backend: Name}}
	r := &headerReader{h: m.Header}
	if !lean {
		// Only properties need to know which headers a field took.
		r.used = make(map[string]bool, len(m.Header))
	}
	if bad, what, found := invalidHeader(m.Header); found {
		r.fail(fmt.Errorf("header %q: %s is not valid UTF-8", truncate(bad), what))
	}
	n := d.names
	e.EventID = r.str(n[envelope.FieldEventID])
	if e.EventID == "" {
		e.EventID, _ = r.get(HeaderMsgID)
	}
	e.Fingerprint = r.str(n[envelope.FieldFingerprint])
	e.PayloadVersion = r.str(n[envelope.FieldPayloadVersion])
	e.ContentType = r.str(n[envelope.FieldContentType])
	e.Key = r.str(n[envelope.FieldKey])
	e.Origin.Topic = r.str(d.originNames())
	e.Origin.Subscription = r.str(n[envelope.FieldOriginGroup])
	e.Origin.Consumer = r.str(n[envelope.FieldOriginConsumer])
	e.Attempts = r.int(envelope.FieldAttempts, n[envelope.FieldAttempts])
	e.LastError = r.str(n[envelope.FieldLastError])
	e.ErrorClass = r.str(n[envelope.FieldErrorClass])
	e.FirstReceivedAt = r.time(envelope.FieldFirstReceivedAt, n[envelope.FieldFirstReceivedAt])
	e.DeadLetteredAt = r.time(envelope.FieldDeadLetteredAt, n[envelope.FieldDeadLetteredAt])
	// Without a dead_lettered_at header, the copy's stream timestamp is
	// when it was dead-lettered; an imported envelope that had none keeps
	// none, so that an export and import change nothing.
	if _, imported := m.Header[SourceIDHeader]; e.DeadLetteredAt.IsZero() && !imported && !m.Time.IsZero() {
		e.DeadLetteredAt = m.Time.UTC()
	}
	e.Owner = r.str(n[envelope.FieldOwner])
	e.RecoverBy = r.time(envelope.FieldRecoverBy, n[envelope.FieldRecoverBy])
	e.SchemaInfo = r.str(n[envelope.FieldSchemaInfo])
	e.RedriveCount = r.int(envelope.FieldRedriveCount, n[envelope.FieldRedriveCount])
	d.payload(&e, r, m.Data, lean)
	if !lean {
		for name, vs := range m.Header {
			if r.used[name] || serverHeaders[name] || len(vs) == 0 {
				continue
			}
			if e.Properties == nil {
				e.Properties = map[string]string{}
			}
			// A repeated header keeps its first value here; a move sends
			// every value on.
			e.Properties[name] = vs[0]
		}
		delete(e.Properties, SourceIDHeader)
	}
	if reason, ok := r.get(envelope.MalformedMarker); ok {
		if reason == "" {
			reason = "malformed where it was imported from"
		}
		r.fail(errors.New(reason))
	}
	switch {
	case e.EventID == "":
		r.fail(errors.New("no event ID (neither an event_id header nor Nats-Msg-Id)"))
	case len(e.EventID) > maxEventID:
		r.fail(fmt.Errorf("event ID is %d bytes long (at most %d)", len(e.EventID), maxEventID))
	}
	if r.err != nil {
		e.Malformed = r.err.Error()
		e.Raw = rawCopy(m)
		return e
	}
	e.FillFingerprint()
	return e
}

// invalidHeader names the first header (in name order, so the reason is
// the same on every read) whose name or a value is not valid UTF-8.
func invalidHeader(h nats.Header) (name, what string, found bool) {
	for k, vs := range h {
		w := ""
		if !utf8.ValidString(k) {
			w = "name"
		} else {
			for _, v := range vs {
				if !utf8.ValidString(v) {
					w = "value"
					break
				}
			}
		}
		if w != "" && (!found || k < name) {
			name, what, found = k, w, true
		}
	}
	return name, what, found
}

// payload takes the data, checked against a payload_encoding header when
// there is one, else classified.
func (d decoder) payload(e *envelope.Envelope, r *headerReader, data []byte, lean bool) {
	e.Payload = data
	enc := r.str(d.names[envelope.FieldPayloadEncoding])
	switch enc {
	case "":
	case envelope.EncodingJSON:
		if !json.Valid(data) {
			r.fail(errors.New("payload: payload_encoding json but not valid JSON"))
		}
	case envelope.EncodingUTF8:
		if utf8.Valid(data) {
			e.PayloadEncoding = enc
			return
		}
		r.fail(errors.New("payload: payload_encoding utf8 but not valid UTF-8"))
	case envelope.EncodingBase64:
		e.PayloadEncoding = enc
		return
	default:
		r.fail(fmt.Errorf("payload_encoding: unknown %q (want json, utf8 or base64)", truncate(enc)))
	}
	if lean {
		e.PayloadEncoding = "" // a lean envelope has none
		return
	}
	e.PayloadEncoding = envelope.ClassifyPayload(data)
}

// rawCopy is a malformed copy's raw form for export: subject, sequence,
// time, headers (sorted) and data.
func rawCopy(m Message) []byte {
	type header struct {
		Name   string   `json:"name"`
		Values []string `json:"values"`
	}
	doc := struct {
		Subject string    `json:"subject"`
		Seq     uint64    `json:"seq"`
		Time    time.Time `json:"time"`
		Headers []header  `json:"headers,omitempty"`
		Data    []byte    `json:"data"`
	}{Subject: m.Subject, Seq: m.Seq, Time: m.Time.UTC(), Data: m.Data}
	for name, vs := range m.Header {
		doc.Headers = append(doc.Headers, header{Name: strings.ToValidUTF8(name, "\uFFFD"), Values: validAll(vs)})
	}
	sort.Slice(doc.Headers, func(i, j int) bool { return doc.Headers[i].Name < doc.Headers[j].Name })
	b, _ := json.Marshal(doc) // strings and bytes always marshal
	return b
}

func validAll(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strings.ToValidUTF8(v, "\uFFFD")
	}
	return out
}
