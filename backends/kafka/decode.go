package kafkadlq

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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

// KafkaHeader is one record header. Kafka allows a name more than once;
// the last one wins when decoding, as the newest dead-lettering wrote it.
type KafkaHeader struct {
	Key   string
	Value []byte
}

// KafkaRecord is what the Kafka backend reads off one DLQ record; it keeps
// this package free of the Kafka client.
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

// KafkaOrigin is where a dead letter was consumed from, as its
// dead-lettering headers say. Partition and Offset are -1 when unknown.
type KafkaOrigin struct {
	Topic     string
	Partition int32
	Offset    int64
	Group     string
}

// OriginOf reads the original topic, partition, offset and group from a
// record's dead-lettering headers (Spring, then Kafka Connect, then
// Karafka); a header that does not decode is an error.
func OriginOf(headers []KafkaHeader) (KafkaOrigin, error) {
	if s, ok, err := shareDeadLetterOf(headers); ok {
		return s.origin(), err
	}
	h := headerList(headers)
	return originFrom(h, h.index(), nil, nil)
}

// headerList is a record's headers, the last of a name winning.
type headerList []KafkaHeader

// dlRole numbers the dead-lettering headers dlqctl reads.
type dlRole uint8

const (
	roleSpringTopic dlRole = iota
	roleSpringPartition
	roleSpringOffset
	roleSpringTimestamp
	roleSpringGroup
	roleSpringFQCN
	roleSpringMessage
	roleConnectTopic
	roleConnectPartition
	roleConnectOffset
	roleConnectConnector
	roleConnectClass
	roleConnectMessage
	roleKarafkaTopic
	roleKarafkaPartition
	roleKarafkaOffset
	roleKarafkaGroup
	numRoles
	noRole = numRoles
)

// roleNames are the header names of the roles, by number.
var roleNames = [numRoles]string{
	SpringOriginalTopic, SpringOriginalPartition, SpringOriginalOffset, SpringOriginalTimestamp,
	SpringOriginalGroup, SpringExceptionFQCN, SpringExceptionMessage, ConnectTopic, ConnectPartition,
	ConnectOffset, ConnectConnectorName, ConnectExceptionClass, ConnectExceptionMessage, KarafkaTopic,
	KarafkaPartition, KarafkaOffset, KarafkaConsumerGroup,
}

// roleOf is the role of a header name, noRole for any other.
func roleOf(name string) dlRole {
	switch name {
	case SpringOriginalTopic:
		return roleSpringTopic
	case SpringOriginalPartition:
		return roleSpringPartition
	case SpringOriginalOffset:
		return roleSpringOffset
	case SpringOriginalTimestamp:
		return roleSpringTimestamp
	case SpringOriginalGroup:
		return roleSpringGroup
	case SpringExceptionFQCN:
		return roleSpringFQCN
	case SpringExceptionMessage:
		return roleSpringMessage
	case ConnectTopic:
		return roleConnectTopic
	case ConnectPartition:
		return roleConnectPartition
	case ConnectOffset:
		return roleConnectOffset
	case ConnectConnectorName:
		return roleConnectConnector
	case ConnectExceptionClass:
		return roleConnectClass
	case ConnectExceptionMessage:
		return roleConnectMessage
	case KarafkaTopic:
		return roleKarafkaTopic
	case KarafkaPartition:
		return roleKarafkaPartition
	case KarafkaOffset:
		return roleKarafkaOffset
	case KarafkaConsumerGroup:
		return roleKarafkaGroup
	}
	return noRole
}

// roleIndex gives, for each role, the index of the last header of its
// name (-1: none): each header's name is compared once, not once per
// lookup.
type roleIndex [numRoles]int

func (hs headerList) index() roleIndex {
	var ix roleIndex
	for r := range ix {
		ix[r] = -1
	}
	for i, h := range hs {
		if r := roleOf(h.Key); r != noRole {
			ix[r] = i
		}
	}
	return ix
}

