// Package envelope holds the canonical DLQ envelope (the canonical envelope form, docs/json.md), its decoding
// from every backend's native form, payload fingerprints and categories.
package envelope

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Schema is the value of the envelope's "schema" field.
const Schema = "dlqctl.envelope/v1"

// Payload encodings (the canonical envelope form, docs/json.md).
const (
	EncodingJSON   = "json"
	EncodingUTF8   = "utf8"
	EncodingBase64 = "base64"
)

// Origin says where an envelope was consumed from before it was dead-lettered.
type Origin struct {
	Backend      string `json:"backend,omitempty"`
	Topic        string `json:"topic,omitempty"`
	Subscription string `json:"subscription,omitempty"`
	Consumer     string `json:"consumer,omitempty"`
}

// Envelope is the canonical form of one DLQ entry. Payload holds the raw
// payload bytes; its JSON form depends on PayloadEncoding.
//
// Malformed is set when decoding failed: the other fields then hold what
// could be read, and Raw the entry's original bytes so that export keeps it.
type Envelope struct {
	ID             string
	EventID        string
	Fingerprint    string
	PayloadVersion string
	ContentType    string
	Key            string
	// KeyEncoding is "" when Key is the record key as text, or "base64"
	// when the key is not UTF-8 (a Long or Avro key) and Key holds its
	// bytes in base64 (KeyBytes gives them back).
	KeyEncoding     string
	Origin          Origin
	FirstReceivedAt time.Time
	DeadLetteredAt  time.Time
	Attempts        int
	LastError       string
	ErrorClass      string
	Owner           string
	RecoverBy       time.Time
	SchemaInfo      string
	RedriveCount    int
	Properties      map[string]string
	// PropertyEncodings names the properties whose values are not UTF-8
	// (binary headers): each maps to "base64", and Properties holds the
	// bytes in base64 (PropertyBytes gives them back).
	PropertyEncodings map[string]string
	PayloadEncoding   string
	Payload           []byte

	// FingerprintComputed says Fingerprint was computed by dlqctl because
	// the entry carried none.
	FingerprintComputed bool

	Malformed string
	Raw       []byte
}

// wire is the JSON form, fields in the canonical envelope form, docs/json.md order.
type wire struct {
	Schema          string            `json:"schema"`
	ID              string            `json:"id"`
	EventID         string            `json:"event_id"`
	Fingerprint     string            `json:"fingerprint,omitempty"`
	PayloadVersion  string            `json:"payload_version,omitempty"`
	ContentType     string            `json:"content_type,omitempty"`
	Key             string            `json:"key,omitempty"`
	KeyEncoding     string            `json:"key_encoding,omitempty"`
	Origin          Origin            `json:"origin"`
	FirstReceivedAt string            `json:"first_received_at,omitempty"`
	DeadLetteredAt  string            `json:"dead_lettered_at,omitempty"`
	Attempts        int               `json:"attempts"`
	LastError       string            `json:"last_error"`
	ErrorClass      string            `json:"error_class"`
	Owner           string            `json:"owner,omitempty"`
	RecoverBy       string            `json:"recover_by,omitempty"`
	SchemaInfo      string            `json:"schema_info,omitempty"`
	RedriveCount    int               `json:"redrive_count"`
	Properties      map[string]string `json:"properties,omitempty"`
	PropEncodings   map[string]string `json:"property_encodings,omitempty"`
	PayloadEncoding string            `json:"payload_encoding"`
	Payload         json.RawMessage   `json:"payload"`
	Malformed       string            `json:"malformed,omitempty"`
	Raw             []byte            `json:"raw,omitempty"`
}

