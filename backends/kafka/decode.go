package kafkadlq

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/envelope"
)

// Header names that Spring Kafka's DeadLetterPublishingRecoverer writes on
// a dead letter. The partition is a 4-byte and the offset and timestamp
// are 8-byte big-endian integers; the rest are UTF-8 strings.
const (
	SpringPrefix            = "kafka_dlt-"
	SpringOriginalTopic     = "kafka_dlt-original-topic"
	SpringOriginalPartition = "kafka_dlt-original-partition"
	SpringOriginalOffset    = "kafka_dlt-original-offset"
	SpringOriginalTimestamp = "kafka_dlt-original-timestamp"
	SpringOriginalGroup     = "kafka_dlt-original-consumer-group"
	SpringExceptionFQCN     = "kafka_dlt-exception-fqcn"
	SpringExceptionMessage  = "kafka_dlt-exception-message"
)

// Header names of a Kafka Connect dead-letter queue
// (errors.deadletterqueue.context.headers.enable=true); all strings.
const (
	ConnectPrefix           = "__connect.errors."
	ConnectTopic            = "__connect.errors.topic"
	ConnectPartition        = "__connect.errors.partition"
	ConnectOffset           = "__connect.errors.offset"
	ConnectConnectorName    = "__connect.errors.connector.name"
	ConnectExceptionClass   = "__connect.errors.exception.class.name"
	ConnectExceptionMessage = "__connect.errors.exception.message"
)

// Header names Karafka's DLQ writes; all strings.
const (
	KarafkaPrefix        = "source_"
	KarafkaTopic         = "source_topic"
	KarafkaPartition     = "source_partition"
	KarafkaOffset        = "source_offset"
	KarafkaConsumerGroup = "source_consumer_group"
)

// KafkaHeader is one record header, franz-go's own type: a record's
// headers are decoded where the client put them, with no copy. Kafka
// allows a name more than once; the last one wins when decoding, as the
// newest dead-lettering wrote it.
type KafkaHeader = kgo.RecordHeader

// KafkaRecord is what the decoder reads off one DLQ record: the fields of
// a kgo.Record it uses, so that tests and the fuzzer build one easily.
type KafkaRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []KafkaHeader
	Timestamp time.Time
}

// KafkaID is the locator of a record: "partition:offset".
func KafkaID(partition int32, offset int64) string {
	return strconv.FormatInt(int64(partition), 10) + ":" + strconv.FormatInt(offset, 10)
}

// ParseKafkaID parses "partition:offset".
func ParseKafkaID(id string) (partition int32, offset int64, ok bool) {
	ps, os, found := strings.Cut(id, ":")
	if !found {
		return 0, 0, false
	}
	p, err := strconv.ParseInt(ps, 10, 32)
	if err != nil || p < 0 {
		return 0, 0, false
	}
	o, err := strconv.ParseInt(os, 10, 64)
	if err != nil || o < 0 {
		return 0, 0, false
	}
	return int32(p), o, true
}

// DeadLetterHeader reports whether a header was added by dead-lettering
// (Spring Kafka, Kafka Connect, Karafka, a share group's broker) rather
// than by the original producer: a redrive leaves those behind.
func DeadLetterHeader(name string) bool {
	return strings.HasPrefix(name, SpringPrefix) || strings.HasPrefix(name, ConnectPrefix) || strings.HasPrefix(name, KarafkaPrefix) ||
		shareHeader(name)
}

