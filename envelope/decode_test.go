package envelope

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// specPayloadFingerprint is sha256 of `{"orderId":"order-123","amount":1200}`.
const specPayloadFingerprint = "sha256:a5ef18c1769683090410a6668cade89dfc96ea052a28d25734d9d6cd323e1af8"

// specExample is SPEC §3's example with the fingerprint written out in full.
const specExample = `{
  "schema": "dlqctl.envelope/v1",
  "id": "1732890000000-0",
  "event_id": "E42",
  "fingerprint": "` + specPayloadFingerprint + `",
  "payload_version": "3",
  "content_type": "application/json",
  "key": "order-123",
  "origin": {"backend": "redis", "topic": "orders", "subscription": "order-workers", "consumer": "worker-2"},
  "first_received_at": "2026-11-29T10:00:00Z",
  "dead_lettered_at": "2026-11-29T10:05:00Z",
  "attempts": 5,
  "last_error": "timeout calling payments: context deadline exceeded",
  "error_class": "",
  "owner": "team-payments",
  "recover_by": "2026-11-30T10:00:00Z",
  "schema_info": "orders.v3",
  "redrive_count": 0,
  "properties": {"tenant": "acme"},
  "payload_encoding": "json",
  "payload": {"orderId": "order-123", "amount": 1200}
}
`

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm.UTC()
}

// fileWith returns a minimal valid envelope file with extra (already
// JSON-encoded) fields appended or overriding.
func fileWith(fields map[string]string) []byte {
	base := map[string]string{
		"schema":   `"dlqctl.envelope/v1"`,
		"id":       `"f1"`,
		"event_id": `"E1"`,
		"payload":  `{"a":1}`,
	}
	maps.Copy(base, fields)
	var b strings.Builder
	b.WriteString("{")
	first := true
	for _, k := range []string{"schema", "id", "event_id", "fingerprint", "attempts", "dead_lettered_at", "first_received_at", "recover_by", "origin", "properties", "payload_encoding", "payload"} {
		v, ok := base[k]
		if !ok || v == "-" {
			continue
		}
		if !first {
			b.WriteString(",")
		}
		first = false
		b.WriteString(`"` + k + `":` + v)
	}
	b.WriteString("}")
	return []byte(b.String())
}

func TestDecodeFileSpecExample(t *testing.T) {
	e := DecodeFile("1732890000000-0", []byte(specExample))
	if e.Malformed != "" {
		t.Fatalf("Malformed = %q", e.Malformed)
	}
	want := Envelope{
		ID:              "1732890000000-0",
		EventID:         "E42",
		Fingerprint:     specPayloadFingerprint,
		PayloadVersion:  "3",
		ContentType:     "application/json",
		Key:             "order-123",
		Origin:          Origin{Backend: "redis", Topic: "orders", Subscription: "order-workers", Consumer: "worker-2"},
		FirstReceivedAt: mustTime(t, "2026-11-29T10:00:00Z"),
		DeadLetteredAt:  mustTime(t, "2026-11-29T10:05:00Z"),
		Attempts:        5,
		LastError:       "timeout calling payments: context deadline exceeded",
		ErrorClass:      "",
		Owner:           "team-payments",
		RecoverBy:       mustTime(t, "2026-11-30T10:00:00Z"),
		SchemaInfo:      "orders.v3",
		RedriveCount:    0,
		Properties:      map[string]string{"tenant": "acme"},
		PayloadEncoding: EncodingJSON,
		Payload:         []byte(`{"orderId":"order-123","amount":1200}`),
	}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("DecodeFile:\n got %+v\nwant %+v", e, want)
	}
	for name, tm := range map[string]time.Time{"first_received_at": e.FirstReceivedAt, "dead_lettered_at": e.DeadLetteredAt, "recover_by": e.RecoverBy} {
		if tm.Location() != time.UTC {
			t.Errorf("%s location = %v, want UTC", name, tm.Location())
		}
	}
	if e.FingerprintComputed {
		t.Error("carried fingerprint marked computed")
	}
	if got := e.VerifyFingerprint(); got != FingerprintMatch {
		t.Errorf("VerifyFingerprint = %q, want match", got)
	}
}