// shadowed says whether a later header has the same name as hs[i].
func (hs headerList) shadowed(i int, ix *roleIndex) bool {
	if r := roleOf(hs[i].Key); r != noRole {
		return ix[r] != i
	}
	for j := i + 1; j < len(hs); j++ {
		if hs[j].Key == hs[i].Key {
			return true
		}
	}
	return false
}

// originFrom is OriginOf on headers located by ix. text and valid, when
// given, hold each header's value as a string already and whether it is
// UTF-8, so that neither is worked out again.
func originFrom(h headerList, ix roleIndex, text []string, valid []bool) (KafkaOrigin, error) {
	o := KafkaOrigin{Partition: -1, Offset: -1}
	var errs []error
	str := func(r dlRole) string {
		i := ix[r]
		if i < 0 {
			return ""
		}
		ok := false
		if valid != nil {
			ok = valid[i]
		} else {
			ok = utf8.Valid(h[i].Value)
		}
		if !ok {
			errs = append(errs, fmt.Errorf("header %s: invalid UTF-8", roleNames[r]))
			return ""
		}
		if text != nil {
			return text[i]
		}
		return string(h[i].Value)
	}
	num := func(r dlRole, bits int) int64 {
		s := str(r)
		if s == "" {
			return -1
		}
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("header %s: want a whole number, got %q", roleNames[r], envelope.TruncateForError(s)))
			return -1
		}
		return n
	}
	switch {
	case ix[roleSpringTopic] >= 0:
		o.Topic = str(roleSpringTopic)
		o.Group = str(roleSpringGroup)
		if i := ix[roleSpringPartition]; i >= 0 {
			if v := h[i].Value; len(v) != 4 {
				errs = append(errs, fmt.Errorf("header %s: want a 4-byte big-endian integer, got %d bytes", SpringOriginalPartition, len(v)))
			} else {
				o.Partition = int32(binary.BigEndian.Uint32(v))
			}
		}
		if i := ix[roleSpringOffset]; i >= 0 {
			if v := h[i].Value; len(v) != 8 {
				errs = append(errs, fmt.Errorf("header %s: want an 8-byte big-endian integer, got %d bytes", SpringOriginalOffset, len(v)))
			} else {
				o.Offset = int64(binary.BigEndian.Uint64(v))
			}
		}
	case ix[roleConnectTopic] >= 0:
		o.Topic = str(roleConnectTopic)
		o.Partition = int32(num(roleConnectPartition, 32))
		o.Offset = num(roleConnectOffset, 64)
	case ix[roleKarafkaTopic] >= 0:
		o.Topic = str(roleKarafkaTopic)
		o.Partition = int32(num(roleKarafkaPartition, 32))
		o.Offset = num(roleKarafkaOffset, 64)
		o.Group = str(roleKarafkaGroup)
	}
	if o.Partition < -1 {
		errs = append(errs, fmt.Errorf("original partition %d is negative", o.Partition))
		o.Partition = -1
	}
	if o.Offset < -1 {
		errs = append(errs, fmt.Errorf("original offset %d is negative", o.Offset))
		o.Offset = -1
	}
	return o, errors.Join(errs...)
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
// It runs once per record of every scan, so it allocates little: the id
// and the header values are substrings of one string, the numbers shown as
// properties of another, the headers are looked up in slices on the stack,
// and the properties map is sized once.
func (d *KafkaDecoder) Decode(r KafkaRecord) envelope.Envelope { return d.decode(r, false) }

