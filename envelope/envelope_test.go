package envelope

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func fullEnvelope(t *testing.T, enc string, payload []byte) Envelope {
	t.Helper()
	return Envelope{
		ID: "20261129T080713Z-0001", EventID: "E42", Fingerprint: ComputeFingerprint(payload),
		PayloadVersion: "3", ContentType: "application/json", Key: "order-123",
		Origin:          Origin{Backend: "redis", Topic: "orders", Subscription: "order-workers", Consumer: "worker-2"},
		FirstReceivedAt: mustTime(t, "2026-11-29T10:00:00Z"),
		DeadLetteredAt:  mustTime(t, "2026-11-29T10:05:00.5Z"),
		Attempts:        5, LastError: "timeout <calling> payments & co", ErrorClass: "transient",
		Owner: "team-payments", RecoverBy: mustTime(t, "2026-11-30T10:00:00Z"), SchemaInfo: "orders.v3",
		RedriveCount: 1, Properties: map[string]string{"tenant": "acme", "b": "<&>"},
		PayloadEncoding: enc, Payload: payload,
	}
}

func TestMarshalJSONRoundTrip(t *testing.T) {
	cases := []struct {
		name    string
		enc     string
		payload []byte
	}{
		{"json object", EncodingJSON, []byte(`{"orderId":"order-123","amount":1200}`)},
		{"json html chars", EncodingJSON, []byte(`{"q":"a<b>&c","r":"\u003c\u0026"}`)},
		{"json unicode", EncodingJSON, []byte(`["é","\u2028",null,true,1.5e3]`)},
		{"json string", EncodingJSON, []byte(`"x"`)},
		{"utf8 text", EncodingUTF8, []byte("hello <world> & \"friends\"\n\ttabbed")},
		{"utf8 csv", EncodingUTF8, []byte("order-1,12.50,EUR\r\n")},
		{"utf8 empty", EncodingUTF8, []byte{}},
		{"base64 binary", EncodingBase64, []byte{0x00, 0xff, 0x0a, 0x08, 0x96, 0x01, 0x00, 0xfe}},
		{"base64 nul only", EncodingBase64, []byte{0, 0, 0}},
		{"base64 text", EncodingBase64, []byte("<>&")},
		{"base64 empty", EncodingBase64, []byte{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := fullEnvelope(t, c.enc, c.payload)
			first, err := e.MarshalJSON()
			if err != nil {
				t.Fatalf("MarshalJSON: %v", err)
			}
			if !json.Valid(first) {
				t.Fatalf("MarshalJSON output is not JSON: %s", first)
			}
			if bytes.Contains(first, []byte(`\u003c`)) && !bytes.Contains(c.payload, []byte(`\u003c`)) {
				t.Errorf("HTML escaping in output: %s", first)
			}
			d := DecodeFile(e.ID, first)
			if d.Malformed != "" {
				t.Fatalf("DecodeFile of MarshalJSON output: %s\n%s", d.Malformed, first)
			}
			if !bytes.Equal(d.Payload, c.payload) {
				t.Errorf("Payload = %q, want %q", d.Payload, c.payload)
			}
			if d.PayloadEncoding != c.enc {
				t.Errorf("PayloadEncoding = %q, want %q", d.PayloadEncoding, c.enc)
			}
			if d.VerifyFingerprint() != FingerprintMatch {
				t.Errorf("fingerprint %s after round trip", d.VerifyFingerprint())
			}
			if !reflect.DeepEqual(d, e) {
				t.Errorf("decoded envelope differs:\n got %+v\nwant %+v", d, e)
			}
			second, err := d.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first, second) {
				t.Errorf("not byte-identical:\n%s\n%s", first, second)
			}
			// The dir-queue form survives too.
			ind, err := MarshalIndent(e)
			if err != nil {
				t.Fatal(err)
			}
			if d2 := DecodeFile(e.ID, ind); d2.Malformed != "" || !bytes.Equal(d2.Payload, c.payload) {
				t.Errorf("MarshalIndent round trip: malformed %q payload %q", d2.Malformed, d2.Payload)
			}
		})
	}
}