func TestDecodeFileIDIsFileName(t *testing.T) {
	e := DecodeFile("from-name", fileWith(map[string]string{"id": `"from-field"`}))
	if e.ID != "from-name" {
		t.Errorf("ID = %q, want the file name", e.ID)
	}
}

func TestDecodeFileTimesToUTC(t *testing.T) {
	e := DecodeFile("f", fileWith(map[string]string{
		"first_received_at": `"2026-11-29T11:00:00+01:00"`,
		"dead_lettered_at":  `"2026-11-29T05:05:00.123456789-05:00"`,
		"recover_by":        `"2026-11-30T10:00:00Z"`,
	}))
	if e.Malformed != "" {
		t.Fatal(e.Malformed)
	}
	cases := []struct {
		name string
		got  time.Time
		want string
	}{
		{"first_received_at", e.FirstReceivedAt, "2026-11-29T10:00:00Z"},
		{"dead_lettered_at", e.DeadLetteredAt, "2026-11-29T10:05:00.123456789Z"},
		{"recover_by", e.RecoverBy, "2026-11-30T10:00:00Z"},
	}
	for _, c := range cases {
		if c.got.Location() != time.UTC || c.got.Format(time.RFC3339Nano) != c.want {
			t.Errorf("%s = %s (%v), want %s UTC", c.name, c.got.Format(time.RFC3339Nano), c.got.Location(), c.want)
		}
	}
}

func TestDecodeFilePayload(t *testing.T) {
	cases := []struct {
		name     string
		encoding string // JSON-encoded payload_encoding field, "-" for absent
		payload  string // JSON-encoded payload field, "-" for absent
		wantEnc  string
		want     []byte
	}{
		{"json object", `"json"`, `{"orderId": "order-123", "amount": 1200}`, EncodingJSON, []byte(`{"orderId":"order-123","amount":1200}`)},
		{"json indented", `"json"`, "{\n    \"a\": [\n      1,\n      2\n    ],\n    \"b\" : {\"c\" : null}\n  }", EncodingJSON, []byte(`{"a":[1,2],"b":{"c":null}}`)},
		{"json html chars kept", `"json"`, `{"q": "a<b>&c"}`, EncodingJSON, []byte(`{"q":"a<b>&c"}`)},
		{"json escapes preserved", `"json"`, `{"q": "\u003cb\u003e \u0026 \"x\""}`, EncodingJSON, []byte(`{"q":"\u003cb\u003e \u0026 \"x\""}`)},
		{"json string", `"json"`, `"abc"`, EncodingJSON, []byte(`"abc"`)},
		{"json number", `"json"`, `12.50`, EncodingJSON, []byte(`12.50`)},
		{"json null", `"json"`, `null`, EncodingJSON, []byte(`null`)},
		{"json array", `"json"`, `[ 1, "two" ]`, EncodingJSON, []byte(`[1,"two"]`)},
		{"utf8", `"utf8"`, `"héllo\nworld <&>"`, EncodingUTF8, []byte("héllo\nworld <&>")},
		{"utf8 escapes", `"utf8"`, `"\u00e9\t\u003c"`, EncodingUTF8, []byte("é\t<")},
		{"utf8 empty", `"utf8"`, `""`, EncodingUTF8, []byte{}},
		{"utf8 null", `"utf8"`, `null`, EncodingUTF8, []byte{}},
		{"base64 binary", `"base64"`, `"AP8BAg=="`, EncodingBase64, []byte{0x00, 0xff, 0x01, 0x02}},
		{"base64 text", `"base64"`, `"dGVzdA=="`, EncodingBase64, []byte("test")},
		{"base64 empty", `"base64"`, `""`, EncodingBase64, []byte{}},
		{"inferred json object", `-`, `{ "a" : 1 }`, EncodingJSON, []byte(`{"a":1}`)},
		{"inferred json number", `-`, `42`, EncodingJSON, []byte(`42`)},
		{"inferred json array", `-`, `[1, 2]`, EncodingJSON, []byte(`[1,2]`)},
		{"inferred utf8 from string", `-`, `"plain text"`, EncodingUTF8, []byte("plain text")},
		{"inferred empty encoding string", `""`, `"plain"`, EncodingUTF8, []byte("plain")},
		{"inferred null", `-`, `null`, EncodingJSON, []byte("null")},
		{"missing payload", `-`, `-`, EncodingJSON, []byte("null")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := DecodeFile("f", fileWith(map[string]string{"payload_encoding": c.encoding, "payload": c.payload}))
			if e.Malformed != "" {
				t.Fatalf("Malformed = %q", e.Malformed)
			}
			if e.PayloadEncoding != c.wantEnc {
				t.Errorf("PayloadEncoding = %q, want %q", e.PayloadEncoding, c.wantEnc)
			}
			if !bytes.Equal(e.Payload, c.want) {
				t.Errorf("Payload = %q, want %q", e.Payload, c.want)
			}
			if fp := ComputeFingerprint(c.want); e.Fingerprint != fp || !e.FingerprintComputed {
				t.Errorf("Fingerprint = %q (computed %v), want computed %q", e.Fingerprint, e.FingerprintComputed, fp)
			}
		})
	}
}

