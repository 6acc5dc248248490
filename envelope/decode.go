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
				r.fail(fmt.Errorf("property_encodings: %q is not a property", TruncateForError(k)))
			} else if _, err := e.PropertyBytes(k); err != nil {
				r.fail(fmt.Errorf("property %q: encoding %q: %v", TruncateForError(k), enc, err))
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
		return "string " + TruncateForError(string(raw))
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number " + TruncateForError(string(raw))
}

func TruncateForError(s string) string {
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
	kv := NewKVReader(fields, names)
	kv.ReadCommon(&e)
	payload, ok := kv.Get(FPayload)
	if !ok {
		kv.Fail(errors.New("no payload field"))
	}
	kv.SetPayload(&e, []byte(payload))
	kv.Rest(&e, false)
	e = kv.Finish(e, nil)
	if e.Malformed != "" {
		e.Raw = rawFields(fields) // only a malformed entry needs its raw form
	}
	return e
}

// field numbers the envelope fields a KVReader reads, so that the names
// of each are found by index rather than hashed for every entry.
type Field uint8

const (
	FEventID Field = iota
	FFingerprint
	FPayload
	FPayloadVersion
	FPayloadEncoding
	FContentType
	FKey
	FOriginStream
	FOriginGroup
	FOriginConsumer
	FAttempts
	FLastError
	FErrorClass
	FFirstReceivedAt
	FDeadLetteredAt
	FOwner
	FRecoverBy
	FSchemaInfo
	FRedriveCount
	NumFields
)

// fieldKeys are the FieldNames keys of the fields, by number.
var fieldKeys = [NumFields]string{
	FieldEventID, FieldFingerprint, FieldPayload, FieldPayloadVersion, FieldPayloadEncoding, FieldContentType,
	FieldKey, FieldOriginStream, FieldOriginGroup, FieldOriginConsumer, FieldAttempts, FieldLastError,
	FieldErrorClass, FieldFirstReceivedAt, FieldDeadLetteredAt, FieldOwner, FieldRecoverBy, FieldSchemaInfo,
	FieldRedriveCount,
}

func (f Field) String() string { return fieldKeys[f] }

// NameTable is FieldNames by field number.
type NameTable [NumFields][]string

func (names FieldNames) Table() NameTable {
	var t NameTable
	for f, k := range fieldKeys {
		t[f] = names[k]
	}
	return t
}

// FieldStore holds an entry's key/values. Redis, Pulsar and SQS hand over a map;
// a Kafka record's dozen headers sit in two parallel slices, one value per
// name (the last), which a scan finds faster than hashing each name.
type FieldStore struct {
	M          map[string]string
	Keys, Vals []string
}

func MapStore(m map[string]string) FieldStore { return FieldStore{M: m} }

func (s *FieldStore) Lookup(k string) (string, bool) {
	if s.M != nil {
		v, ok := s.M[k]
		return v, ok
	}
	for i := range s.Keys {
		if s.Keys[i] == k {
			return s.Vals[i], true
		}
	}
	return "", false
}

func (s *FieldStore) Len() int {
	if s.M != nil {
		return len(s.M)
	}
	return len(s.Keys)
}

// put sets k (slice form): a name already there takes the new value.
func (s *FieldStore) Put(k, v string) {
	for i := range s.Keys {
		if s.Keys[i] == k {
			s.Vals[i] = v
			return
		}
	}
	s.Keys = append(s.Keys, k)
	s.Vals = append(s.Vals, v)
}

// KVReader reads envelope fields out of string key/values, remembering
// which keys it used and the first error.
type KVReader struct {
	Fields FieldStore
	Names  *NameTable
	// resolved, when set, gives for each field the index+1 in fields.keys
	// of the name it is read from (0: absent), worked out beforehand.
	Resolved *[NumFields]int8
	Used     UsedNames
	err      error
}

// UsedNames is the small set of keys that fields were read from; a slice
// beats a map at this size and allocates once per entry.
type UsedNames []string

func (u *UsedNames) Add(n string) { *u = append(*u, n) }

func (u UsedNames) Has(n string) bool {
	for _, x := range u {
		if x == n {
			return true
		}
	}
	return false
}

// NewKVReader reads fields by names; names is resolved here, once per
// entry — a decoder that reads many entries resolves it once instead.
func NewKVReader(fields map[string]string, names FieldNames) *KVReader {
	t := names.Table()
	return &KVReader{Fields: MapStore(fields), Names: &t, Used: make(UsedNames, 0, 24)}
}

func (kv *KVReader) Fail(err error) {
	if kv.err == nil {
		kv.err = err
	}
}