func TestMarshalJSONFromIncidentStyleFileIsStable(t *testing.T) {
	// An indented file with non-UTC times and an indented payload: the first
	// MarshalJSON normalises, after that a round trip is byte-identical.
	data := []byte(`{
  "schema": "dlqctl.envelope/v1",
  "id": "x",
  "event_id": "E1",
  "dead_lettered_at": "2026-11-29T11:05:00.000+01:00",
  "payload": {
    "a": "<&>",
    "b": [1, 2]
  }
}`)
	e := DecodeFile("x", data)
	if e.Malformed != "" {
		t.Fatal(e.Malformed)
	}
	first, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schema":"dlqctl.envelope/v1","id":"x","event_id":"E1","fingerprint":"` + ComputeFingerprint([]byte(`{"a":"<&>","b":[1,2]}`)) +
		`","origin":{},"dead_lettered_at":"2026-11-29T10:05:00Z","attempts":0,"last_error":"","error_class":"","redrive_count":0,"payload_encoding":"json","payload":{"a":"<&>","b":[1,2]}}`
	if string(first) != want {
		t.Errorf("MarshalJSON =\n%s\nwant\n%s", first, want)
	}
	second, _ := DecodeFile("x", first).MarshalJSON()
	if !bytes.Equal(first, second) {
		t.Errorf("second round trip differs:\n%s\n%s", first, second)
	}
}

func topLevelKeys(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %v %v", tok, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestMarshalJSONFieldOrder(t *testing.T) {
	full, err := fullEnvelope(t, EncodingJSON, []byte(`{"a":1}`)).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"schema", "id", "event_id", "fingerprint", "payload_version", "content_type", "key", "origin",
		"first_received_at", "dead_lettered_at", "attempts", "last_error", "error_class", "owner", "recover_by",
		"schema_info", "redrive_count", "properties", "payload_encoding", "payload"}
	if got := topLevelKeys(t, full); !reflect.DeepEqual(got, want) {
		t.Errorf("keys =\n%v\nwant\n%v", got, want)
	}
	if !bytes.Contains(full, []byte(`"origin":{"backend":"redis","topic":"orders","subscription":"order-workers","consumer":"worker-2"}`)) {
		t.Errorf("origin not in SPEC order: %s", full)
	}
	if !bytes.HasPrefix(full, []byte(`{"schema":"dlqctl.envelope/v1",`)) {
		t.Errorf("does not start with the schema: %s", full)
	}

	// A minimal envelope keeps the always-present fields.
	min, err := Envelope{ID: "1", EventID: "E", PayloadEncoding: EncodingUTF8, Payload: []byte("x")}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	wantMin := []string{"schema", "id", "event_id", "origin", "attempts", "last_error", "error_class", "redrive_count", "payload_encoding", "payload"}
	if got := topLevelKeys(t, min); !reflect.DeepEqual(got, wantMin) {
		t.Errorf("minimal keys =\n%v\nwant\n%v", got, wantMin)
	}

	// malformed and raw follow the payload.
	mal, err := Envelope{ID: "1", Malformed: "empty file", Raw: []byte("x")}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	keys := topLevelKeys(t, mal)
	if n := len(keys); n < 2 || keys[n-2] != "malformed" || keys[n-1] != "raw" {
		t.Errorf("malformed keys = %v", keys)
	}
}

func TestMarshalJSONErrors(t *testing.T) {
	cases := []struct {
		name string
		e    Envelope
	}{
		{"json encoding, invalid payload", Envelope{EventID: "E", PayloadEncoding: EncodingJSON, Payload: []byte(`{"a":`)}},
		{"unknown encoding", Envelope{EventID: "E", PayloadEncoding: "hex", Payload: []byte(`00`)}},
	}
	for _, c := range cases {
		if _, err := c.e.MarshalJSON(); err == nil {
			t.Errorf("%s: MarshalJSON succeeded", c.name)
		}
	}
}