func TestDecodeFileMalformed(t *testing.T) {
	cases := []struct {
		name   string
		data   []byte
		reason []string // substrings of Malformed
	}{
		{"empty file", []byte(""), []string{"empty"}},
		{"whitespace only", []byte(" \n\t\n"), []string{"empty"}},
		{"truncated JSON", []byte(`{"schema":"dlqctl.envelope/v1","event_id":"E1","payload":{"a":`), []string{"invalid JSON"}},
		{"not JSON", []byte(`hello`), []string{"invalid JSON"}},
		{"JSON array", []byte(`[{"event_id":"E1","payload":{}}]`), []string{"not a JSON object", "array"}},
		{"JSON string", []byte(`"E1"`), []string{"not a JSON object"}},
		{"invalid UTF-8", []byte("{\"event_id\":\"E1\",\"last_error\":\"f\xfcr\",\"payload\":{}}"), []string{"UTF-8"}},
		{"missing event_id", fileWith(map[string]string{"event_id": "-"}), []string{"event_id"}},
		{"empty event_id", fileWith(map[string]string{"event_id": `""`}), []string{"event_id"}},
		{"event_id number", fileWith(map[string]string{"event_id": `42`}), []string{"event_id", "string"}},
		{"attempts five", fileWith(map[string]string{"attempts": `"five"`}), []string{"attempts", "whole number"}},
		{"attempts fraction", fileWith(map[string]string{"attempts": `2.5`}), []string{"attempts"}},
		{"bad time", fileWith(map[string]string{"dead_lettered_at": `"yesterday"`}), []string{"dead_lettered_at", "RFC 3339"}},
		{"bad time recover_by", fileWith(map[string]string{"recover_by": `"2026-13-01T00:00:00Z"`}), []string{"recover_by"}},
		{"bad base64", fileWith(map[string]string{"payload_encoding": `"base64"`, "payload": `"not base64!!"`}), []string{"payload", "base64"}},
		{"unknown payload_encoding", fileWith(map[string]string{"payload_encoding": `"xml"`, "payload": `"<a/>"`}), []string{"payload_encoding", "xml"}},
		{"utf8 non-string", fileWith(map[string]string{"payload_encoding": `"utf8"`, "payload": `{"a":1}`}), []string{"payload", "utf8", "string"}},
		{"base64 non-string", fileWith(map[string]string{"payload_encoding": `"base64"`, "payload": `[1]`}), []string{"payload", "base64"}},
		{"unsupported schema", fileWith(map[string]string{"schema": `"dlqctl.envelope/v2"`}), []string{"schema", "dlqctl.envelope/v2"}},
		{"origin not object", fileWith(map[string]string{"origin": `"redis"`}), []string{"origin"}},
		{"properties not strings", fileWith(map[string]string{"properties": `{"n":1}`}), []string{"properties"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := DecodeFile("bad-1", c.data)
			if e.Malformed == "" {
				t.Fatalf("not malformed: %+v", e)
			}
			for _, s := range c.reason {
				if !strings.Contains(e.Malformed, s) {
					t.Errorf("Malformed = %q, want it to mention %q", e.Malformed, s)
				}
			}
			if !bytes.Equal(e.Raw, c.data) {
				t.Errorf("Raw = %q, want the input %q", e.Raw, c.data)
			}
			if e.ID != "bad-1" {
				t.Errorf("ID = %q, want bad-1", e.ID)
			}
		})
	}
}

