package kafkadlq

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/envelope/envelopetest"
)

func be32(n int32) []byte { b := make([]byte, 4); binary.BigEndian.PutUint32(b, uint32(n)); return b }
func be64(n int64) []byte { b := make([]byte, 8); binary.BigEndian.PutUint64(b, uint64(n)); return b }

// springRecord is a dead letter as Spring Kafka's
// DeadLetterPublishingRecoverer writes it: the original's own headers
// first, then the kafka_dlt-* ones.
func springRecord() KafkaRecord {
	return KafkaRecord{
		Topic: "orders.DLT", Partition: 2, Offset: 41,
		Key:   []byte("order-7"),
		Value: []byte(`{"orderId":"order-7","amount":3}`),
		Headers: []KafkaHeader{
			{Key: "event_id", Value: []byte("E7")},
			{Key: "tenant", Value: []byte("acme")},
			{Key: SpringOriginalTopic, Value: []byte("orders")},
			{Key: SpringOriginalPartition, Value: be32(1)},
			{Key: SpringOriginalOffset, Value: be64(1234)},
			{Key: SpringOriginalTimestamp, Value: be64(1764582000000)},
			{Key: "kafka_dlt-original-timestamp-type", Value: []byte("CreateTime")},
			{Key: SpringOriginalGroup, Value: []byte("order-workers")},
			{Key: SpringExceptionFQCN, Value: []byte("org.springframework.kafka.listener.ListenerExecutionFailedException")},
			{Key: SpringExceptionMessage, Value: []byte("Listener failed; timeout calling payments")},
		},
		Timestamp: time.UnixMilli(1764582060000),
	}
}

