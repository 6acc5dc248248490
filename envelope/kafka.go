package envelope

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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
// (Spring Kafka, Kafka Connect, Karafka) rather than by the original
// producer: a redrive leaves those behind.
func DeadLetterHeader(name string) bool {
	return strings.HasPrefix(name, SpringPrefix) || strings.HasPrefix(name, ConnectPrefix) || strings.HasPrefix(name, KarafkaPrefix)
}

// ParseKafkaEventIDSource parses --event-id-from for Kafka:
// header:NAME, json:PATH or key ("" reads the event_id/eventId header).
func ParseKafkaEventIDSource(s string) (EventIDSource, error) {
	switch {
	case s == "":
		return EventIDSource{Kind: "property"}, nil
	case s == "key":
		return EventIDSource{Kind: "key"}, nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if ok && name != "" {
		switch kind {
		case "header":
			// A header is what a property is elsewhere.
			return EventIDSource{Kind: "property", Name: name}, nil
		case "json":
			return EventIDSource{Kind: "json", Name: name}, nil
		}
	}
	return EventIDSource{}, fmt.Errorf("--event-id-from %q: want header:NAME, json:PATH or key", s)
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
	return originFrom(headerList(headers))
}

// headerList looks headers up by name, the last of each winning. A record
// has a dozen headers or so: scanning them beats building a map per
// record.
type headerList []KafkaHeader

// get is the value of the last header called name; a header with a null
// value is there, with an empty value, unlike an absent one.
func (hs headerList) get(name string) ([]byte, bool) {
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].Key == name {
			if hs[i].Value == nil {
				return []byte{}, true
			}
			return hs[i].Value, true
		}
	}
	return nil, false
}

// shadowed says whether a later header has the same name as hs[i].
func (hs headerList) shadowed(i int) bool {
	for j := i + 1; j < len(hs); j++ {
		if hs[j].Key == hs[i].Key {
			return true
		}
	}
	return false
}