func TestDecodeFileRawIsACopy(t *testing.T) {
	data := []byte(`[1]`)
	e := DecodeFile("x", data)
	data[0] = '{'
	if string(e.Raw) != `[1]` {
		t.Errorf("Raw aliases the input: %q", e.Raw)
	}
}

func TestDecodeFileMalformedKeepsReadFields(t *testing.T) {
	e := DecodeFile("x", fileWith(map[string]string{"attempts": `"five"`, "dead_lettered_at": `"2026-11-29T10:05:00Z"`}))
	if e.Malformed == "" {
		t.Fatal("not malformed")
	}
	if e.EventID != "E1" || !e.DeadLetteredAt.Equal(mustTime(t, "2026-11-29T10:05:00Z")) {
		t.Errorf("malformed envelope lost readable fields: EventID %q DeadLetteredAt %v", e.EventID, e.DeadLetteredAt)
	}
}

func defaultFields() map[string]string {
	return map[string]string{
		"event_id":          "E1",
		"fingerprint":       "sha256:abc",
		"payload":           `{"a":1}`,
		"payload_version":   "3",
		"content_type":      "application/json",
		"key":               "order-1",
		"origin_stream":     "orders",
		"origin_group":      "order-workers",
		"origin_consumer":   "worker-2",
		"attempts":          "5",
		"last_error":        "boom",
		"error_class":       "transient",
		"first_received_at": "2026-11-29T11:00:00+01:00",
		"dead_lettered_at":  "2026-11-29T10:05:00Z",
		"owner":             "team-orders",
		"recover_by":        "2026-11-30T10:00:00Z",
		"schema_info":       "orders.v3",
		"redrive_count":     "2",
		"tenant":            "acme",
		"trace_id":          "t-1",
	}
}

func TestDecodeFieldsDefaultNames(t *testing.T) {
	e := DecodeFields("1732890000000-0", "redis", defaultFields(), DefaultFieldNames())
	want := Envelope{
		ID:              "1732890000000-0",
		EventID:         "E1",
		Fingerprint:     "sha256:abc",
		PayloadVersion:  "3",
		ContentType:     "application/json",
		Key:             "order-1",
		Origin:          Origin{Backend: "redis", Topic: "orders", Subscription: "order-workers", Consumer: "worker-2"},
		FirstReceivedAt: mustTime(t, "2026-11-29T10:00:00Z"),
		DeadLetteredAt:  mustTime(t, "2026-11-29T10:05:00Z"),
		Attempts:        5,
		LastError:       "boom",
		ErrorClass:      "transient",
		Owner:           "team-orders",
		RecoverBy:       mustTime(t, "2026-11-30T10:00:00Z"),
		SchemaInfo:      "orders.v3",
		RedriveCount:    2,
		Properties:      map[string]string{"tenant": "acme", "trace_id": "t-1"},
		PayloadEncoding: EncodingJSON,
		Payload:         []byte(`{"a":1}`),
	}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("DecodeFields:\n got %+v\nwant %+v", e, want)
	}
}