func TestFromKafkaSpring(t *testing.T) {
	e := FromKafka(springRecord(), envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
	if e.Malformed != "" {
		t.Fatalf("malformed: %s", e.Malformed)
	}
	if e.ID != "2:41" || e.EventID != "E7" || e.Key != "order-7" {
		t.Fatalf("id %q event %q key %q", e.ID, e.EventID, e.Key)
	}
	if e.Origin != (envelope.Origin{Backend: "kafka", Topic: "orders", Subscription: "order-workers"}) {
		t.Fatalf("origin %+v", e.Origin)
	}
	if e.LastError != "Listener failed; timeout calling payments" || !strings.HasSuffix(e.ErrorClass, "ListenerExecutionFailedException") {
		t.Fatalf("last_error %q error_class %q", e.LastError, e.ErrorClass)
	}
	if !e.DeadLetteredAt.Equal(time.UnixMilli(1764582060000)) {
		t.Fatalf("dead_lettered_at %v", e.DeadLetteredAt)
	}
	want := map[string]string{
		"tenant":                            "acme",
		SpringOriginalTopic:                 "orders",
		SpringOriginalPartition:             "1",
		SpringOriginalOffset:                "1234",
		SpringOriginalTimestamp:             "2025-12-01T09:40:00Z",
		"kafka_dlt-original-timestamp-type": "CreateTime",
		SpringOriginalGroup:                 "order-workers",
	}
	for k, v := range want {
		if e.Properties[k] != v {
			t.Errorf("property %s = %q, want %q", k, e.Properties[k], v)
		}
	}
	if !e.FingerprintComputed || e.Fingerprint != envelope.ComputeFingerprint(e.Payload) || e.PayloadEncoding != envelope.EncodingJSON {
		t.Fatalf("fingerprint %q computed %v encoding %s", e.Fingerprint, e.FingerprintComputed, e.PayloadEncoding)
	}
	o, err := OriginOf(springRecord().Headers)
	if err != nil || o != (KafkaOrigin{Topic: "orders", Partition: 1, Offset: 1234, Group: "order-workers"}) {
		t.Fatalf("OriginOf = %+v, %v", o, err)
	}
}

func TestFromKafkaConnectAndKarafka(t *testing.T) {
	connect := KafkaRecord{Partition: 0, Offset: 5, Value: []byte("x"), Headers: []KafkaHeader{
		{Key: "eventId", Value: []byte("C1")},
		{Key: ConnectTopic, Value: []byte("payments")},
		{Key: ConnectPartition, Value: []byte("3")},
		{Key: ConnectOffset, Value: []byte("99")},
		{Key: ConnectConnectorName, Value: []byte("jdbc-sink")},
		{Key: ConnectExceptionClass, Value: []byte("org.apache.kafka.connect.errors.DataException")},
	}}
	e := FromKafka(connect, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
	if e.Malformed != "" || e.EventID != "C1" || e.Origin.Topic != "payments" || e.Origin.Consumer != "jdbc-sink" {
		t.Fatalf("connect: %+v", e)
	}
	// No message: the class name is the error.
	if e.LastError != "org.apache.kafka.connect.errors.DataException" || e.ErrorClass != e.LastError {
		t.Fatalf("connect error %q class %q", e.LastError, e.ErrorClass)
	}
	if o, err := OriginOf(connect.Headers); err != nil || o.Partition != 3 || o.Offset != 99 {
		t.Fatalf("connect origin %+v %v", o, err)
	}
	karafka := KafkaRecord{Partition: 1, Offset: 0, Key: []byte("k"), Value: []byte("v"), Headers: []KafkaHeader{
		{Key: KarafkaTopic, Value: []byte("events")},
		{Key: KarafkaPartition, Value: []byte("0")},
		{Key: KarafkaOffset, Value: []byte("17")},
		{Key: KarafkaConsumerGroup, Value: []byte("app")},
	}}
	e = FromKafka(karafka, envelope.EventIDSource{Kind: "key"}, envelope.DefaultFieldNames())
	if e.Malformed != "" || e.EventID != "k" || e.Origin.Topic != "events" || e.Origin.Subscription != "app" {
		t.Fatalf("karafka: %+v", e)
	}
}

func TestFromKafkaMalformed(t *testing.T) {
	cases := map[string]struct {
		mutate func(*KafkaRecord)
		want   string
	}{
		"no event id": {func(r *KafkaRecord) { r.Headers = r.Headers[1:] }, "no event ID header"},
		"short partition": {func(r *KafkaRecord) {
			r.Headers[3].Value = []byte{0, 1}
		}, "kafka_dlt-original-partition: want a 4-byte"},
		"short offset": {func(r *KafkaRecord) {
			r.Headers[4].Value = []byte("1234")
		}, "kafka_dlt-original-offset: want an 8-byte"},
		"binary event id header": {func(r *KafkaRecord) {
			r.Headers[0].Value = []byte{0xff, 0xfe}
		}, "invalid UTF-8"},
		"connect partition not a number": {func(r *KafkaRecord) {
			r.Headers = []KafkaHeader{{Key: "event_id", Value: []byte("E")}, {Key: ConnectTopic, Value: []byte("t")}, {Key: ConnectPartition, Value: []byte("x")}}
		}, "__connect.errors.partition: want a whole number"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := springRecord()
			c.mutate(&r)
			e := FromKafka(r, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
			if !strings.Contains(e.Malformed, c.want) {
				t.Fatalf("Malformed = %q, want it to contain %q", e.Malformed, c.want)
			}
			if e.ID != "2:41" || len(e.Raw) == 0 {
				t.Fatalf("malformed entry lost its id %q or raw form", e.ID)
			}
			envelopetest.Check(t, e, "2:41")
		})
	}
}

func TestFromKafkaEnvelopeHeaders(t *testing.T) {
	r := KafkaRecord{Partition: 0, Offset: 3, Value: []byte("hello"), Timestamp: time.UnixMilli(1000), Headers: []KafkaHeader{
		{Key: "event_id", Value: []byte("E1")},
		{Key: "fingerprint", Value: []byte("sha256:abc")},
		{Key: "origin_stream", Value: []byte("orders")},
		{Key: "attempts", Value: []byte("4")},
		{Key: "last_error", Value: []byte("boom")},
		{Key: "dead_lettered_at", Value: []byte("2026-11-29T10:05:00Z")},
		{Key: "redrive_count", Value: []byte("1")},
		{Key: envelope.ImportedFromProperty, Value: []byte("old-1")},
	}}
	e := FromKafka(r, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
	if e.Malformed != "" || e.Fingerprint != "sha256:abc" || e.FingerprintComputed || e.Origin.Topic != "orders" ||
		e.Attempts != 4 || e.LastError != "boom" || e.RedriveCount != 1 || e.DeadLetteredAt.Format(time.RFC3339) != "2026-11-29T10:05:00Z" {
		t.Fatalf("%+v", e)
	}
	r.Headers = r.Headers[:1]
	r.Headers = append(r.Headers, KafkaHeader{Key: envelope.ImportedFromProperty, Value: []byte("old-1")})
	if e := FromKafka(r, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames()); !e.DeadLetteredAt.IsZero() {
		t.Fatalf("an imported record's timestamp is not its dead-letter time: %v", e.DeadLetteredAt)
	}
}

func TestParseKafkaEventIDSource(t *testing.T) {
	for in, want := range map[string]envelope.EventIDSource{
		"":             {Kind: "property"},
		"key":          {Kind: "key"},
		"header:msgId": {Kind: "property", Name: "msgId"},
		"json:a.b":     {Kind: "json", Name: "a.b"},
	} {
		got, err := ParseKafkaEventIDSource(in)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v", in, got, err)
		}
	}
	for _, bad := range []string{"property:x", "header:", "nope"} {
		if _, err := ParseKafkaEventIDSource(bad); err == nil || !strings.Contains(err.Error(), "header:NAME") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
	if p, o, ok := ParseKafkaID("3:17"); !ok || p != 3 || o != 17 || KafkaID(p, o) != "3:17" {
		t.Fatal("ParseKafkaID")
	}
	for _, bad := range []string{"", "3", "-1:2", "a:b", "1:-4"} {
		if _, _, ok := ParseKafkaID(bad); ok {
			t.Errorf("ParseKafkaID(%q) ok", bad)
		}
	}
}

// TestRolesAreDeadLettering: decoding takes a header with a role for a
// dead-lettering one without the prefix checks, which holds only while
// every role's name has a dead-lettering prefix.
func TestRolesAreDeadLettering(t *testing.T) {
	for r, name := range roleNames {
		if !DeadLetterHeader(name) || roleOf(name) != dlRole(r) {
			t.Errorf("role %d (%s): DeadLetterHeader %v, roleOf %d", r, name, DeadLetterHeader(name), roleOf(name))
		}
	}
}

func TestDeadLetterHeader(t *testing.T) {
	for name, want := range map[string]bool{
		SpringOriginalOffset: true, ConnectTopic: true, KarafkaTopic: true,
		"event_id": false, "traceparent": false, "kafka_dltx": false,
	} {
		if DeadLetterHeader(name) != want {
			t.Errorf("%s: want %v", name, want)
		}
	}
}

// fuzzHeaders reads fuzzed headers: lines of name=value, where a value
// "#N" becomes an N-byte big-endian integer so that Spring's binary
// headers are reached too.
func fuzzHeaders(data []byte) []KafkaHeader {
	var out []KafkaHeader
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		val := []byte(v)
		switch v {
		case "#4":
			val = be32(int32(len(line)))
		case "#8":
			val = be64(int64(len(line)) << 33)
		}
		out = append(out, KafkaHeader{Key: k, Value: val})
	}
	return out
}

func FuzzFromKafka(f *testing.F) {
	f.Add(int32(0), int64(1), []byte("k"), []byte(`{"a":1}`), []byte("event_id=E\nkafka_dlt-original-topic=t\nkafka_dlt-original-partition=#4\nkafka_dlt-original-offset=#8"), "", int64(1000))
	f.Add(int32(3), int64(9), []byte{0xff}, []byte{0, 1}, []byte("__connect.errors.topic=t\n__connect.errors.partition=x"), "key", int64(0))
	f.Add(int32(1), int64(2), []byte(nil), []byte("v"), []byte("source_topic=t\nsource_offset=-3\neventId=Z"), "json:a", int64(-5))
	f.Fuzz(func(t *testing.T, partition int32, offset int64, key, value, headers []byte, from string, tsMillis int64) {
		if partition < 0 {
			partition = -partition
			if partition < 0 {
				partition = 0
			}
		}
		if offset < 0 {
			offset = 0
		}
		src, err := ParseKafkaEventIDSource(from)
		if err != nil {
			src = envelope.EventIDSource{Kind: "property"}
		}
		r := KafkaRecord{Partition: partition, Offset: offset, Key: key, Value: value, Headers: fuzzHeaders(headers)}
		if tsMillis > 0 {
			r.Timestamp = time.UnixMilli(tsMillis % (maxPublishMillis + 1))
		}
		d := NewKafkaDecoder(src, envelope.DefaultFieldNames())
		e := d.Decode(r)
		if e.Origin.Backend != "kafka" {
			t.Fatalf("Origin.Backend = %q", e.Origin.Backend)
		}
		// The lean envelope is the full one without properties, payload
		// encoding and raw form: the same checks, so the same verdict.
		lean, full := d.Lean(r), e
		full.Properties, full.PayloadEncoding, full.Raw = nil, "", nil
		if !reflect.DeepEqual(lean, full) {
			t.Fatalf("lean decoding differs:\nlean %#v\nfull %#v", lean, full)
		}
		if _, err := OriginOf(r.Headers); err != nil && e.Malformed == "" {
			t.Fatalf("headers that do not decode (%v) gave a well-formed envelope", err)
		}
		envelopetest.Check(t, e, KafkaID(partition, offset))
	})
}

// TestFromKafkaRepeatedHeader: of two headers with one name, the last
// counts — also when the earlier one would not decode.
func TestFromKafkaRepeatedHeader(t *testing.T) {
	r := springRecord()
	r.Headers = append([]KafkaHeader{
		{Key: SpringExceptionMessage, Value: []byte{0xff, 0xfe}},
		{Key: SpringOriginalOffset, Value: []byte{1}},
	}, r.Headers...)
	e := FromKafka(r, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
	if e.Malformed != "" {
		t.Fatalf("malformed: %s", e.Malformed)
	}
	if e.Properties[SpringOriginalOffset] != "1234" || e.LastError != "Listener failed; timeout calling payments" {
		t.Fatalf("offset %q last_error %q", e.Properties[SpringOriginalOffset], e.LastError)
	}
}

// BenchmarkFromKafkaSpring: a Spring dead letter that carries its
// fingerprint, as the kafka-stats bench case's records do, decoded whole
// and lean.
func BenchmarkFromKafkaSpring(b *testing.B) {
	r := springRecord()
	r.Headers = append(r.Headers, KafkaHeader{Key: "fingerprint", Value: []byte("sha256:" + strings.Repeat("ab", 32))})
	d := NewKafkaDecoder(envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
	for _, c := range []struct {
		name   string
		decode func(KafkaRecord) envelope.Envelope
	}{{"full", d.Decode}, {"lean", d.Lean}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if e := c.decode(r); e.Malformed != "" {
					b.Fatal(e.Malformed)
				}
			}
		})
	}
}

func kafkaPayloadSeeds() [][]byte {
	var s [][]byte
	for _, v := range []string{
		``, ` `, `{}`, `[]`, `{"a":1}`, `{"a": 1}`, ` {"a":1}`, `{"a":1} `, `{"a":1}{}`, `[1,2,3]`, `[1,]`, `[,1]`,
		`"x"`, `"a b"`, `"\u00e9\n\t\"\\\/"`, `"\u12g4"`, `"\x"`, "\"a\x01\"", `"unterminated`, `true`, `tru`, `falsey`,
		`null`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e`, `1e-`, `-12.5e-3`, `{"a":[true,false,null,{"b":"c"}]}`,
		`{"a"}`, `{"a":}`, `{1:2}`, `{"a":1,}`, `{"a":1,"b"}`, "{\"a\":\"\xff\"}", "\xff\xfe", `[[[[]]]]`, `]`, `}`, `{"a":1]`,
		"[\n]", `{"orderId":"order-7","amount":3}`, `hello world`, `[1 ,2]`,
	} {
		s = append(s, []byte(v))
	}
	s = append(s, []byte(strings.Repeat("[", jsonMaxDepth)+strings.Repeat("]", jsonMaxDepth)))
	s = append(s, []byte(strings.Repeat("[", jsonMaxDepth+1)+strings.Repeat("]", jsonMaxDepth+1)))
	s = append(s, []byte(strings.Repeat(`{"a":`, jsonMaxDepth)+"1"+strings.Repeat("}", jsonMaxDepth)))
	s = append(s, []byte(strings.Repeat(`{"a":`, jsonMaxDepth+1)+"1"+strings.Repeat("}", jsonMaxDepth+1)))
	return s
}

// TestKafkaPayloadEncoding: the fast classifier agrees with envelope.ClassifyPayload.
func TestKafkaPayloadEncoding(t *testing.T) {
	for _, p := range kafkaPayloadSeeds() {
		if got, want := kafkaPayloadEncoding(p), envelope.ClassifyPayload(p); got != want {
			t.Errorf("%.60q: got %s, envelope.ClassifyPayload says %s", p, got, want)
		}
	}
}

func FuzzKafkaPayloadEncoding(f *testing.F) {
	for _, p := range kafkaPayloadSeeds() {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if got, want := kafkaPayloadEncoding(p), envelope.ClassifyPayload(p); got != want {
			t.Fatalf("%q: got %s, envelope.ClassifyPayload says %s", p, got, want)
		}
	})
}

// TestFromKafkaBinaryKeyAndHeaders: a Long key and an Avro-style binary
// header (magic byte, schema ID) keep the entry well formed; they read as
// base64, marked so, and give back the same bytes, through JSON too.
func TestFromKafkaBinaryKeyAndHeaders(t *testing.T) {
	r := springRecord()
	r.Key = be64(-42) // a Long key: 0xff… is not UTF-8
	avro := []byte{0x00, 0x00, 0x00, 0x01, 0xc3, 0x28}
	r.Headers = append(r.Headers, KafkaHeader{Key: "schema", Value: avro})
	e := FromKafka(r, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
	if e.Malformed != "" {
		t.Fatalf("malformed: %s", e.Malformed)
	}
	if e.KeyEncoding != envelope.BinaryEncoding || e.PropertyEncodings["schema"] != envelope.BinaryEncoding || len(e.PropertyEncodings) != 1 {
		t.Fatalf("key %q (%q), encodings %v", e.Key, e.KeyEncoding, e.PropertyEncodings)
	}
	check := func(e envelope.Envelope) {
		t.Helper()
		if k, err := e.KeyBytes(); err != nil || string(k) != string(be64(-42)) {
			t.Fatalf("key bytes %x %v", k, err)
		}
		if v, err := e.PropertyBytes("schema"); err != nil || string(v) != string(avro) {
			t.Fatalf("schema bytes %x %v", v, err)
		}
		if v, err := e.PropertyBytes("tenant"); err != nil || string(v) != "acme" {
			t.Fatalf("tenant %q %v", v, err)
		}
	}
	check(e)
	b, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"key_encoding":"base64"`) || !strings.Contains(string(b), `"property_encodings":{"schema":"base64"}`) {
		t.Fatalf("JSON %s", b)
	}
	var back envelope.Envelope
	if err := back.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	check(back)
	// A text key and text headers carry no encodings (the JSON is as it
	// was before binary keys were kept).
	plain := FromKafka(springRecord(), envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
	if plain.KeyEncoding != "" || plain.PropertyEncodings != nil {
		t.Fatalf("text record: %q %v", plain.KeyEncoding, plain.PropertyEncodings)
	}
	// The event ID taken from a binary key is still refused.
	if e := FromKafka(r, envelope.EventIDSource{Kind: "key"}, envelope.DefaultFieldNames()); !strings.Contains(e.Malformed, "invalid UTF-8") {
		t.Fatalf("event ID from a binary key: %q", e.Malformed)
	}
	// A JSON envelope whose encoded key is not base64 is malformed.
	if err := back.UnmarshalJSON([]byte(`{"event_id":"E","key":"%%","key_encoding":"base64","payload_encoding":"json","payload":{}}`)); err == nil {
		t.Fatal("a bad base64 key was accepted")
	}
}

// TestFromKafkaNewerDeadLetteringWins: an entry imported with dlqctl
// headers, redriven, and dead-lettered again by Spring keeps the old
// last_error, error_class and dead_lettered_at headers; Spring's newer
// exception and the record's time win over them. A record that only an
// import wrote, and one whose consumer wrote both at the same
// dead-lettering, keep the dlqctl fields.
func TestFromKafkaNewerDeadLetteringWins(t *testing.T) {
	old := "2026-11-29T10:05:00Z"
	redrivenAt := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	failedAt := redrivenAt.Add(3 * time.Second)
	record := func(extra ...KafkaHeader) KafkaRecord {
		hs := []KafkaHeader{
			{Key: "event_id", Value: []byte("E9")},
			{Key: "last_error", Value: []byte("connection reset by peer")},
			{Key: "error_class", Value: []byte("transient")},
			{Key: "dead_lettered_at", Value: []byte(old)},
			{Key: envelope.ImportedFromProperty, Value: []byte("orders-dlq/1-0")},
		}
		hs = append(hs, extra...)
		return KafkaRecord{Topic: "orders.DLT", Partition: 0, Offset: 7, Value: []byte(`{}`), Headers: hs, Timestamp: failedAt}
	}
	spring := []KafkaHeader{
		{Key: SpringOriginalTopic, Value: []byte("orders")},
		{Key: SpringOriginalTimestamp, Value: be64(redrivenAt.UnixMilli())},
		{Key: SpringExceptionFQCN, Value: []byte("org.springframework.kafka.listener.ListenerExecutionFailedException")},
		{Key: SpringExceptionMessage, Value: []byte("403 Forbidden")},
	}
	cases := []struct {
		name             string
		r                KafkaRecord
		lastError, class string
		deadLetteredAt   time.Time
	}{
		{"redriven and failed again", record(append([]KafkaHeader{{Key: redrivenFromHeader, Value: []byte("orders-dlq/0:3")}}, spring...)...),
			"403 Forbidden", "org.springframework.kafka.listener.ListenerExecutionFailedException", failedAt},
		// Without the redrive marker the record's time may be the
		// import's: the failing record's own time is the bound.
		{"failed again, no redrive marker", record(spring...),
			"403 Forbidden", "org.springframework.kafka.listener.ListenerExecutionFailedException", redrivenAt},
		{"imported only", record(), "connection reset by peer", "transient", mustTime(t, old)},
		{"imported with its old Spring headers", record(
			KafkaHeader{Key: SpringOriginalTimestamp, Value: be64(mustTime(t, old).Add(-time.Minute).UnixMilli())},
			KafkaHeader{Key: SpringExceptionMessage, Value: []byte("connection reset")}),
			"connection reset by peer", "transient", mustTime(t, old)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := FromKafka(c.r, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
			if e.LastError != c.lastError || e.ErrorClass != c.class || !e.DeadLetteredAt.Equal(c.deadLetteredAt) {
				t.Errorf("last_error %q, error_class %q, dead_lettered_at %v; want %q, %q, %v", e.LastError, e.ErrorClass, e.DeadLetteredAt, c.lastError, c.class, c.deadLetteredAt)
			}
		})
	}
	// A consumer that writes the dlqctl fields and Spring's headers at
	// one dead-lettering: its own fields stand.
	same := record(spring...)
	same.Headers[3].Value = []byte(failedAt.Format(time.RFC3339))
	same.Headers = append(same.Headers[:4], same.Headers[5:]...) // not imported
	if e := FromKafka(same, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames()); e.LastError != "connection reset by peer" || e.ErrorClass != "transient" {
		t.Errorf("one dead-lettering written twice: last_error %q, error_class %q", e.LastError, e.ErrorClass)
	}
}

// TestFromKafkaRelayedKeepsProducerFields: a record whose producer wrote
// the envelope fields and Spring's headers at one dead-lettering, published
// again much later (a relay, a copy between clusters, a restore from
// backup), never passed through dlqctl: its error_class stands (the
// producer's hint picks the category) and its age runs from its
// dead_lettered_at, not from the copy's time.
func TestFromKafkaRelayedKeepsProducerFields(t *testing.T) {
	deadAt := time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC)
	copiedAt := deadAt.Add(36 * time.Hour)
	hs := []KafkaHeader{
		{Key: "event_id", Value: []byte("E7")},
		{Key: "last_error", Value: []byte("card declined")},
		{Key: "error_class", Value: []byte("payment-declined")},
		{Key: "dead_lettered_at", Value: []byte(deadAt.Format(time.RFC3339))},
		{Key: SpringOriginalTopic, Value: []byte("orders")},
		{Key: SpringOriginalTimestamp, Value: be64(deadAt.Add(-time.Second).UnixMilli())},
		{Key: SpringExceptionFQCN, Value: []byte("org.springframework.kafka.listener.ListenerExecutionFailedException")},
		{Key: SpringExceptionMessage, Value: []byte("Listener failed; card declined")},
	}
	r := KafkaRecord{Topic: "orders.DLT", Partition: 0, Offset: 3, Value: []byte(`{}`), Headers: hs, Timestamp: copiedAt}
	e := FromKafka(r, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
	envelopetest.Check(t, e, "0:3")
	if e.ErrorClass != "payment-declined" || e.LastError != "card declined" || !e.DeadLetteredAt.Equal(deadAt) {
		t.Errorf("error_class %q, last_error %q, dead_lettered_at %v; want the producer's: payment-declined, card declined, %v", e.ErrorClass, e.LastError, e.DeadLetteredAt, deadAt)
	}
	// The same record once it went through a dlqctl redrive and failed
	// again: its fields are the earlier dead-lettering's.
	redriven := r
	redriven.Headers = append(append([]KafkaHeader(nil), hs...), KafkaHeader{Key: "dlqctl_run_id", Value: []byte("run-1")})
	if e := FromKafka(redriven, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames()); e.ErrorClass == "payment-declined" || !e.DeadLetteredAt.Equal(copiedAt) {
		t.Errorf("redriven and failed again: error_class %q, dead_lettered_at %v; want Spring's and %v", e.ErrorClass, e.DeadLetteredAt, copiedAt)
	}
}

// maxPublishMillis is 9999-12-31T23:59:59.999Z: a broker's publish time
// is a wall clock, never outside RFC 3339's years.
const maxPublishMillis = 253402300799999

// FuzzKafkaDecodePlain: the decoder's shortcuts (names resolved ahead,
// headers in slices, the compact-JSON check) must give what the general
// key/value reading gives, for any record and either set of field names
// (aliases overlapping across fields turn the first shortcut off).
func FuzzKafkaDecodePlain(f *testing.F) {
	f.Add(int32(0), int64(1), []byte("k"), []byte(`{"a":1}`), []byte("event_id=E\nkafka_dlt-original-topic=t\nkafka_dlt-original-partition=#4\nkafka_dlt-original-offset=#8"), "", false)
	f.Add(int32(3), int64(9), []byte{0xff}, []byte{0, 1}, []byte("__connect.errors.topic=t\n__connect.errors.partition=x\nerror=boom"), "key", true)
	f.Add(int32(1), int64(2), []byte(nil), []byte("v"), []byte("source_topic=t\nsource_offset=-3\neventId=Z\npayload_encoding=utf8\nreason=r"), "json:a", false)
	f.Add(int32(1), int64(2), []byte("k"), []byte(`{"a": 1}`), []byte("event_id=E\nattempts=x\ntenant=\xff\nother=\xfe"), "header:event_id", true)
	f.Fuzz(func(t *testing.T, partition int32, offset int64, key, value, headers []byte, from string, overlap bool) {
		src, err := ParseKafkaEventIDSource(from)
		if err != nil {
			src = envelope.EventIDSource{Kind: "property"}
		}
		names := envelope.DefaultFieldNames()
		if overlap {
			names = names.Merge(envelope.FieldNames{envelope.FieldErrorClass: {"error", "category"}})
		}
		r := KafkaRecord{Partition: partition, Offset: offset, Key: key, Value: value, Headers: fuzzHeaders(headers), Timestamp: time.UnixMilli(1_700_000_000_000)}
		fast := NewKafkaDecoder(src, names)
		plain := NewKafkaDecoder(src, names)
		plain.plain = true
		got, want := fast.Decode(r), plain.Decode(r)
		if (got.Malformed == "") != (want.Malformed == "") {
			t.Fatalf("malformed %q, plain decoding says %q", got.Malformed, want.Malformed)
		}
		// Which of two bad properties is named first may differ (the plain
		// reading walks a map); the verdict and everything else may not.
		got.Malformed, want.Malformed = "", ""
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoding differs from the plain reading:\ngot  %#v\nwant %#v", got, want)
		}
	})
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm.UTC()
}

// TestKeptIDsLeaveRecordsGo keeps the id of every decoded record, as
// discover's groups do, and checks that the records' header text goes: an
// id that was a slice of that text kept each record's headers alive (a
// stack trace header is often tens of kilobytes).
func TestKeptIDsLeaveRecordsGo(t *testing.T) {
	const records, trace = 200, 64 << 10
	d := NewKafkaDecoder(envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
	keep := func() []string {
		ids := make([]string, records)
		for i := range ids {
			r := springRecord()
			r.Offset = int64(i)
			r.Headers = append(r.Headers, KafkaHeader{Key: "kafka_dlt-exception-stacktrace", Value: []byte(strings.Repeat("at x.y(Z.java:1)\n", trace/17))})
			ids[i] = d.Lean(r).ID
		}
		return ids
	}
	ids, grew := envelopetest.Retained(keep)
	if ids[7] != "2:7" {
		t.Fatalf("id %q, want 2:7", ids[7])
	}
	if grew > 1<<20 {
		t.Errorf("keeping %d ids kept %d bytes on the heap; the records' %d-byte headers stayed with them", len(ids), grew, trace)
	}
}