func TestMarshalIndent(t *testing.T) {
	e := fullEnvelope(t, EncodingJSON, []byte(`{"a":[1,2]}`))
	b, err := MarshalIndent(e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(b, []byte("}\n")) || bytes.HasSuffix(b, []byte("\n\n")) {
		t.Errorf("MarshalIndent does not end with one newline: %q", b[len(b)-5:])
	}
	if !bytes.HasPrefix(b, []byte("{\n  \"schema\": \"dlqctl.envelope/v1\",\n  \"id\": ")) {
		t.Errorf("not 2-space indented: %.60q", b)
	}
	compact, _ := e.MarshalJSON()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil || !bytes.Equal(buf.Bytes(), compact) {
		t.Errorf("MarshalIndent is not the indented MarshalJSON (%v)", err)
	}
	if !bytes.Contains(b, []byte(`"b": "<&>"`)) {
		t.Errorf("HTML escaped in MarshalIndent: %s", b)
	}
}

func TestClassifyPayload(t *testing.T) {
	cases := []struct {
		name    string
		payload []byte
		want    string
	}{
		{"compact object", []byte(`{"a":1,"b":[true,null]}`), EncodingJSON},
		{"compact string", []byte(`"abc"`), EncodingJSON},
		{"number", []byte(`42`), EncodingJSON},
		{"null", []byte(`null`), EncodingJSON},
		{"compact with html", []byte(`{"q":"<&>"}`), EncodingJSON},
		{"indented object", []byte("{\n  \"a\": 1\n}"), EncodingUTF8},
		{"space after colon", []byte(`{"a": 1}`), EncodingUTF8},
		{"trailing newline", []byte("{\"a\":1}\n"), EncodingUTF8},
		{"leading space", []byte(" 1"), EncodingUTF8},
		{"truncated json", []byte(`{"a":`), EncodingUTF8},
		{"plain text", []byte("hello"), EncodingUTF8},
		{"text with nul", []byte("a\x00b"), EncodingUTF8},
		{"empty", []byte{}, EncodingUTF8},
		{"nil", nil, EncodingUTF8},
		{"invalid utf8", []byte{0xff, 0xfe, 0x00}, EncodingBase64},
		{"latin-1", []byte("f\xfcr"), EncodingBase64},
		{"truncated rune", []byte("\xe2\x82"), EncodingBase64},
		// encoding/json's Valid accepts invalid UTF-8 inside strings, but
		// such bytes cannot be inlined in an envelope (DecodeFile rejects
		// invalid UTF-8 and a JSON writer replaces it).
		{"json string with invalid utf8", []byte("\"\xff\""), EncodingBase64},
		{"json object with latin-1", []byte("{\"name\":\"M\xfcller\"}"), EncodingBase64},
	}
	for _, c := range cases {
		if got := ClassifyPayload(c.payload); got != c.want {
			t.Errorf("%s: ClassifyPayload(%q) = %q, want %q", c.name, c.payload, got, c.want)
		}
	}
}

// An envelope decoded from a key/value entry must export (MarshalJSON) to a
// record that reads back (DecodeFile) with the same payload bytes and
// fingerprint, whatever the payload bytes were.
func TestRoundTripFromFields(t *testing.T) {
	cases := []struct {
		name   string
		fields map[string]string
	}{
		{"compact json", map[string]string{"payload": `{"a":1}`}},
		{"indented json", map[string]string{"payload": "{\n  \"a\": 1\n}"}},
		{"binary", map[string]string{"payload": "\x00\xff\x01"}},
		{"text", map[string]string{"payload": "a<b>&c"}},
		{"explicit json, compact", map[string]string{"payload": `{"a":1}`, "payload_encoding": "json"}},
		{"explicit json, indented", map[string]string{"payload": "{\n  \"a\": 1\n}", "payload_encoding": "json"}},
		{"explicit json, leading space", map[string]string{"payload": " 1", "payload_encoding": "json"}},
		{"explicit base64, binary", map[string]string{"payload": "\x00\xff", "payload_encoding": "base64"}},
		{"explicit utf8", map[string]string{"payload": "{ }", "payload_encoding": "utf8"}},
		{"json string with invalid utf8", map[string]string{"payload": "\"\xff\""}},
		{"json object with latin-1", map[string]string{"payload": "{\"name\":\"M\xfcller\"}"}},
		{"carried fingerprint", map[string]string{"payload": "{\n \"a\": 1\n}", "payload_encoding": "json", "fingerprint": ComputeFingerprint([]byte("{\n \"a\": 1\n}"))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fields["event_id"] = "E1"
			e := DecodeFields("1-0", "redis", c.fields, DefaultFieldNames())
			if e.Malformed != "" {
				t.Fatalf("Malformed = %q", e.Malformed)
			}
			b, err := e.MarshalJSON()
			if err != nil {
				t.Fatalf("MarshalJSON: %v", err)
			}
			d := DecodeFile("1-0", b)
			if d.Malformed != "" {
				t.Fatalf("exported record does not decode: %s\n%q", d.Malformed, b)
			}
			if !bytes.Equal(d.Payload, e.Payload) {
				t.Errorf("payload changed by export: %q -> %q (encoding %s)", e.Payload, d.Payload, e.PayloadEncoding)
			}
			if d.Fingerprint != e.Fingerprint || d.VerifyFingerprint() != FingerprintMatch {
				t.Errorf("fingerprint after export: %s (%s), before %s", d.Fingerprint, d.VerifyFingerprint(), e.Fingerprint)
			}
		})
	}
}

// Text fields of key/value entries are binary-safe in Redis, but
// the envelope's JSON form is UTF-8: invalid UTF-8 in event_id must not
// silently become U+FFFD on export (that merges distinct event IDs). SPEC §3
// lists "invalid encoding" among the reasons an entry is malformed.
func TestInvalidUTF8EventIDSurvivesOrIsMalformed(t *testing.T) {
	cases := []struct {
		name string
		e    Envelope
	}{
		{"fields", DecodeFields("1-0", "redis", map[string]string{"event_id": "E\xff1", "payload": "x"}, DefaultFieldNames())},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.e.Malformed != "" {
				return
			}
			b, err := c.e.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			d := DecodeFile(c.e.ID, b)
			if d.EventID != c.e.EventID {
				t.Errorf("event_id %q became %q after export; want it kept or the entry malformed", c.e.EventID, d.EventID)
			}
		})
	}
}