func TestDecodeFieldsAliases(t *testing.T) {
	base := func(kv ...string) map[string]string {
		m := map[string]string{"payload": "x"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		if _, ok := m["event_id"]; !ok {
			if _, ok := m["eventId"]; !ok {
				m["event_id"] = "E0"
			}
		}
		return m
	}
	cases := []struct {
		name      string
		fields    map[string]string
		check     func(Envelope) bool
		wantProps map[string]string
	}{
		{"eventId", base("eventId", "E7"), func(e Envelope) bool { return e.EventID == "E7" }, nil},
		{"event_id wins over eventId", base("event_id", "E1", "eventId", "E2"), func(e Envelope) bool { return e.EventID == "E1" }, map[string]string{"eventId": "E2"}},
		{"delivery_count", base("delivery_count", "7"), func(e Envelope) bool { return e.Attempts == 7 }, nil},
		{"attempts wins over delivery_count", base("attempts", "3", "delivery_count", "7"), func(e Envelope) bool { return e.Attempts == 3 }, map[string]string{"delivery_count": "7"}},
		{"reason", base("reason", "r-err"), func(e Envelope) bool { return e.LastError == "r-err" }, nil},
		{"error", base("error", "e-err"), func(e Envelope) bool { return e.LastError == "e-err" }, nil},
		{"reason wins over error", base("reason", "r-err", "error", "e-err"), func(e Envelope) bool { return e.LastError == "r-err" }, map[string]string{"error": "e-err"}},
		{"last_error wins", base("last_error", "l", "reason", "r", "error", "e"), func(e Envelope) bool { return e.LastError == "l" }, map[string]string{"reason": "r", "error": "e"}},
		{"category", base("category", "schema"), func(e Envelope) bool { return e.ErrorClass == "schema" }, nil},
		{"error_class wins over category", base("error_class", "transient", "category", "schema"), func(e Envelope) bool { return e.ErrorClass == "transient" }, map[string]string{"category": "schema"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := DecodeFields("1-0", "redis", c.fields, DefaultFieldNames())
			if e.Malformed != "" {
				t.Fatalf("Malformed = %q", e.Malformed)
			}
			if !c.check(e) {
				t.Errorf("alias not applied: %+v", e)
			}
			if !maps.Equal(e.Properties, c.wantProps) {
				t.Errorf("Properties = %v, want %v", e.Properties, c.wantProps)
			}
		})
	}
}

func TestDecodeFieldsPayload(t *testing.T) {
	cases := []struct {
		name     string
		encoding string // "" = no payload_encoding field
		payload  string
		wantEnc  string
		bad      string // substring of Malformed, "" = must decode
	}{
		{"compact json inferred", "", `{"a":[1,2]}`, EncodingJSON, ""},
		{"indented json inferred as utf8", "", "{\n  \"a\": 1\n}", EncodingUTF8, ""},
		{"text", "", "hello, world", EncodingUTF8, ""},
		{"binary", "", "\x00\xff\x01", EncodingBase64, ""},
		{"empty", "", "", EncodingUTF8, ""},
		{"explicit json", "json", `{"a":1}`, EncodingJSON, ""},
		{"explicit utf8", "utf8", `{"a":1}`, EncodingUTF8, ""},
		{"explicit base64 keeps raw bytes", "base64", "\x00\xffabc", EncodingBase64, ""},
		{"explicit json invalid", "json", `{"a":`, "", "payload"},
		{"explicit utf8 invalid", "utf8", "\xff\xfe", "", "UTF-8"},
		{"unknown encoding", "xml", "<a/>", "", "payload_encoding"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := map[string]string{"event_id": "E1", "payload": c.payload}
			if c.encoding != "" {
				f["payload_encoding"] = c.encoding
			}
			e := DecodeFields("1-0", "redis", f, DefaultFieldNames())
			if c.bad != "" {
				if !strings.Contains(e.Malformed, c.bad) {
					t.Errorf("Malformed = %q, want it to mention %q", e.Malformed, c.bad)
				}
				return
			}
			if e.Malformed != "" {
				t.Fatalf("Malformed = %q", e.Malformed)
			}
			if e.PayloadEncoding != c.wantEnc {
				t.Errorf("PayloadEncoding = %q, want %q", e.PayloadEncoding, c.wantEnc)
			}
			if string(e.Payload) != c.payload {
				t.Errorf("Payload = %q, want the raw field %q", e.Payload, c.payload)
			}
			if e.Properties != nil {
				t.Errorf("payload/payload_encoding leaked into properties: %v", e.Properties)
			}
			if e.Fingerprint != ComputeFingerprint([]byte(c.payload)) || !e.FingerprintComputed {
				t.Errorf("Fingerprint = %q computed=%v", e.Fingerprint, e.FingerprintComputed)
			}
		})
	}
}

