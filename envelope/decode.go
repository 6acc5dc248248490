package envelope

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DecodeFile decodes one directory-queue file. It never fails: an entry
// that cannot be read comes back with Malformed set to the reason and Raw
// holding the file's bytes, so that it is still listed and exported.
func DecodeFile(id string, data []byte) Envelope {
	e, err := decodeWire(data)
	e.ID = id
	if err != nil {
		e.Malformed = err.Error()
		e.Raw = append([]byte(nil), data...)
		return e
	}
	e.FillFingerprint()
	return e
}

// decodeWire reads the canonical JSON form (docs/json.md) field by field so that the error
// names the field that is wrong, and returns whatever it could read.
func decodeWire(data []byte) (Envelope, error) {
	var e Envelope
	if len(bytes.TrimSpace(data)) == 0 {
		return e, errors.New("empty file")
	}
	if !utf8.Valid(data) {
		return e, errors.New("invalid UTF-8 in envelope")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return e, fmt.Errorf("not a JSON object (found %s)", ute.Value)
		}
		return e, fmt.Errorf("invalid JSON: %v", err)
	}
	r := fieldReader{fields: fields}
	if s := r.str("schema"); s != "" && s != Schema {
		r.fail(fmt.Errorf("schema: unsupported %q (want %q)", s, Schema))
	}
	e.ID = r.str("id")
	e.EventID = r.str("event_id")
	e.Fingerprint = r.str("fingerprint")
	e.PayloadVersion = r.str("payload_version")
	e.ContentType = r.str("content_type")
	e.Key = r.str("key")
	e.KeyEncoding = r.str("key_encoding")
	if _, err := e.KeyBytes(); err != nil {
		r.fail(fmt.Errorf("key: key_encoding %q: %v", e.KeyEncoding, err))
	}
	if raw, ok := fields["origin"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &e.Origin); err != nil {
			r.fail(fmt.Errorf("origin: want an object with string fields: %v", err))
		}
	}
	e.FirstReceivedAt = r.time("first_received_at")
	e.DeadLetteredAt = r.time("dead_lettered_at")
	e.Attempts = r.int("attempts")
	e.LastError = r.str("last_error")
	e.ErrorClass = r.str("error_class")
	e.Owner = r.str("owner")
	e.RecoverBy = r.time("recover_by")
	e.SchemaInfo = r.str("schema_info")
	e.RedriveCount = r.int("redrive_count")
	if raw, ok := fields["properties"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &e.Properties); err != nil {
			r.fail(fmt.Errorf("properties: want an object of strings: %v", err))
		}
	}
	if raw, ok := fields["property_encodings"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &e.PropertyEncodings); err != nil {
			r.fail(fmt.Errorf("property_encodings: want an object of strings: %v", err))
		}
		for k, enc := range e.PropertyEncodings {
			if _, has := e.Properties[k]; !has {
				r.fail(fmt.Errorf("property_encodings: %q is not a property", truncateForError(k)))
			} else if _, err := e.PropertyBytes(k); err != nil {
				r.fail(fmt.Errorf("property %q: encoding %q: %v", truncateForError(k), enc, err))
			}
		}
	}
	// The payload is read even when a field before it was wrong, so that a
	// malformed entry still shows as much as can be read.
	enc, payload, err := decodePayload(r.str("payload_encoding"), fields["payload"])
	if err != nil {
		r.fail(err)
	}
	e.PayloadEncoding, e.Payload = enc, payload
	if r.err == nil && e.EventID == "" {
		r.fail(errors.New("no event_id"))
	}
	return e, r.err
}

// fieldReader reads typed fields and keeps the first error.
type fieldReader struct {
	fields map[string]json.RawMessage
	err    error
}

func (r *fieldReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *fieldReader) str(name string) string {
	raw, ok := r.fields[name]
	if !ok || string(raw) == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		r.fail(fmt.Errorf("%s: want a string, got %s", name, jsonKind(raw)))
	}
	return s
}