func (kv *KVReader) Get(f Field) (string, bool) {
	if kv.Resolved != nil {
		i := int(kv.Resolved[f]) - 1
		if i < 0 {
			return "", false
		}
		n, v := kv.Fields.Keys[i], kv.Fields.Vals[i]
		kv.Used.Add(n)
		if f != FPayload && !utf8.ValidString(v) {
			kv.Fail(fmt.Errorf("%s: invalid UTF-8", f))
		}
		return v, true
	}
	for _, n := range kv.Names[f] {
		if v, ok := kv.Fields.Lookup(n); ok {
			kv.Used.Add(n)
			if f != FPayload && !utf8.ValidString(v) {
				// Text fields must be text: two event IDs that differ only in
				// invalid bytes would otherwise print, and compare, the same.
				kv.Fail(fmt.Errorf("%s: invalid UTF-8", f))
			}
			return v, true
		}
	}
	return "", false
}

// present says whether the entry has field f, without reading it.
func (kv *KVReader) Present(f Field) bool {
	if kv.Resolved != nil {
		return kv.Resolved[f] > 0
	}
	for _, n := range kv.Names[f] {
		if _, ok := kv.Fields.Lookup(n); ok {
			return true
		}
	}
	return false
}

func (kv *KVReader) str(f Field) string { v, _ := kv.Get(f); return v }

func (kv *KVReader) int(f Field) int {
	v, ok := kv.Get(f)
	if !ok || v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		kv.Fail(fmt.Errorf("%s: want a whole number, got %q", f, TruncateForError(v)))
	}
	return n
}

func (kv *KVReader) time(f Field) time.Time {
	t, err := parseTime(f.String(), kv.str(f))
	if err != nil {
		kv.Fail(err)
	}
	return t
}

func (kv *KVReader) ReadCommon(e *Envelope) {
	e.EventID = kv.str(FEventID)
	e.Fingerprint = kv.str(FFingerprint)
	e.PayloadVersion = kv.str(FPayloadVersion)
	e.ContentType = kv.str(FContentType)
	e.Key = kv.str(FKey)
	e.Origin.Topic = kv.str(FOriginStream)
	e.Origin.Subscription = kv.str(FOriginGroup)
	e.Origin.Consumer = kv.str(FOriginConsumer)
	e.Attempts = kv.int(FAttempts)
	e.LastError = kv.str(FLastError)
	e.ErrorClass = kv.str(FErrorClass)
	e.FirstReceivedAt = kv.time(FFirstReceivedAt)
	e.DeadLetteredAt = kv.time(FDeadLetteredAt)
	e.Owner = kv.str(FOwner)
	e.RecoverBy = kv.time(FRecoverBy)
	e.SchemaInfo = kv.str(FSchemaInfo)
	e.RedriveCount = kv.int(FRedriveCount)
}

// setPayload takes raw payload bytes and checks them against a
// payload_encoding field when there is one, else classifies them.
func (kv *KVReader) SetPayload(e *Envelope, payload []byte) {
	e.Payload = payload
	e.PayloadEncoding = kv.str(FPayloadEncoding)
	switch e.PayloadEncoding {
	case "":
	case EncodingJSON:
		if !json.Valid(payload) {
			kv.Fail(errors.New("payload: payload_encoding json but not valid JSON"))
		}
		// Only compact JSON can be inlined without changing a byte; other
		// JSON text is kept as text (ClassifyPayload below).
	case EncodingUTF8:
		if utf8.Valid(payload) {
			return
		}
		kv.Fail(errors.New("payload: payload_encoding utf8 but not valid UTF-8"))
	case EncodingBase64:
		return
	default:
		kv.Fail(fmt.Errorf("payload_encoding: unknown %q (want json, utf8 or base64)", e.PayloadEncoding))
	}
	e.PayloadEncoding = ClassifyPayload(payload)
}

// rest turns the keys no field used into properties; checkOnly only
// checks them (a lean envelope has no properties).
//
// Of several properties that are not UTF-8, the reason names the least by
// name, so that it is the same whatever order a map gives them in.
func (kv *KVReader) Rest(e *Envelope, checkOnly bool) {
	bad, hasBad := "", false
	defer func() {
		if hasBad {
			kv.Fail(fmt.Errorf("property %q: invalid UTF-8", TruncateForError(bad)))
		}
	}()
	add := func(k, v string) {
		if kv.Used.Has(k) {
			return
		}
		if (!utf8.ValidString(k) || !utf8.ValidString(v)) && (!hasBad || k < bad) {
			bad, hasBad = k, true
		}
		if checkOnly {
			return
		}
		if e.Properties == nil {
			e.Properties = map[string]string{}
		}
		e.Properties[k] = v
	}
	if kv.Fields.M != nil {
		for k, v := range kv.Fields.M {
			add(k, v)
		}
		return
	}
	for i, k := range kv.Fields.Keys {
		add(k, kv.Fields.Vals[i])
	}
}

// MalformedMarker is the field under which an import keeps the reason of
// an entry that was malformed where it came from, so it stays malformed.
const MalformedMarker = "dlqctl_malformed"

func (kv *KVReader) Finish(e Envelope, raw []byte) Envelope {
	if reason, ok := kv.Fields.Lookup(MalformedMarker); ok {
		if reason == "" {
			reason = "malformed where it was imported from"
		}
		kv.Fail(errors.New(reason))
	}
	if e.EventID == "" {
		kv.Fail(errors.New("no event_id"))
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