// Every envelope DecodeFile returns, malformed or not, must be exportable:
// export writes MarshalJSON and DecodeRecord reads it back (SPEC §3: no
// input makes dlqctl skip an entry).
func TestMalformedEnvelopeExports(t *testing.T) {
	cases := []struct {
		name string
		data []byte
	}{
		{"truncated", []byte(`{"event_id":"E1","payload":{"a":`)},
		{"no event_id", fileWith(map[string]string{"event_id": "-"})},
		{"bad base64", fileWith(map[string]string{"payload_encoding": `"base64"`, "payload": `"!!"`})},
		{"attempts five", fileWith(map[string]string{"attempts": `"five"`, "payload_encoding": `"json"`})},
		{"bad time", fileWith(map[string]string{"dead_lettered_at": `"yesterday"`, "payload_encoding": `"json"`})},
		{"bad time, utf8 payload", fileWith(map[string]string{"dead_lettered_at": `"yesterday"`, "payload_encoding": `"utf8"`, "payload": `"x"`})},
		{"unknown encoding after bad field", fileWith(map[string]string{"attempts": `"five"`, "payload_encoding": `"xml"`, "payload": `"<a/>"`})},
		{"empty", []byte{}},
		{"array", []byte(`[{"event_id":"E1"}]`)},
		{"invalid utf8", []byte("{\"event_id\":\"\xfc\"}")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := DecodeFile("m-1", c.data)
			if e.Malformed == "" {
				t.Fatal("not malformed")
			}
			line, err := e.MarshalJSON()
			if err != nil {
				t.Fatalf("MarshalJSON of malformed envelope (encoding %q, payload %q): %v", e.PayloadEncoding, e.Payload, err)
			}
			if _, err := MarshalIndent(e); err != nil {
				t.Errorf("MarshalIndent: %v", err)
			}
			r, err := DecodeRecord(line)
			if err != nil {
				t.Fatalf("DecodeRecord: %v\n%s", err, line)
			}
			if r.ID != "m-1" || r.Malformed != e.Malformed || !bytes.Equal(r.Raw, c.data) {
				t.Errorf("record: ID %q Malformed %q Raw %q", r.ID, r.Malformed, r.Raw)
			}
		})
	}
}