func TestDecodeFieldsMalformed(t *testing.T) {
	cases := []struct {
		name   string
		fields map[string]string
		reason string
	}{
		{"missing payload", map[string]string{"event_id": "E1", "tenant": "acme"}, "payload"},
		{"missing event_id", map[string]string{"payload": "x", "tenant": "acme"}, "event_id"},
		{"empty event_id", map[string]string{"event_id": "", "payload": "x"}, "event_id"},
		{"bad attempts", map[string]string{"event_id": "E1", "payload": "x", "attempts": "five"}, "attempts"},
		{"bad delivery_count", map[string]string{"event_id": "E1", "payload": "x", "delivery_count": "-"}, "attempts"},
		{"bad redrive_count", map[string]string{"event_id": "E1", "payload": "x", "redrive_count": "1.5"}, "redrive_count"},
		{"bad time", map[string]string{"event_id": "E1", "payload": "x", "first_received_at": "yesterday"}, "first_received_at"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := DecodeFields("9-0", "redis", c.fields, DefaultFieldNames())
			if !strings.Contains(e.Malformed, c.reason) {
				t.Fatalf("Malformed = %q, want it to mention %q", e.Malformed, c.reason)
			}
			if e.ID != "9-0" {
				t.Errorf("ID = %q", e.ID)
			}
			var raw map[string]string
			if err := json.Unmarshal(e.Raw, &raw); err != nil {
				t.Fatalf("Raw %q is not a JSON object of strings: %v", e.Raw, err)
			}
			if !maps.Equal(raw, c.fields) {
				t.Errorf("Raw = %v, want the fields %v", raw, c.fields)
			}
		})
	}
}

func TestDecodeFieldsEmptyCountsAreZero(t *testing.T) {
	e := DecodeFields("1-0", "redis", map[string]string{"event_id": "E1", "payload": "x", "attempts": "", "redrive_count": ""}, DefaultFieldNames())
	if e.Malformed != "" || e.Attempts != 0 || e.RedriveCount != 0 {
		t.Errorf("empty counts: Malformed %q Attempts %d RedriveCount %d", e.Malformed, e.Attempts, e.RedriveCount)
	}
}

func TestFieldNamesMerge(t *testing.T) {
	base := DefaultFieldNames()
	names := base.Merge(FieldNames{FieldEventID: {"msg_id", "messageId"}, FieldPayload: {"body"}, FieldLastError: {"err"}})
	if got := base[FieldEventID]; !reflect.DeepEqual(got, []string{"event_id", "eventId"}) {
		t.Errorf("Merge changed its receiver: %v", got)
	}
	if got := names[FieldAttempts]; !reflect.DeepEqual(got, []string{"attempts", "delivery_count"}) {
		t.Errorf("Merge lost a default: attempts = %v", got)
	}
	fields := map[string]string{"messageId": "M1", "body": "hi", "err": "boom", "event_id": "E-not-used", "reason": "r", "attempts": "2"}
	e := DecodeFields("1-0", "redis", fields, names)
	if e.Malformed != "" {
		t.Fatalf("Malformed = %q", e.Malformed)
	}
	if e.EventID != "M1" || string(e.Payload) != "hi" || e.LastError != "boom" || e.Attempts != 2 {
		t.Errorf("custom names not applied: %+v", e)
	}
	wantProps := map[string]string{"event_id": "E-not-used", "reason": "r"}
	if !maps.Equal(e.Properties, wantProps) {
		t.Errorf("Properties = %v, want %v", e.Properties, wantProps)
	}
	// Without the custom payload name the entry has no payload.
	e = DecodeFields("1-0", "redis", map[string]string{"event_id": "E1", "payload": "x"}, names)
	if !strings.Contains(e.Malformed, "payload") {
		t.Errorf("payload read under a replaced name: Malformed %q", e.Malformed)
	}
}