func (r *fieldReader) int(name string) int {
	raw, ok := r.fields[name]
	if !ok || string(raw) == "null" {
		return 0
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		r.fail(fmt.Errorf("%s: want a whole number, got %s", name, jsonKind(raw)))
	}
	return n
}

func (r *fieldReader) time(name string) (t time.Time) {
	s := r.str(name)
	t, err := parseTime(name, s)
	if err != nil {
		r.fail(err)
	}
	return t
}

func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "string " + truncateForError(string(raw))
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number " + truncateForError(string(raw))
}

func truncateForError(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= 40 {
		return s
	}
	cut := 40
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// decodePayload turns the JSON form of a payload into raw bytes. For the
// json encoding the raw bytes are the compact form of the inlined JSON: it
// is what any JSON writer reproduces, so fingerprints survive a round trip.
func decodePayload(encoding string, raw json.RawMessage) (string, []byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		if encoding == "" || encoding == EncodingJSON {
			return EncodingJSON, []byte("null"), nil
		}
		return encoding, []byte{}, nil
	}
	isString := raw[0] == '"'
	if encoding == "" {
		encoding = EncodingJSON
		if isString {
			encoding = EncodingUTF8
		}
	}
	switch encoding {
	case EncodingJSON:
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return "", nil, fmt.Errorf("payload: invalid JSON: %v", err)
		}
		return encoding, buf.Bytes(), nil
	case EncodingUTF8, EncodingBase64:
		if !isString {
			return "", nil, fmt.Errorf("payload: encoding %s wants a JSON string, got %s", encoding, jsonKind(raw))
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, fmt.Errorf("payload: %v", err)
		}
		if encoding == EncodingUTF8 {
			return encoding, []byte(s), nil
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "", nil, fmt.Errorf("payload: invalid base64: %v", err)
		}
		return encoding, b, nil
	}
	return "", nil, fmt.Errorf("payload_encoding: unknown %q (want json, utf8 or base64)", encoding)
}

// FieldNames maps each envelope field to the names it may have in a
// key/value entry (a Redis stream entry, Pulsar properties), first match wins.
type FieldNames map[string][]string

// Field keys of FieldNames.
const (
	FieldEventID         = "event_id"
	FieldFingerprint     = "fingerprint"
	FieldPayload         = "payload"
	FieldPayloadVersion  = "payload_version"
	FieldPayloadEncoding = "payload_encoding"
	FieldContentType     = "content_type"
	FieldKey             = "key"
	FieldOriginStream    = "origin_stream"
	FieldOriginGroup     = "origin_group"
	FieldOriginConsumer  = "origin_consumer"
	FieldAttempts        = "attempts"
	FieldLastError       = "last_error"
	FieldErrorClass      = "error_class"
	FieldFirstReceivedAt = "first_received_at"
	FieldDeadLetteredAt  = "dead_lettered_at"
	FieldOwner           = "owner"
	FieldRecoverBy       = "recover_by"
	FieldSchemaInfo      = "schema_info"
	FieldRedriveCount    = "redrive_count"
)

// DefaultFieldNames are the envelope contract's Redis field names and aliases.
func DefaultFieldNames() FieldNames {
	return FieldNames{
		FieldEventID:         {"event_id", "eventId"},
		FieldFingerprint:     {"fingerprint"},
		FieldPayload:         {"payload"},
		FieldPayloadVersion:  {"payload_version"},
		FieldPayloadEncoding: {"payload_encoding"},
		FieldContentType:     {"content_type"},
		FieldKey:             {"key"},
		FieldOriginStream:    {"origin_stream"},
		FieldOriginGroup:     {"origin_group"},
		FieldOriginConsumer:  {"origin_consumer"},
		FieldAttempts:        {"attempts", "delivery_count"},
		FieldLastError:       {"last_error", "reason", "error"},
		FieldErrorClass:      {"error_class", "category"},
		FieldFirstReceivedAt: {"first_received_at"},
		FieldDeadLetteredAt:  {"dead_lettered_at"},
		FieldOwner:           {"owner"},
		FieldRecoverBy:       {"recover_by"},
		FieldSchemaInfo:      {"schema_info"},
		FieldRedriveCount:    {"redrive_count"},
	}
}