// ParseKafkaEventIDSource parses --event-id-from for Kafka:
// header:NAME, json:PATH or key ("" reads the event_id/eventId header).
func ParseKafkaEventIDSource(s string) (envelope.EventIDSource, error) {
	switch {
	case s == "":
		return envelope.EventIDSource{Kind: "property"}, nil
	case s == "key":
		return envelope.EventIDSource{Kind: "key"}, nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if ok && name != "" {
		switch kind {
		case "header":
			// A header is what a property is elsewhere.
			return envelope.EventIDSource{Kind: "property", Name: name}, nil
		case "json":
			return envelope.EventIDSource{Kind: "json", Name: name}, nil
		}
	}
	return envelope.EventIDSource{}, fmt.Errorf("--event-id-from %q: want header:NAME, json:PATH or key", s)
}

// KafkaDecoder maps the records of a Kafka DLQ to canonical envelopes
// (docs/json.md). It resolves the field names once, for every record it
// decodes; it holds no per-record state, so one decoder serves several
// goroutines.
type KafkaDecoder struct {
	from  envelope.EventIDSource
	names envelope.FieldNames
	table envelope.NameTable
	// aliasOf gives, for each name a field may be read from, the field
	// and the name's rank among that field's names (first wins); nil when
	// a name serves more than one field, which the general lookup handles.
	aliasOf map[string]fieldAlias
	// textOnly names the headers that must be text (envelope fields, the
	// event ID's): a binary value there makes the entry malformed, while
	// any other binary header is kept in base64.
	textOnly map[string]bool
	scratch  sync.Pool // of *decodeScratch
	// plain turns off every shortcut (names resolved ahead, headers in
	// slices, the compact-JSON check): what is left is the general
	// key/value reading the shortcuts must equal. Only tests set it.
	plain bool
}

type fieldAlias struct {
	f    envelope.Field
	rank int
}

// decodeScratch is Decode's working space for a record's headers. Go's
// escape analysis puts it on the heap (envelope.KVReader's methods leak their
// receiver's contents), and three allocations of it per record cost a
// scan more than the pool does.
type decodeScratch struct {
	dlText, keys, vals [smallHeaders]string
	dlValid            [smallHeaders]bool
	dlRoles            [smallHeaders]dlRole
	used               [envelope.NumFields + 4]string
	resolved           [envelope.NumFields]int8
	binary             []string // names of headers kept in base64
}

// NewKafkaDecoder returns a decoder that takes event IDs from from and
// envelope fields from the headers names gives.
func NewKafkaDecoder(from envelope.EventIDSource, names envelope.FieldNames) *KafkaDecoder {
	d := &KafkaDecoder{from: from, names: names, table: names.Table(), aliasOf: map[string]fieldAlias{},
		textOnly: map[string]bool{envelope.ImportedFromProperty: true, envelope.MalformedMarker: true}}
	for _, ns := range d.table {
		for _, n := range ns {
			d.textOnly[n] = true
		}
	}
	if from.Kind == "property" && from.Name != "" {
		d.textOnly[from.Name] = true
	}
	for f, ns := range d.table {
		for rank, n := range ns {
			if a, ok := d.aliasOf[n]; ok && a.f != envelope.Field(f) {
				d.aliasOf = nil
				return d
			}
			if _, ok := d.aliasOf[n]; !ok {
				d.aliasOf[n] = fieldAlias{envelope.Field(f), rank}
			}
		}
	}
	return d
}

// Lean is Decode without what a summary never reads: the envelope has no
// Properties, no PayloadEncoding and no Raw, and is otherwise what Decode
// returns — Malformed included, since every check still runs. A scan for
// stats or for conflicts spends most of its decoding on those three.
func (d *KafkaDecoder) Lean(r KafkaRecord) envelope.Envelope { return d.decode(r, true) }

// FromKafka decodes one record; see KafkaDecoder.Decode.
func FromKafka(r KafkaRecord, from envelope.EventIDSource, names envelope.FieldNames) envelope.Envelope {
	return NewKafkaDecoder(from, names).Decode(r)
}

// smallHeaders is how many headers of each kind a record's decoding keeps
// on the stack; a record with more still decodes, on the heap.
const smallHeaders = 16

// Decode maps a record to the canonical envelope: the dead-lettering
// headers of Spring Kafka, Kafka Connect, Karafka or a share group's broker
// give the origin, the error and its class; headers named like envelope
// fields fill them; the rest become properties. The id is partition:offset, the record key the
// key, and the record timestamp the dead-letter time unless a header says
// otherwise. It never fails: what does not decode makes the envelope
// malformed, with the reason.
//
// It runs once per record of every scan, so it allocates little: the key
// and the header values are substrings of one string, the numbers shown as
// properties of another, the headers are looked up in slices on the stack,
// and the properties map is sized once.
func (d *KafkaDecoder) Decode(r KafkaRecord) envelope.Envelope { return d.decode(r, false) }

// decode is Decode, or Lean when lean: the record's text in one string,
// its headers sorted into the dead-lettering ones and the rest, then the
// envelope field by field. The stack buffers and the pooled scratch are
// lent to each step, so the split costs no allocation.
func (d *KafkaDecoder) decode(r KafkaRecord, lean bool) envelope.Envelope {
	txt := newRecordText(r)
	e := envelope.Envelope{ID: txt.id, Origin: envelope.Origin{Backend: "kafka"}}
	sc := d.getScratch()
	defer d.putScratch(sc)
	var dlBuf [smallHeaders]KafkaHeader
	dl := deadLettering{h: dlBuf[:0], roles: sc.dlRoles[:0], text: sc.dlText[:0], valid: sc.dlValid[:0]}
	kv := envelope.KVReader{Names: &d.table, Used: sc.used[:0]}
	dl = d.sortHeaders(r, &txt, sc, dl, &kv)
	kv.ReadCommon(&e)
	d.setPayload(&e, &kv, r.Value, lean)
	if e.Key == "" {
		e.Key = txt.key
		if !utf8.ValidString(txt.key) {
			// A Long or Avro key: its bytes in base64, as for payloads.
			e.Key, e.KeyEncoding = base64.StdEncoding.EncodeToString(r.Key), envelope.BinaryEncoding
		}
	}
	orig := dl.apply(&e, &kv, r.Timestamp)
	if !lean && (len(dl.h) > 0 || kv.Fields.Len() > len(kv.Used)) {
		// Room for every property at once rather than growing the map.
		e.Properties = make(map[string]string, max(kv.Fields.Len()-len(kv.Used), 0)+len(dl.h))
	}
	kv.Rest(&e, lean)
	if !lean {
		setBinaryEncodings(&e, sc.binary)
	}
	dl.setProperties(&e, &kv, orig, lean)
	if len(e.Properties) == 0 {
		e.Properties = nil
	}
	d.finish(&e, &kv, r, txt.key)
	if e.Malformed != "" && !lean {
		e.Raw = rawHeaders(r)
	}
	return e
}

// recordText is a record's key and header values as substrings of one
// string, one allocation for all of them, and its locator. The locator is
// a string of its own: it is what readers keep of every record
// (discover's groups keep the id of each entry they count), and as a
// slice of the text it would keep every record's headers alive, a stack
// trace included.
type recordText struct {
	all, id, key string
	values       int // where the header values start in all
}

func newRecordText(r KafkaRecord) recordText {
	var idBuf [40]byte
	id := strconv.AppendInt(idBuf[:0], int64(r.Partition), 10)
	id = append(id, ':')
	id = strconv.AppendInt(id, r.Offset, 10)
	n := len(r.Key)
	for _, h := range r.Headers {
		n += len(h.Value)
	}
	var arena strings.Builder
	arena.Grow(n)
	arena.Write(r.Key)
	for _, h := range r.Headers {
		arena.Write(h.Value)
	}
	all := arena.String()
	return recordText{all: all, id: string(id), key: all[:len(r.Key)], values: len(r.Key)}
}

// getScratch is a decodeScratch from the pool; putScratch gives it back
// holding no record's strings.
func (d *KafkaDecoder) getScratch() *decodeScratch {
	if sc, _ := d.scratch.Get().(*decodeScratch); sc != nil {
		return sc
	}
	return new(decodeScratch)
}

func (d *KafkaDecoder) putScratch(sc *decodeScratch) {
	clear(sc.binary)
	*sc = decodeScratch{binary: sc.binary[:0]}
	d.scratch.Put(sc)
}

// sortHeaders puts the dead-lettering headers into dl, in record order,
// and the others into kv by name, the last value of each; a binary value
// of the others is kept in base64 and its name in sc.binary. dl comes in
// and goes out by value: through a pointer, its stack buffer would move
// to the heap.
func (d *KafkaDecoder) sortHeaders(r KafkaRecord, txt *recordText, sc *decodeScratch, dl deadLettering, kv *envelope.KVReader) deadLettering {
	if d.plain || len(r.Headers) > 2*smallHeaders && len(r.Headers)-countDeadLettering(r.Headers) > 2*smallHeaders {
		// Past a few dozen names a map beats scanning the slices.
		kv.Fields.M = make(map[string]string, len(r.Headers))
	} else {
		kv.Fields.Keys, kv.Fields.Vals = sc.keys[:0], sc.vals[:0]
	}
	var headerErr error
	at := txt.values
	for _, h := range r.Headers {
		v := txt.all[at : at+len(h.Value)]
		at += len(h.Value)
		// Every role's name is a dead-lettering header's: the role, worked
		// out once here, spares the prefix checks for most of them.
		if r := roleOf(h.Key); r != noRole || DeadLetterHeader(h.Key) {
			dl.h = append(dl.h, h)
			dl.roles = append(dl.roles, r)
			dl.text = append(dl.text, v)
			dl.valid = append(dl.valid, utf8.ValidString(v))
			continue
		}
		if !utf8.ValidString(h.Key) {
			headerErr = errors.Join(headerErr, fmt.Errorf("header %q: name is not UTF-8", envelope.TruncateForError(h.Key)))
			continue
		}
		if !utf8.ValidString(v) && !d.textOnly[h.Key] {
			// A binary header (an Avro schema ID, a Long): kept, in
			// base64, and written back as the same bytes on redrive.
			v = base64.StdEncoding.EncodeToString(h.Value)
			sc.binary = append(sc.binary, h.Key)
		}
		if kv.Fields.M != nil {
			kv.Fields.M[h.Key] = v
		} else {
			kv.Fields.Put(h.Key, v)
		}
	}
	if d.aliasOf != nil && kv.Fields.M == nil {
		// Each name is looked up once, rather than each field's names
		// compared with every header.
		var rank [envelope.NumFields]int
		for i, k := range kv.Fields.Keys {
			if a, ok := d.aliasOf[k]; ok && (sc.resolved[a.f] == 0 || a.rank < rank[a.f]) {
				sc.resolved[a.f], rank[a.f] = int8(i+1), a.rank
			}
		}
		kv.Resolved = &sc.resolved
	}
	if headerErr != nil {
		kv.Fail(headerErr)
	}
	return dl
}

// countDeadLettering is how many of hs are dead-lettering headers.
func countDeadLettering(hs []KafkaHeader) int {
	n := 0
	for _, h := range hs {
		if DeadLetterHeader(h.Key) {
			n++
		}
	}
	return n
}

// setPayload sets e's payload and, unless lean, its encoding: the one a
// payload_encoding header names, else the one its bytes have.
func (d *KafkaDecoder) setPayload(e *envelope.Envelope, kv *envelope.KVReader, value []byte, lean bool) {
	switch {
	case kv.Present(envelope.FPayloadEncoding):
		kv.SetPayload(e, value)
		if lean {
			e.PayloadEncoding = ""
		}
	case d.plain:
		kv.SetPayload(e, value)
	case lean:
		// Without a payload_encoding, classifying the payload never makes
		// the entry malformed: a lean envelope skips it.
		e.Payload = value
	default:
		// What SetPayload does without a payload_encoding, faster.
		e.Payload = value
		e.PayloadEncoding = kafkaPayloadEncoding(value)
	}
}

// setBinaryEncodings marks the properties whose values are a binary
// header's bytes in base64.
func setBinaryEncodings(e *envelope.Envelope, binary []string) {
	if len(binary) == 0 {
		return
	}
	e.PropertyEncodings = make(map[string]string, len(binary))
	for _, k := range binary {
		if _, ok := e.Properties[k]; ok {
			e.PropertyEncodings[k] = envelope.BinaryEncoding
		}
	}
	if len(e.PropertyEncodings) == 0 {
		e.PropertyEncodings = nil
	}
}

// finish sets what is left once every header is read: the dead-letter
// time from the record's timestamp, the event ID where --event-id-from
// says, and the verdict.
func (d *KafkaDecoder) finish(e *envelope.Envelope, kv *envelope.KVReader, r KafkaRecord, key string) {
	// Without a dead_lettered_at, the record's timestamp is when it was
	// dead-lettered — unless dlqctl import wrote it, when it is only the
	// time of the import.
	if _, imported := kv.Fields.Lookup(envelope.ImportedFromProperty); e.DeadLetteredAt.IsZero() && !imported && !r.Timestamp.IsZero() {
		e.DeadLetteredAt = r.Timestamp.UTC()
	}
	if d.from.Kind != "property" || d.from.Name != "" || e.EventID == "" {
		id, err := d.from.EventID(key, kv.Fields, r.Value, d.names)
		if err != nil {
			kv.Fail(kafkaIDError(err))
		}
		e.EventID = id
	}
	*e = kv.Finish(*e, nil)
}

// redrivenFromHeader is the header a dlqctl redrive adds to each record it
// puts back (backend.MarkerRedrivenFrom): a record that has it passed
// through a redrive, so its time is not only that of an import.
const redrivenFromHeader = "dlqctl_redriven_from"

// runIDHeader is the run marker a dlqctl redrive adds with it
// (backend.MarkerRunID).
const runIDHeader = "dlqctl_run_id"

// staleDeadLettering says whether a dead_lettered_at header (recorded) is
// older than the dead-lettering that the Spring or Connect headers
// describe, and then when that newer one happened. The failing record was
// produced at origTS (Spring's kafka_dlt-original-timestamp): a recorded
// time before it belongs to an earlier dead-lettering. Otherwise the
// record's own time is when it was dead-lettered, unless only an import
// wrote it; within a second of the recorded time it is the same
// dead-lettering, recorded by a consumer that writes both.
func staleDeadLettering(recorded, origTS, recordTime time.Time, importedOnly bool) (time.Time, bool) {
	if recorded.IsZero() {
		return time.Time{}, false
	}
	at := recordTime.UTC()
	if importedOnly || recordTime.IsZero() {
		at = origTS // the newer dead-lettering happened after it, at the latest
	}
	switch {
	case !origTS.IsZero() && origTS.After(recorded):
		return at, true
	case !importedOnly && !recordTime.IsZero() && recordTime.Sub(recorded) > time.Second:
		return at, true
	}
	return time.Time{}, false
}

// kafkaIDError says "header" where the shared event ID reader says
// "property".
func kafkaIDError(err error) error {
	msg := strings.Replace(err.Error(), "no event ID property", "no event ID header", 1)
	msg = strings.Replace(msg, "no message key", "no record key", 1)
	return errors.New(msg)
}

// rawHeaders keeps a malformed record's headers, key and value, so that
// export loses nothing (bytes as base64, as encoding/json writes them).
func rawHeaders(r KafkaRecord) []byte {
	type header struct {
		Key   string `json:"key"`
		Value []byte `json:"value"`
	}
	raw := struct {
		Headers []header `json:"headers"`
		Key     []byte   `json:"key"`
		Value   []byte   `json:"value"`
	}{Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		raw.Headers = append(raw.Headers, header{Key: strings.ToValidUTF8(h.Key, "\uFFFD"), Value: h.Value})
	}
	b, _ := json.Marshal(raw) // strings and bytes always marshal
	return b
}