// decode is Decode, or Lean when lean. It stays one function over 80
// lines: it runs once per record of every scan, and its steps (the arena,
// the headers, the envelope fields, payload and key, origin and error from
// the dead-lettering headers, the properties, the event ID) share stack
// buffers and pooled scratch that a split would pass around or move to the
// heap; comments mark each step.
func (d *KafkaDecoder) decode(r KafkaRecord, lean bool) envelope.Envelope {
	var idBuf [40]byte
	id := strconv.AppendInt(idBuf[:0], int64(r.Partition), 10)
	id = append(id, ':')
	id = strconv.AppendInt(id, r.Offset, 10)
	n, ndl := len(id)+len(r.Key), 0
	for _, h := range r.Headers {
		n += len(h.Value)
		if DeadLetterHeader(h.Key) {
			ndl++
		}
	}
	var arena strings.Builder
	arena.Grow(n)
	arena.Write(id)
	arena.Write(r.Key)
	for _, h := range r.Headers {
		arena.Write(h.Value)
	}
	all := arena.String()
	e := envelope.Envelope{ID: all[:len(id)], Origin: envelope.Origin{Backend: "kafka"}}
	key := all[len(id) : len(id)+len(r.Key)]

	// The dead-lettering headers, in record order, the last of a name
	// winning; the others by name, the last value of each.
	var dlBuf [smallHeaders]KafkaHeader
	sc, _ := d.scratch.Get().(*decodeScratch)
	if sc == nil {
		sc = new(decodeScratch)
	}
	defer func() {
		clear(sc.binary)
		*sc = decodeScratch{binary: sc.binary[:0]} // holds no record's strings while pooled
		d.scratch.Put(sc)
	}()
	dl, dlText, dlValid := headerList(dlBuf[:0]), sc.dlText[:0], sc.dlValid[:0]
	kv := envelope.KVReader{Names: &d.table, Used: sc.used[:0]}
	if d.plain || len(r.Headers)-ndl > 2*smallHeaders {
		// Past a few dozen names a map beats scanning the slices.
		kv.Fields.M = make(map[string]string, len(r.Headers)-ndl)
	} else {
		kv.Fields.Keys, kv.Fields.Vals = sc.keys[:0], sc.vals[:0]
	}
	var headerErr error
	at := len(id) + len(r.Key)
	for _, h := range r.Headers {
		v := all[at : at+len(h.Value)]
		at += len(h.Value)
		if DeadLetterHeader(h.Key) {
			dl = append(dl, h)
			dlText = append(dlText, v)
			dlValid = append(dlValid, utf8.ValidString(v))
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
	kv.ReadCommon(&e)
	switch {
	case kv.Present(envelope.FPayloadEncoding):
		kv.SetPayload(&e, r.Value)
		if lean {
			e.PayloadEncoding = ""
		}
	case d.plain:
		kv.SetPayload(&e, r.Value)
	case lean:
		// Without a payload_encoding, classifying the payload never makes
		// the entry malformed: a lean envelope skips it.
		e.Payload = r.Value
	default:
		// What setPayload does without a payload_encoding, faster.
		e.Payload = r.Value
		e.PayloadEncoding = kafkaPayloadEncoding(r.Value)
	}
	if e.Key == "" {
		e.Key = key
		if !utf8.ValidString(key) {
			// A Long or Avro key: its bytes in base64, as for payloads.
			e.Key, e.KeyEncoding = base64.StdEncoding.EncodeToString(r.Key), envelope.BinaryEncoding
		}
	}
	// Only dead-lettering headers name the origin.
	ix := dl.index()
	orig, err := originFrom(dl, ix, dlText, dlValid)
	if err != nil {
		kv.Fail(err)
	}
	if orig.Topic != "" {
		e.Origin.Topic = orig.Topic
	}
	if orig.Group != "" {
		e.Origin.Subscription = orig.Group
	}
	text := func(r dlRole) string {
		if i := ix[r]; i >= 0 && dlValid[i] {
			return dlText[i]
		}
		return ""
	}
	if c := text(roleConnectConnector); c != "" && e.Origin.Consumer == "" {
		e.Origin.Consumer = c
	}
	msg, class := text(roleSpringMessage), text(roleSpringFQCN)
	if msg == "" && class == "" {
		msg, class = text(roleConnectMessage), text(roleConnectClass)
	}
	if share, ok, err := shareDeadLetterOf(dl); ok {
		if err != nil {
			kv.Fail(err)
		}
		applyShare(&e, share, kv.Fail)
		if msg == "" && class == "" {
			msg, class = share.Message, share.Disposition
		}
	}
	if msg != "" || class != "" {
		var origTS time.Time
		if i := ix[roleSpringTimestamp]; i >= 0 && len(dl[i].Value) == 8 {
			origTS = time.UnixMilli(int64(binary.BigEndian.Uint64(dl[i].Value))).UTC()
		}
		_, imported := kv.Fields.Lookup(envelope.ImportedFromProperty)
		_, redriven := kv.Fields.Lookup(redrivenFromHeader)
		if !redriven {
			_, redriven = kv.Fields.Lookup(runIDHeader)
		}
		// Only a record that passed through dlqctl (imported, or put back
		// by a redrive) can carry dlqctl fields of an earlier
		// dead-lettering: a producer that writes the envelope fields and
		// Spring's headers, its record relayed, copied between clusters or
		// restored later, keeps its own.
		if imported || redriven {
			if at, stale := staleDeadLettering(e.DeadLetteredAt, origTS, r.Timestamp, imported && !redriven); stale {
				// The dlqctl fields describe an earlier dead-lettering
				// (an imported entry redriven and failed again, by a
				// consumer that copies headers): the newer one's error
				// and time win.
				e.LastError, e.ErrorClass, e.DeadLetteredAt = "", "", at
			}
		}
	}
	if e.LastError == "" {
		e.LastError = msg
		if e.LastError == "" {
			e.LastError = class
		}
	}
	if e.ErrorClass == "" {
		e.ErrorClass = class
	}
	if !lean && (len(dl) > 0 || kv.Fields.Len() > len(kv.Used)) {
		// Room for every property at once rather than growing the map.
		e.Properties = make(map[string]string, max(kv.Fields.Len()-len(kv.Used), 0)+len(dl))
	}
	kv.Rest(&e, lean)
	if !lean && len(sc.binary) > 0 {
		e.PropertyEncodings = make(map[string]string, len(sc.binary))
		for _, k := range sc.binary {
			if _, ok := e.Properties[k]; ok {
				e.PropertyEncodings[k] = envelope.BinaryEncoding
			}
		}
		if len(e.PropertyEncodings) == 0 {
			e.PropertyEncodings = nil
		}
	}
	// The dead-lettering headers stay visible as properties, the binary
	// ones as decimal numbers and a time, written into one more string.
	var numBuf [80]byte
	nums := numBuf[:0]
	type span struct {
		key      string
		from, to int
	}
	var spans [3]span
	nspans := 0
	for i, h := range dl {
		if dl.shadowed(i, &ix) {
			continue // a later header of the name is the one that counts
		}
		k, v := h.Key, h.Value
		from := len(nums)
		switch k {
		case SpringOriginalPartition, SpringOriginalOffset:
			if lean {
				continue // nothing to check: originFrom did
			}
		}
		switch k {
		case SpringOriginalPartition:
			if orig.Partition >= 0 {
				nums = strconv.AppendInt(nums, int64(orig.Partition), 10)
				spans[nspans] = span{k, from, len(nums)}
				nspans++
			}
			continue
		case SpringOriginalOffset:
			if orig.Offset >= 0 {
				nums = strconv.AppendInt(nums, orig.Offset, 10)
				spans[nspans] = span{k, from, len(nums)}
				nspans++
			}
			continue
		case SpringOriginalTimestamp:
			if len(v) != 8 {
				kv.Fail(fmt.Errorf("header %s: want an 8-byte big-endian integer, got %d bytes", k, len(v)))
				continue
			}
			if lean {
				continue
			}
			ms := int64(binary.BigEndian.Uint64(v))
			nums = time.UnixMilli(ms).UTC().AppendFormat(nums, time.RFC3339Nano)
			spans[nspans] = span{k, from, len(nums)}
			nspans++
			continue
		}
		if !dlValid[i] {
			kv.Fail(fmt.Errorf("header %s: invalid UTF-8", envelope.TruncateForError(k)))
			continue
		}
		if !lean {
			envelope.SetProperty(&e, k, dlText[i])
		}
	}
	if nspans > 0 {
		s := string(nums)
		for _, sp := range spans[:nspans] {
			envelope.SetProperty(&e, sp.key, s[sp.from:sp.to])
		}
	}
	if len(e.Properties) == 0 {
		e.Properties = nil
	}
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
	e = kv.Finish(e, nil)
	if e.Malformed != "" && !lean {
		e.Raw = rawHeaders(r)
	}
	return e
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