func TestFieldNamesValidate(t *testing.T) {
	cases := []struct {
		name  string
		names FieldNames
		bad   string
	}{
		{"defaults", DefaultFieldNames(), ""},
		{"empty", FieldNames{}, ""},
		{"known override", FieldNames{FieldEventID: {"id"}, FieldRedriveCount: {"rc"}}, ""},
		{"unknown key", FieldNames{"evnt_id": {"x"}}, "evnt_id"},
		{"alias as key", FieldNames{"eventId": {"x"}}, "eventId"},
		{"properties is no field", FieldNames{"properties": {"x"}}, "properties"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.names.Validate()
			if c.bad == "" {
				if err != nil {
					t.Errorf("Validate = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("Validate = %v, want an error naming %q", err, c.bad)
			}
		})
	}
}

func TestDecodeRecord(t *testing.T) {
	good := Envelope{
		ID: "20261129T080713Z-0001", EventID: "E1", Fingerprint: "sha256:abc",
		Origin: Origin{Backend: "dir"}, Attempts: 3, LastError: "timeout",
		DeadLetteredAt:  mustTime(t, "2026-11-29T10:05:00Z"),
		Properties:      map[string]string{"tenant": "acme"},
		PayloadEncoding: EncodingUTF8, Payload: []byte("hello"),
	}
	line, err := good.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	e, err := DecodeRecord(line)
	if err != nil {
		t.Fatalf("DecodeRecord: %v", err)
	}
	if !reflect.DeepEqual(e, good) {
		t.Errorf("DecodeRecord:\n got %+v\nwant %+v", e, good)
	}

	// No fingerprint: computed.
	e, err = DecodeRecord([]byte(`{"schema":"dlqctl.envelope/v1","id":"a","event_id":"E1","payload_encoding":"utf8","payload":"test"}`))
	if err != nil {
		t.Fatal(err)
	}
	if e.Fingerprint != "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" || !e.FingerprintComputed {
		t.Errorf("Fingerprint = %q computed=%v", e.Fingerprint, e.FingerprintComputed)
	}

	// A malformed record keeps its reason and raw bytes, even though it is
	// not a valid envelope.
	raw := []byte("{\"event_id\": \"E1\", \"attempts\": \"five\"")
	rec := `{"schema":"dlqctl.envelope/v1","id":"m-1","event_id":"","attempts":0,"last_error":"","error_class":"","redrive_count":0,"payload_encoding":"","payload":null,` +
		`"malformed":"invalid JSON: unexpected end of JSON input","raw":"` + base64.StdEncoding.EncodeToString(raw) + `"}`
	e, err = DecodeRecord([]byte(rec))
	if err != nil {
		t.Fatalf("malformed record: %v", err)
	}
	if e.ID != "m-1" || e.Malformed != "invalid JSON: unexpected end of JSON input" || !bytes.Equal(e.Raw, raw) {
		t.Errorf("malformed record: ID %q Malformed %q Raw %q", e.ID, e.Malformed, e.Raw)
	}
	// ... also when its other fields would not decode.
	e, err = DecodeRecord([]byte(`{"id":"m-2","attempts":"five","malformed":"attempts: want a whole number"}`))
	if err != nil || e.Malformed != "attempts: want a whole number" || e.ID != "m-2" {
		t.Errorf("malformed record with bad fields: %+v, %v", e, err)
	}

	bad := []struct {
		name, line, want string
	}{
		{"not JSON", `hello`, "not an envelope"},
		{"truncated", `{"id":"a"`, "not an envelope"},
		{"array", `[{"id":"a"}]`, "not an envelope"},
		{"empty", ``, "not an envelope"},
		{"no id", `{"schema":"dlqctl.envelope/v1","event_id":"E1","payload":{}}`, "id"},
		{"no event_id", `{"schema":"dlqctl.envelope/v1","id":"a","payload":{}}`, "event_id"},
		{"bad attempts", `{"id":"a","event_id":"E1","attempts":"five","payload":{}}`, "attempts"},
		{"bad encoding", `{"id":"a","event_id":"E1","payload_encoding":"hex","payload":"00"}`, "payload_encoding"},
		{"other schema", `{"schema":"other/v9","id":"a","event_id":"E1","payload":{}}`, "schema"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeRecord([]byte(c.line))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("DecodeRecord(%q) error = %v, want one mentioning %q", c.line, err, c.want)
			}
		})
	}
}