// A time that is valid RFC 3339 in its own offset may fall outside years
// 0000–9999 in UTC, which RFC 3339 cannot write: decoding must then either
// call the entry malformed or keep a time that survives export.
func TestTimeAtRFC3339Limits(t *testing.T) {
	for _, s := range []string{"9999-12-31T23:00:00-05:00", "0000-01-01T00:30:00+01:00", "9999-12-31T23:59:59Z", "0000-01-01T00:00:00Z"} {
		e := DecodeFile("x", fileWith(map[string]string{"dead_lettered_at": `"` + s + `"`}))
		if e.Malformed != "" {
			continue
		}
		b, err := e.MarshalJSON()
		if err != nil {
			t.Errorf("%s: MarshalJSON: %v", s, err)
			continue
		}
		d := DecodeFile("x", b)
		if d.Malformed != "" || !d.DeadLetteredAt.Equal(e.DeadLetteredAt) {
			t.Errorf("%s: decoded as %s, export does not read back: %q", s, e.DeadLetteredAt.Format(time.RFC3339), d.Malformed)
		}
	}
}

func TestUnmarshalJSON(t *testing.T) {
	var e Envelope
	if err := json.Unmarshal([]byte(specExample), &e); err != nil {
		t.Fatal(err)
	}
	if e.ID != "1732890000000-0" || e.EventID != "E42" || string(e.Payload) != `{"orderId":"order-123","amount":1200}` {
		t.Errorf("UnmarshalJSON: %+v", e)
	}
	if e.FingerprintComputed || e.Malformed != "" {
		t.Errorf("UnmarshalJSON set computed/malformed: %+v", e)
	}
	err := json.Unmarshal(fileWith(map[string]string{"attempts": `"five"`}), &e)
	if err == nil || !strings.Contains(err.Error(), "attempts") {
		t.Errorf("UnmarshalJSON of a bad envelope: %v", err)
	}
}

func TestIsCompactAgreesWithJSONCompact(t *testing.T) {
	for _, in := range []string{`{}`, `{"a":1}`, `{"a": 1}`, "{\"a\":\n1}", `["x y"]`, `{"k":"a\" b"}`, `{"k":"a\\"} `, `"s"`, `1`, `[1,2, 3]`, `{"a":"\t"}`} {
		if !json.Valid([]byte(in)) {
			continue
		}
		var buf bytes.Buffer
		json.Compact(&buf, []byte(in))
		want := buf.String() == in
		if got := isCompact([]byte(in)); got != want {
			t.Errorf("isCompact(%q) = %v, json.Compact says %v", in, got, want)
		}
	}
}

func TestMemoClassifiesLikeTheClassifier(t *testing.T) {
	c := NewClassifier(DefaultRules())
	m := c.Memo()
	for _, e := range []Envelope{
		{EventID: "1", LastError: "timeout"}, {EventID: "2", LastError: "timeout"}, {EventID: "3", LastError: "timeout", ErrorClass: "schema"},
		{EventID: "4", LastError: "order not found"}, {EventID: "5", Malformed: "bad"}, {EventID: "6", LastError: "timeout"},
	} {
		for _, conflict := range []bool{false, true} {
			if got, want := m.Classify(e, conflict), c.Classify(e, conflict); got != want {
				t.Errorf("%+v conflict=%v: memo %+v, classifier %+v", e, conflict, got, want)
			}
		}
	}
	origin := []Rule{{Name: "x", Disposition: DispositionRedrive, Origin: regexp.MustCompile("^orders$"), Source: "t"}}
	mo := NewClassifier(origin).Memo()
	a := mo.Classify(Envelope{LastError: "e", Origin: Origin{Topic: "orders"}}, false)
	b := mo.Classify(Envelope{LastError: "e", Origin: Origin{Topic: "payments"}}, false)
	if a.Category == b.Category {
		t.Errorf("a memo over origin rules must not reuse a classification: %v %v", a, b)
	}
}