// MarshalJSON writes the canonical JSON form (docs/json.md). The payload is inlined verbatim for
// the json encoding; callers that print it should disable HTML escaping
// (report.WriteJSON does) so that the payload's bytes survive a round trip.
func (e Envelope) MarshalJSON() ([]byte, error) {
	w := wire{
		Schema: Schema, ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint,
		PayloadVersion: e.PayloadVersion, ContentType: e.ContentType, Key: e.Key, KeyEncoding: e.KeyEncoding, Origin: e.Origin,
		FirstReceivedAt: formatTime(e.FirstReceivedAt), DeadLetteredAt: formatTime(e.DeadLetteredAt),
		Attempts: e.Attempts, LastError: e.LastError, ErrorClass: e.ErrorClass, Owner: e.Owner,
		RecoverBy: formatTime(e.RecoverBy), SchemaInfo: e.SchemaInfo, RedriveCount: e.RedriveCount,
		Properties: e.Properties, PropEncodings: e.PropertyEncodings, PayloadEncoding: e.PayloadEncoding, Malformed: e.Malformed, Raw: e.Raw,
	}
	p, err := encodePayload(e.PayloadEncoding, e.Payload)
	if err != nil && e.Malformed == "" {
		return nil, err
	}
	if err != nil {
		// A malformed entry always prints; its bytes are in Raw.
		p = json.RawMessage("null")
	}
	w.Payload = p
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// UnmarshalJSON reads the canonical JSON form (docs/json.md) strictly: an error here means the
// envelope is malformed. Use Decode for input that may be malformed.
func (e *Envelope) UnmarshalJSON(data []byte) error {
	d, err := decodeWire(data)
	if err != nil {
		return err
	}
	*e = d
	return nil
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: not an RFC 3339 time: %q", field, s)
	}
	// In UTC the year must still be one RFC 3339 can write, or the
	// envelope could not be written back out.
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return time.Time{}, fmt.Errorf("%s: %q is outside the years 0000–9999 in UTC", field, s)
	}
	return t.UTC(), nil
}

func encodePayload(encoding string, payload []byte) (json.RawMessage, error) {
	switch encoding {
	case EncodingJSON:
		if !json.Valid(payload) {
			return nil, errors.New("payload_encoding json but payload is not valid JSON")
		}
		return json.RawMessage(payload), nil
	case EncodingUTF8:
		return marshalString(string(payload)), nil
	case EncodingBase64:
		return marshalString(base64.StdEncoding.EncodeToString(payload)), nil
	case "":
		if payload == nil {
			return json.RawMessage("null"), nil
		}
		return marshalString(base64.StdEncoding.EncodeToString(payload)), nil
	}
	return nil, fmt.Errorf("unknown payload_encoding %q", encoding)
}

func marshalString(s string) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// ClassifyPayload picks the encoding for raw payload bytes that arrive
// without one (Redis fields, Pulsar messages): json only when the bytes are
// already compact JSON, so that inlining them cannot change a byte and the
// fingerprint stays the same after export and import.
func ClassifyPayload(p []byte) string {
	// json.Valid accepts invalid UTF-8 inside strings; inlined, those bytes
	// would not survive a JSON writer, so such a payload is binary.
	if len(p) > 0 && utf8.Valid(p) && json.Valid(p) && isCompact(p) {
		return EncodingJSON
	}
	if utf8.Valid(p) {
		return EncodingUTF8
	}
	return EncodingBase64
}

// MarshalIndent is the envelope as 2-space indented JSON with a trailing
// newline, the form of a directory-queue file.
func MarshalIndent(e Envelope) ([]byte, error) {
	compact, err := e.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, compact, "", "  "); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// isCompact reports whether valid JSON text has no white space outside its
// strings, which is what json.Compact would remove.
func isCompact(p []byte) bool {
	inString, escaped := false, false
	for _, c := range p {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// BinaryEncoding is the encoding of a key or property whose bytes are not
// UTF-8: base64 (standard, padded), as for payloads.
const BinaryEncoding = "base64"

// KeyBytes is the key's bytes: Key itself, or decoded when KeyEncoding
// says base64.
func (e Envelope) KeyBytes() ([]byte, error) {
	return binaryValue(e.KeyEncoding, e.Key)
}

// PropertyBytes is the bytes of property k: its value, or decoded when
// PropertyEncodings says base64.
func (e Envelope) PropertyBytes(k string) ([]byte, error) {
	return binaryValue(e.PropertyEncodings[k], e.Properties[k])
}

func binaryValue(enc, v string) ([]byte, error) {
	switch enc {
	case "":
		return []byte(v), nil
	case BinaryEncoding:
		return base64.StdEncoding.DecodeString(v)
	}
	return nil, fmt.Errorf("unsupported encoding %q (want %q)", enc, BinaryEncoding)
}