// A reason quotes the offending value, truncated: the cut must not split a
// UTF-8 sequence, or the reason itself is invalid UTF-8 (and comes out of
// any JSON writer with U+FFFD in it).
func TestMalformedReasonIsValidUTF8(t *testing.T) {
	long := strings.Repeat("é", 30)
	cases := []struct {
		name string
		e    Envelope
	}{
		{"attempts", DecodeFile("f", fileWith(map[string]string{"attempts": `"` + long + `"`}))},
		{"event_id", DecodeFile("f", fileWith(map[string]string{"event_id": `["` + long + `"]`}))},
		{"utf8 payload", DecodeFile("f", fileWith(map[string]string{"payload_encoding": `"utf8"`, "payload": `{"` + long + `":1}`}))},
		{"fields attempts", DecodeFields("1-0", "redis", map[string]string{"event_id": "E", "payload": "x", "attempts": long}, DefaultFieldNames())},
	}
	for _, c := range cases {
		if c.e.Malformed == "" {
			t.Errorf("%s: not malformed", c.name)
			continue
		}
		if !utf8.ValidString(c.e.Malformed) {
			t.Errorf("%s: Malformed is not valid UTF-8: %q", c.name, c.e.Malformed)
		}
	}
}

// An imported entry that was malformed where it came from carries its
// reason under MalformedMarker and stays malformed.
func TestDecodeFieldsMalformedMarker(t *testing.T) {
	cases := []struct {
		name   string
		fields map[string]string
		want   string // Malformed
	}{
		{"reason kept", map[string]string{"event_id": "E1", "payload": "x", MalformedMarker: "invalid JSON: unexpected end"}, "invalid JSON: unexpected end"},
		{"reason without event_id", map[string]string{"payload": "x", MalformedMarker: "no event_id"}, "no event_id"},
		{"earlier error wins", map[string]string{"event_id": "E1", "payload": "x", "attempts": "five", MalformedMarker: "r"}, "attempts: want a whole number, got \"five\""},
	}
	for _, c := range cases {
		e := DecodeFields("1-0", "redis", c.fields, DefaultFieldNames())
		if e.Malformed != c.want {
			t.Errorf("%s: Malformed = %q, want %q", c.name, e.Malformed, c.want)
		}
		if len(e.Raw) == 0 {
			t.Errorf("%s: no Raw", c.name)
		}
	}
	// An empty marker must still give either a malformed entry or a
	// complete one (event ID and fingerprint), never neither.
	e := DecodeFields("1-0", "redis", map[string]string{"event_id": "E1", "payload": "x", MalformedMarker: ""}, DefaultFieldNames())
	if e.Malformed == "" && e.Fingerprint == "" {
		t.Errorf("empty %s: neither malformed nor fingerprinted: %+v", MalformedMarker, e)
	}
}