// originFrom is OriginOf on headers by name (the last of each).
func originFrom(h headerList) (KafkaOrigin, error) {
	o := KafkaOrigin{Partition: -1, Offset: -1}
	var errs []error
	str := func(name string) string {
		v, ok := h.get(name)
		if !ok {
			return ""
		}
		if !utf8.Valid(v) {
			errs = append(errs, fmt.Errorf("header %s: invalid UTF-8", name))
			return ""
		}
		return string(v)
	}
	num := func(name string, bits int) int64 {
		s := str(name)
		if s == "" {
			return -1
		}
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("header %s: want a whole number, got %q", name, truncateForError(s)))
			return -1
		}
		return n
	}
	has := func(name string) bool { _, ok := h.get(name); return ok }
	switch {
	case has(SpringOriginalTopic):
		o.Topic = str(SpringOriginalTopic)
		o.Group = str(SpringOriginalGroup)
		if v, ok := h.get(SpringOriginalPartition); ok {
			if len(v) != 4 {
				errs = append(errs, fmt.Errorf("header %s: want a 4-byte big-endian integer, got %d bytes", SpringOriginalPartition, len(v)))
			} else {
				o.Partition = int32(binary.BigEndian.Uint32(v))
			}
		}
		if v, ok := h.get(SpringOriginalOffset); ok {
			if len(v) != 8 {
				errs = append(errs, fmt.Errorf("header %s: want an 8-byte big-endian integer, got %d bytes", SpringOriginalOffset, len(v)))
			} else {
				o.Offset = int64(binary.BigEndian.Uint64(v))
			}
		}
	case has(ConnectTopic):
		o.Topic = str(ConnectTopic)
		o.Partition = int32(num(ConnectPartition, 32))
		o.Offset = num(ConnectOffset, 64)
	case has(KarafkaTopic):
		o.Topic = str(KarafkaTopic)
		o.Partition = int32(num(KarafkaPartition, 32))
		o.Offset = num(KarafkaOffset, 64)
		o.Group = str(KarafkaConsumerGroup)
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

// FromKafka maps a Kafka DLQ record to the canonical envelope (the canonical envelope form, docs/json.md):
// the dead-lettering headers of Spring Kafka, Kafka Connect or Karafka give
// the origin, the error and its class; headers named like envelope fields
// fill them; the rest become properties. The id is partition:offset, the
// record key the key, and the record timestamp the dead-letter time unless
// a header says otherwise. It never fails: what does not decode makes the
// envelope malformed, with the reason.
//
// It runs once per record of every scan, so it allocates little: the
// header values become substrings of one string, the dead-lettering
// headers are looked up in a slice, and the properties map is sized once.
func FromKafka(r KafkaRecord, from EventIDSource, names FieldNames) Envelope {
	e := Envelope{ID: KafkaID(r.Partition, r.Offset), Origin: Origin{Backend: "kafka"}}
	// One string holds every text header value: what would be a string
	// per header is a slice of it.
	n := 0
	ndl := 0
	for _, h := range r.Headers {
		n += len(h.Value)
		if DeadLetterHeader(h.Key) {
			ndl++
		}
	}
	var arena strings.Builder
	arena.Grow(n)
	for _, h := range r.Headers {
		arena.Write(h.Value)
	}
	all := arena.String()
	fields := make(map[string]string, len(r.Headers)-ndl)
	// The dead-lettering headers, in record order; the last of a name wins.
	dl := make(headerList, 0, ndl)
	dlText := make([]string, 0, ndl)
	var headerErr error
	at := 0
	for _, h := range r.Headers {
		v := all[at : at+len(h.Value)]
		at += len(h.Value)
		if DeadLetterHeader(h.Key) {
			dl = append(dl, h)
			dlText = append(dlText, v)
			continue
		}
		if !utf8.ValidString(h.Key) {
			headerErr = errors.Join(headerErr, fmt.Errorf("header %q: name is not UTF-8", truncateForError(h.Key)))
			continue
		}
		fields[h.Key] = v
	}
	kv := newKVReader(fields, names)
	if headerErr != nil {
		kv.fail(headerErr)
	}
	if !utf8.Valid(r.Key) {
		kv.fail(errors.New("record key: invalid UTF-8"))
	}
	kv.readCommon(&e)
	if kv.present(FieldPayloadEncoding) {
		kv.setPayload(&e, r.Value)
	} else {
		// What setPayload does without a payload_encoding, faster.
		e.Payload = r.Value
		e.PayloadEncoding = kafkaPayloadEncoding(r.Value)
	}
	if e.Key == "" {
		e.Key = string(r.Key)
	}
	// Only dead-lettering headers name the origin.
	orig, err := originFrom(dl)
	if err != nil {
		kv.fail(err)
	}
	if orig.Topic != "" {
		e.Origin.Topic = orig.Topic
	}
	if orig.Group != "" {
		e.Origin.Subscription = orig.Group
	}
	text := func(name string) string {
		for i := len(dl) - 1; i >= 0; i-- {
			if dl[i].Key == name {
				if !utf8.ValidString(dlText[i]) {
					return ""
				}
				return dlText[i]
			}
		}
		return ""
	}
	if c := text(ConnectConnectorName); c != "" && e.Origin.Consumer == "" {
		e.Origin.Consumer = c
	}
	msg, class := text(SpringExceptionMessage), text(SpringExceptionFQCN)
	if msg == "" && class == "" {
		msg, class = text(ConnectExceptionMessage), text(ConnectExceptionClass)
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
	if len(dl) > 0 || len(fields) > len(kv.used) {
		// Room for every property at once rather than growing the map.
		e.Properties = make(map[string]string, max(len(fields)-len(kv.used), 0)+len(dl))
	}
	kv.rest(&e)
	// The dead-lettering headers stay visible as properties, the binary
	// ones as decimal numbers.
	for i, h := range dl {
		if dl.shadowed(i) {
			continue // a later header of the name is the one that counts
		}
		k, v := h.Key, h.Value
		switch k {
		case SpringOriginalPartition:
			if orig.Partition >= 0 {
				setProp(&e, k, strconv.FormatInt(int64(orig.Partition), 10))
			}
			continue
		case SpringOriginalOffset:
			if orig.Offset >= 0 {
				setProp(&e, k, strconv.FormatInt(orig.Offset, 10))
			}
			continue
		case SpringOriginalTimestamp:
			if len(v) != 8 {
				kv.fail(fmt.Errorf("header %s: want an 8-byte big-endian integer, got %d bytes", k, len(v)))
				continue
			}
			ms := int64(binary.BigEndian.Uint64(v))
			setProp(&e, k, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
			continue
		}
		if !utf8.ValidString(dlText[i]) {
			kv.fail(fmt.Errorf("header %s: invalid UTF-8", truncateForError(k)))
			continue
		}
		setProp(&e, k, dlText[i])
	}
	if len(e.Properties) == 0 {
		e.Properties = nil
	}
	// Without a dead_lettered_at, the record's timestamp is when it was
	// dead-lettered — unless dlqctl import wrote it, when it is only the
	// time of the import.
	if _, imported := fields[ImportedFromProperty]; e.DeadLetteredAt.IsZero() && !imported && !r.Timestamp.IsZero() {
		e.DeadLetteredAt = r.Timestamp.UTC()
	}
	if from.Kind != "property" || from.Name != "" || e.EventID == "" {
		id, err := from.eventID(PulsarMessage{Key: string(r.Key), Properties: fields, Payload: r.Value}, names)
		if err != nil {
			kv.fail(kafkaIDError(err))
		}
		e.EventID = id
	}
	e = kv.finish(e, nil)
	if e.Malformed != "" {
		e.Raw = rawHeaders(r)
	}
	return e
}

// present says whether a header names field, without reading it.
func (kv *kvReader) present(field string) bool {
	for _, n := range kv.names[field] {
		if _, ok := kv.fields[n]; ok {
			return true
		}
	}
	return false
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
