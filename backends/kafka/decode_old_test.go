package kafkadlq

// The decoder as it was before it was split by header family: one
// function, kept here only to hold the split one equal to it
// (FuzzDecodeSplit). Removed once the split is in.

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dlqctl/dlqctl/envelope"
)

type oldScratch struct {
	dlText, keys, vals [smallHeaders]string
	dlValid            [smallHeaders]bool
	used               [envelope.NumFields + 4]string
	resolved           [envelope.NumFields]int8
	binary             []string
}

func (hs headerList) oldIndex() roleIndex {
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
func (hs headerList) oldShadowed(i int, ix *roleIndex) bool {
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

func oldOriginFrom(h headerList, ix roleIndex, text []string, valid []bool) (KafkaOrigin, error) {
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

func (d *KafkaDecoder) oldDecode(r KafkaRecord, lean bool) envelope.Envelope {
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
	sc := new(oldScratch)
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
	ix := dl.oldIndex()
	orig, err := oldOriginFrom(dl, ix, dlText, dlValid)
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
		if dl.oldShadowed(i, &ix) {
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

// decodeSplitEqual fails t when the split decoder and the old one decode
// r differently, whole or lean, under either set of field names.
func decodeSplitEqual(t *testing.T, r KafkaRecord, src envelope.EventIDSource, overlap bool) {
	t.Helper()
	names := envelope.DefaultFieldNames()
	if overlap {
		names = names.Merge(envelope.FieldNames{envelope.FieldErrorClass: {"error", "category"}})
	}
	for _, plain := range []bool{false, true} {
		d := NewKafkaDecoder(src, names)
		d.plain = plain
		for _, lean := range []bool{false, true} {
			got, want := d.decode(r, lean), d.oldDecode(r, lean)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("plain %v lean %v: split decoder differs from the old one:\ngot  %#v\nwant %#v", plain, lean, got, want)
			}
		}
	}
}

// FuzzDecodeSplit holds the decoder split by header family equal to the
// one-function decoder it replaced, over the seeds of the other decode
// fuzz targets and whatever the fuzzer makes of them.
func FuzzDecodeSplit(f *testing.F) {
	f.Add(int32(0), int64(1), []byte("k"), []byte(`{"a":1}`), []byte("event_id=E\nkafka_dlt-original-topic=t\nkafka_dlt-original-partition=#4\nkafka_dlt-original-offset=#8"), "", int64(1000), false)
	f.Add(int32(3), int64(9), []byte{0xff}, []byte{0, 1}, []byte("__connect.errors.topic=t\n__connect.errors.partition=x\nerror=boom"), "key", int64(0), true)
	f.Add(int32(1), int64(2), []byte(nil), []byte("v"), []byte("source_topic=t\nsource_offset=-3\neventId=Z\npayload_encoding=utf8\nreason=r"), "json:a", int64(-5), false)
	f.Add(int32(1), int64(2), []byte("k"), []byte(`{"a": 1}`), []byte("event_id=E\nattempts=x\ntenant=\xff\nother=\xfe"), "header:event_id", int64(7), true)
	f.Add(int32(0), int64(5), []byte(nil), []byte(nil), []byte("__dlq.errors.topic=orders\n__dlq.errors.partition=2\n__dlq.errors.offset=9\n__dlq.errors.group=g\n__dlq.errors.delivery.count=5\ndlqctl_source_gone=gone"), "", int64(1), false)
	f.Add(int32(2), int64(3), []byte("k"), []byte("x"), []byte("dlqctl_imported_from=redis\ndead_lettered_at=2020-01-01T00:00:00Z\nlast_error=old\nkafka_dlt-exception-message=new\nkafka_dlt-original-timestamp=#8\nkafka_dlt-original-topic=t"), "", int64(1_700_000_000_000), false)
	f.Add(int32(2), int64(3), []byte("k"), []byte("x"), []byte("dlqctl_run_id=r\ndead_lettered_at=2020-01-01T00:00:00Z\nerror_class=C\n__connect.errors.exception.message=m\n__connect.errors.topic=t\n__connect.errors.connector.name=c\nkafka_dlt-original-timestamp=#4"), "", int64(1_700_000_000_000), true)
	f.Fuzz(func(t *testing.T, partition int32, offset int64, key, value, headers []byte, from string, tsMillis int64, overlap bool) {
		src, err := ParseKafkaEventIDSource(from)
		if err != nil {
			src = envelope.EventIDSource{Kind: "property"}
		}
		r := KafkaRecord{Partition: partition, Offset: offset, Key: key, Value: value, Headers: fuzzHeaders(headers)}
		if tsMillis > 0 {
			r.Timestamp = time.UnixMilli(tsMillis % (maxPublishMillis + 1))
		}
		decodeSplitEqual(t, r, src, overlap)
	})
}

// TestDecodeSplitGenerated holds the split decoder equal to the old one
// over generated records of every family: the bench's Spring records,
// Connect, Karafka and share-group ones, with headers repeated, dropped,
// made binary or made too short at random.
func TestDecodeSplitGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 32))
	families := [][]KafkaHeader{
		springRecord().Headers,
		{{Key: ConnectTopic, Value: []byte("orders")}, {Key: ConnectPartition, Value: []byte("3")}, {Key: ConnectOffset, Value: []byte("77")},
			{Key: ConnectConnectorName, Value: []byte("sink")}, {Key: ConnectExceptionClass, Value: []byte("java.lang.X")}, {Key: ConnectExceptionMessage, Value: []byte("boom")}},
		{{Key: KarafkaTopic, Value: []byte("orders")}, {Key: KarafkaPartition, Value: []byte("1")}, {Key: KarafkaOffset, Value: []byte("12")}, {Key: KarafkaConsumerGroup, Value: []byte("g")}},
		shareRecord(SharePrefix, false).Headers,
		shareRecord(ShareDraftPrefix, true).Headers,
	}
	extra := []KafkaHeader{
		{Key: "event_id", Value: []byte("E1")}, {Key: "fingerprint", Value: []byte("sha256:ab")}, {Key: "tenant", Value: []byte("acme")},
		{Key: "attempts", Value: []byte("4")}, {Key: "dead_lettered_at", Value: []byte("2024-05-01T10:00:00Z")}, {Key: "last_error", Value: []byte("old")},
		{Key: "dlqctl_imported_from", Value: []byte("redis://x")}, {Key: redrivenFromHeader, Value: []byte("orders.DLT")}, {Key: "payload_encoding", Value: []byte("base64")},
		{Key: "schema_id", Value: []byte{0, 0, 0, 7}}, {Key: "\xffname", Value: []byte("v")}, {Key: envelope.MalformedMarker, Value: []byte("bad there")},
	}
	values := [][]byte{[]byte(`{"order":1,"items":[1,2]}`), []byte(`{"a": 1}`), []byte("plain text"), {0xff, 0x00}, nil, []byte("aGVsbG8=")}
	sources := []string{"", "key", "json:order", "header:tenant"}
	for i := range 20000 {
		var hs []KafkaHeader
		fam := families[rng.IntN(len(families))]
		for range rng.IntN(4) {
			hs = append(hs, extra[rng.IntN(len(extra))])
		}
		for _, h := range fam {
			switch rng.IntN(12) {
			case 0:
				continue // dropped
			case 1:
				h.Value = h.Value[:len(h.Value)/2] // too short, or cut text
			case 2:
				h.Value = append([]byte{0xfe}, h.Value...) // not UTF-8
			case 3:
				hs = append(hs, h) // repeated
			}
			hs = append(hs, h)
		}
		for range rng.IntN(3) {
			hs = append(hs, extra[rng.IntN(len(extra))])
		}
		if rng.IntN(50) == 0 {
			for j := range 40 {
				hs = append(hs, KafkaHeader{Key: "h" + strconv.Itoa(j), Value: []byte("v")})
			}
		}
		r := KafkaRecord{Partition: int32(rng.IntN(8)), Offset: rng.Int64N(1 << 40), Key: []byte("k" + strconv.Itoa(i)),
			Value: values[rng.IntN(len(values))], Headers: hs, Timestamp: time.UnixMilli(1_700_000_000_000 + rng.Int64N(1e9))}
		if rng.IntN(10) == 0 {
			r.Key = []byte{0x80, 0x01}
		}
		src, _ := ParseKafkaEventIDSource(sources[rng.IntN(len(sources))])
		decodeSplitEqual(t, r, src, rng.IntN(4) == 0)
	}
}

// BenchmarkDecodeSplit: the split decoder against the old one, on the
// bench's Spring record, whole and lean.
func BenchmarkDecodeSplit(b *testing.B) {
	r := springRecord()
	r.Headers = append(r.Headers, KafkaHeader{Key: "fingerprint", Value: []byte("sha256:" + strings.Repeat("ab", 32))})
	d := NewKafkaDecoder(envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
	for _, lean := range []bool{false, true} {
		b.Run(fmt.Sprintf("split/lean=%v", lean), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d.decode(r, lean)
			}
		})
		b.Run(fmt.Sprintf("old/lean=%v", lean), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d.oldDecode(r, lean)
			}
		})
	}
}