// Merge returns names with the entries of override replacing its own.
func (names FieldNames) Merge(override FieldNames) FieldNames {
	out := FieldNames{}
	for k, v := range names {
		out[k] = v
	}
	for k, v := range override {
		out[k] = v
	}
	return out
}

// Complete returns the default names with those given in place of theirs
// (an empty list keeps the default), after checking every given key is an
// envelope field.
func (names FieldNames) Complete() (FieldNames, error) {
	if err := names.Validate(); err != nil {
		return nil, err
	}
	out := DefaultFieldNames()
	for k, v := range names {
		if len(v) > 0 {
			out[k] = v
		}
	}
	return out, nil
}

// Validate reports an override key that is not an envelope field.
func (names FieldNames) Validate() error {
	known := DefaultFieldNames()
	for k := range names {
		if _, ok := known[k]; !ok {
			keys := make([]string, 0, len(known))
			for k := range known {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return fmt.Errorf("unknown envelope field %q in field names (known: %v)", k, keys)
		}
	}
	return nil
}

// DecodeFields decodes a key/value entry (a Redis stream entry) using names.
// Fields that name no envelope field become properties. It never fails; see
// DecodeFile.
func DecodeFields(id, backend string, fields map[string]string, names FieldNames) Envelope {
	e := Envelope{ID: id, Origin: Origin{Backend: backend}}
	kv := newKVReader(fields, names)
	kv.readCommon(&e)
	payload, ok := kv.get(fPayload)
	if !ok {
		kv.fail(errors.New("no payload field"))
	}
	kv.setPayload(&e, []byte(payload))
	kv.rest(&e, false)
	e = kv.finish(e, nil)
	if e.Malformed != "" {
		e.Raw = rawFields(fields) // only a malformed entry needs its raw form
	}
	return e
}

// field numbers the envelope fields a kvReader reads, so that the names
// of each are found by index rather than hashed for every entry.
type field uint8

const (
	fEventID field = iota
	fFingerprint
	fPayload
	fPayloadVersion
	fPayloadEncoding
	fContentType
	fKey
	fOriginStream
	fOriginGroup
	fOriginConsumer
	fAttempts
	fLastError
	fErrorClass
	fFirstReceivedAt
	fDeadLetteredAt
	fOwner
	fRecoverBy
	fSchemaInfo
	fRedriveCount
	numFields
)

// fieldKeys are the FieldNames keys of the fields, by number.
var fieldKeys = [numFields]string{
	FieldEventID, FieldFingerprint, FieldPayload, FieldPayloadVersion, FieldPayloadEncoding, FieldContentType,
	FieldKey, FieldOriginStream, FieldOriginGroup, FieldOriginConsumer, FieldAttempts, FieldLastError,
	FieldErrorClass, FieldFirstReceivedAt, FieldDeadLetteredAt, FieldOwner, FieldRecoverBy, FieldSchemaInfo,
	FieldRedriveCount,
}

func (f field) String() string { return fieldKeys[f] }

// nameTable is FieldNames by field number.
type nameTable [numFields][]string

func (names FieldNames) table() nameTable {
	var t nameTable
	for f, k := range fieldKeys {
		t[f] = names[k]
	}
	return t
}

// fieldStore holds an entry's key/values. Redis, Pulsar and SQS hand over a map;
// a Kafka record's dozen headers sit in two parallel slices, one value per
// name (the last), which a scan finds faster than hashing each name.
type fieldStore struct {
	m          map[string]string
	keys, vals []string
}

func mapStore(m map[string]string) fieldStore { return fieldStore{m: m} }

func (s *fieldStore) lookup(k string) (string, bool) {
	if s.m != nil {
		v, ok := s.m[k]
		return v, ok
	}
	for i := range s.keys {
		if s.keys[i] == k {
			return s.vals[i], true
		}
	}
	return "", false
}

func (s *fieldStore) len() int {
	if s.m != nil {
		return len(s.m)
	}
	return len(s.keys)
}

// put sets k (slice form): a name already there takes the new value.
func (s *fieldStore) put(k, v string) {
	for i := range s.keys {
		if s.keys[i] == k {
			s.vals[i] = v
			return
		}
	}
	s.keys = append(s.keys, k)
	s.vals = append(s.vals, v)
}

// kvReader reads envelope fields out of string key/values, remembering
// which keys it used and the first error.
type kvReader struct {
	fields fieldStore
	names  *nameTable
	// resolved, when set, gives for each field the index+1 in fields.keys
	// of the name it is read from (0: absent), worked out beforehand.
	resolved *[numFields]int8
	used     usedNames
	err      error
}

// usedNames is the small set of keys that fields were read from; a slice
// beats a map at this size and allocates once per entry.
type usedNames []string

func (u *usedNames) add(n string) { *u = append(*u, n) }

func (u usedNames) has(n string) bool {
	for _, x := range u {
		if x == n {
			return true
		}
	}
	return false
}

// newKVReader reads fields by names; names is resolved here, once per
// entry — a decoder that reads many entries resolves it once instead.
func newKVReader(fields map[string]string, names FieldNames) *kvReader {
	t := names.table()
	return &kvReader{fields: mapStore(fields), names: &t, used: make(usedNames, 0, 24)}
}

func (kv *kvReader) fail(err error) {
	if kv.err == nil {
		kv.err = err
	}
}

func (kv *kvReader) get(f field) (string, bool) {
	if kv.resolved != nil {
		i := int(kv.resolved[f]) - 1
		if i < 0 {
			return "", false
		}
		n, v := kv.fields.keys[i], kv.fields.vals[i]
		kv.used.add(n)
		if f != fPayload && !utf8.ValidString(v) {
			kv.fail(fmt.Errorf("%s: invalid UTF-8", f))
		}
		return v, true
	}
	for _, n := range kv.names[f] {
		if v, ok := kv.fields.lookup(n); ok {
			kv.used.add(n)
			if f != fPayload && !utf8.ValidString(v) {
				// Text fields must be text: two event IDs that differ only in
				// invalid bytes would otherwise print, and compare, the same.
				kv.fail(fmt.Errorf("%s: invalid UTF-8", f))
			}
			return v, true
		}
	}
	return "", false
}

// present says whether the entry has field f, without reading it.
func (kv *kvReader) present(f field) bool {
	if kv.resolved != nil {
		return kv.resolved[f] > 0
	}
	for _, n := range kv.names[f] {
		if _, ok := kv.fields.lookup(n); ok {
			return true
		}
	}
	return false
}

func (kv *kvReader) str(f field) string { v, _ := kv.get(f); return v }

func (kv *kvReader) int(f field) int {
	v, ok := kv.get(f)
	if !ok || v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		kv.fail(fmt.Errorf("%s: want a whole number, got %q", f, truncateForError(v)))
	}
	return n
}

func (kv *kvReader) time(f field) time.Time {
	t, err := parseTime(f.String(), kv.str(f))
	if err != nil {
		kv.fail(err)
	}
	return t
}

func (kv *kvReader) readCommon(e *Envelope) {
	e.EventID = kv.str(fEventID)
	e.Fingerprint = kv.str(fFingerprint)
	e.PayloadVersion = kv.str(fPayloadVersion)
	e.ContentType = kv.str(fContentType)
	e.Key = kv.str(fKey)
	e.Origin.Topic = kv.str(fOriginStream)
	e.Origin.Subscription = kv.str(fOriginGroup)
	e.Origin.Consumer = kv.str(fOriginConsumer)
	e.Attempts = kv.int(fAttempts)
	e.LastError = kv.str(fLastError)
	e.ErrorClass = kv.str(fErrorClass)
	e.FirstReceivedAt = kv.time(fFirstReceivedAt)
	e.DeadLetteredAt = kv.time(fDeadLetteredAt)
	e.Owner = kv.str(fOwner)
	e.RecoverBy = kv.time(fRecoverBy)
	e.SchemaInfo = kv.str(fSchemaInfo)
	e.RedriveCount = kv.int(fRedriveCount)
}

// setPayload takes raw payload bytes and checks them against a
// payload_encoding field when there is one, else classifies them.
func (kv *kvReader) setPayload(e *Envelope, payload []byte) {
	e.Payload = payload
	e.PayloadEncoding = kv.str(fPayloadEncoding)
	switch e.PayloadEncoding {
	case "":
	case EncodingJSON:
		if !json.Valid(payload) {
			kv.fail(errors.New("payload: payload_encoding json but not valid JSON"))
		}
		// Only compact JSON can be inlined without changing a byte; other
		// JSON text is kept as text (ClassifyPayload below).
	case EncodingUTF8:
		if utf8.Valid(payload) {
			return
		}
		kv.fail(errors.New("payload: payload_encoding utf8 but not valid UTF-8"))
	case EncodingBase64:
		return
	default:
		kv.fail(fmt.Errorf("payload_encoding: unknown %q (want json, utf8 or base64)", e.PayloadEncoding))
	}
	e.PayloadEncoding = ClassifyPayload(payload)
}

// rest turns the keys no field used into properties; checkOnly only
// checks them (a lean envelope has no properties).
func (kv *kvReader) rest(e *Envelope, checkOnly bool) {
	add := func(k, v string) {
		if kv.used.has(k) {
			return
		}
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			kv.fail(fmt.Errorf("property %q: invalid UTF-8", truncateForError(k)))
		}
		if checkOnly {
			return
		}
		if e.Properties == nil {
			e.Properties = map[string]string{}
		}
		e.Properties[k] = v
	}
	if kv.fields.m != nil {
		for k, v := range kv.fields.m {
			add(k, v)
		}
		return
	}
	for i, k := range kv.fields.keys {
		add(k, kv.fields.vals[i])
	}
}

// MalformedMarker is the field under which an import keeps the reason of
// an entry that was malformed where it came from, so it stays malformed.
const MalformedMarker = "dlqctl_malformed"

func (kv *kvReader) finish(e Envelope, raw []byte) Envelope {
	if reason, ok := kv.fields.lookup(MalformedMarker); ok {
		if reason == "" {
			reason = "malformed where it was imported from"
		}
		kv.fail(errors.New(reason))
	}
	if e.EventID == "" {
		kv.fail(errors.New("no event_id"))
	}
	if kv.err != nil {
		e.Malformed = kv.err.Error()
		e.Raw = raw
		return e
	}
	e.FillFingerprint()
	return e
}

// rawFields is the JSON object of a key/value entry, kept with malformed
// entries so that export loses nothing.
func rawFields(fields map[string]string) []byte {
	b, _ := json.Marshal(fields) // a map of strings always marshals
	return b
}

// DecodeRecord reads one line of `dlqctl export`. A record that carries
// "malformed" is an entry that could not be decoded at export time: it comes
// back as such, with its original bytes in Raw. Any other record must be a
// valid envelope; the error says which field is wrong.
func DecodeRecord(line []byte) (Envelope, error) {
	var head struct {
		ID        string `json:"id"`
		Malformed string `json:"malformed"`
		Raw       []byte `json:"raw"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return Envelope{}, fmt.Errorf("not an envelope: %v", err)
	}
	e, err := decodeWire(line)
	if head.Malformed != "" {
		e.ID, e.Malformed, e.Raw = head.ID, head.Malformed, head.Raw
		return e, nil
	}
	if err != nil {
		return Envelope{}, err
	}
	if e.ID == "" {
		return Envelope{}, errors.New("no id")
	}
	e.FillFingerprint()
	return e, nil
}
