package pulsardlq

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/envelope/envelopetest"
)

func pulsarMsg() PulsarMessage {
	return PulsarMessage{
		ID:    "123:45:-1:-1",
		Topic: "persistent://public/default/orders-sub-DLQ",
		Key:   "order-123",
		Properties: map[string]string{
			"REAL_TOPIC":        "persistent://public/default/orders",
			"ORIGIN_MESSAGE_ID": "123:40:-1:-1",
			"RECONSUMETIMES":    "3",
			"event_id":          "E42",
			"tenant":            "acme",
		},
		Payload:         []byte(`{"orderId":"order-123","amount":1200}`),
		PublishTime:     time.Date(2026, 11, 29, 11, 5, 0, 0, time.FixedZone("CET", 3600)),
		RedeliveryCount: 7,
	}
}

func TestFromPulsar(t *testing.T) {
	m := pulsarMsg()
	m.OrderingKey = "ok-1"
	m.EventTime = time.Date(2026, 11, 29, 9, 59, 0, 500, time.UTC)
	e := FromPulsar(m, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
	if e.Malformed != "" {
		t.Fatalf("Malformed = %q", e.Malformed)
	}
	if e.ID != "123:45:-1:-1" || e.EventID != "E42" || e.Key != "order-123" {
		t.Errorf("ID %q EventID %q Key %q", e.ID, e.EventID, e.Key)
	}
	if e.Origin != (envelope.Origin{Backend: "pulsar", Topic: "persistent://public/default/orders"}) {
		t.Errorf("Origin = %+v", e.Origin)
	}
	if e.Attempts != 3 {
		t.Errorf("Attempts = %d, want RECONSUMETIMES 3", e.Attempts)
	}
	if !e.DeadLetteredAt.Equal(time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC)) || e.DeadLetteredAt.Location() != time.UTC {
		t.Errorf("DeadLetteredAt = %v, want publish time in UTC", e.DeadLetteredAt)
	}
	wantProps := map[string]string{
		"ORIGIN_MESSAGE_ID": "123:40:-1:-1",
		"tenant":            "acme",
		PropOrderingKey:     "ok-1",
		PropEventTime:       "2026-11-29T09:59:00.0000005Z",
	}
	if !maps.Equal(e.Properties, wantProps) {
		t.Errorf("Properties = %v, want %v", e.Properties, wantProps)
	}
	if e.PayloadEncoding != envelope.EncodingJSON || string(e.Payload) != string(m.Payload) {
		t.Errorf("payload %s %q", e.PayloadEncoding, e.Payload)
	}
	if e.Fingerprint != specPayloadFingerprint || !e.FingerprintComputed {
		t.Errorf("Fingerprint %q computed=%v", e.Fingerprint, e.FingerprintComputed)
	}
	if m.Properties["REAL_TOPIC"] == "" || m.Properties["RECONSUMETIMES"] == "" {
		t.Error("FromPulsar changed the message's properties")
	}
}

func TestFromPulsarFields(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*PulsarMessage)
		check func(envelope.Envelope) string // "" when fine
	}{
		{"redelivery count without RECONSUMETIMES", func(m *PulsarMessage) { delete(m.Properties, "RECONSUMETIMES") },
			func(e envelope.Envelope) string { return want(e.Attempts == 7, "Attempts %d, want 7", e.Attempts) }},
		{"RECONSUMETIMES zero beats redelivery count", func(m *PulsarMessage) { m.Properties["RECONSUMETIMES"] = "0" },
			func(e envelope.Envelope) string { return want(e.Attempts == 0, "Attempts %d, want 0", e.Attempts) }},
		{"attempts property beats redelivery count", func(m *PulsarMessage) {
			delete(m.Properties, "RECONSUMETIMES")
			m.Properties["attempts"] = "4"
		}, func(e envelope.Envelope) string {
			return want(e.Attempts == 4 && e.Properties["attempts"] == "", "Attempts %d props %v", e.Attempts, e.Properties)
		}},
		{"no redelivery", func(m *PulsarMessage) { delete(m.Properties, "RECONSUMETIMES"); m.RedeliveryCount = 0 },
			func(e envelope.Envelope) string { return want(e.Attempts == 0, "Attempts %d", e.Attempts) }},
		{"no REAL_TOPIC", func(m *PulsarMessage) { delete(m.Properties, "REAL_TOPIC") },
			func(e envelope.Envelope) string {
				return want(e.Origin.Topic == "" && e.Origin.Backend == "pulsar", "Origin %+v", e.Origin)
			}},
		{"dead_lettered_at property beats publish time", func(m *PulsarMessage) { m.Properties["dead_lettered_at"] = "2026-11-29T08:00:00Z" },
			func(e envelope.Envelope) string {
				return want(e.DeadLetteredAt.Equal(time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)), "DeadLetteredAt %v", e.DeadLetteredAt)
			}},
		{"no publish time", func(m *PulsarMessage) { m.PublishTime = time.Time{} },
			func(e envelope.Envelope) string {
				return want(e.DeadLetteredAt.IsZero(), "DeadLetteredAt %v", e.DeadLetteredAt)
			}},
		{"no ordering key or event time", func(m *PulsarMessage) {},
			func(e envelope.Envelope) string {
				_, ok1 := e.Properties[PropOrderingKey]
				_, ok2 := e.Properties[PropEventTime]
				return want(!ok1 && !ok2, "Properties %v", e.Properties)
			}},
		{"fingerprint from property", func(m *PulsarMessage) { m.Properties["fingerprint"] = "sha256:ABC" },
			func(e envelope.Envelope) string {
				return want(e.Fingerprint == "sha256:ABC" && !e.FingerprintComputed && e.Properties["fingerprint"] == "" && e.VerifyFingerprint() == envelope.FingerprintMismatch,
					"Fingerprint %q computed %v", e.Fingerprint, e.FingerprintComputed)
			}},
		{"envelope fields from properties", func(m *PulsarMessage) {
			m.Properties["last_error"] = "boom"
			m.Properties["error_class"] = "schema"
			m.Properties["owner"] = "team-orders"
			m.Properties["payload_version"] = "3"
		}, func(e envelope.Envelope) string {
			return want(e.LastError == "boom" && e.ErrorClass == "schema" && e.Owner == "team-orders" && e.PayloadVersion == "3" && len(e.Properties) == 2,
				"%+v", e)
		}},
		{"key property beats message key", func(m *PulsarMessage) { m.Properties["key"] = "k-prop" },
			func(e envelope.Envelope) string { return want(e.Key == "k-prop", "Key %q", e.Key) }},
		{"binary payload", func(m *PulsarMessage) { m.Payload = []byte{0, 0xff, 1} },
			func(e envelope.Envelope) string {
				return want(e.PayloadEncoding == envelope.EncodingBase64 && string(e.Payload) == "\x00\xff\x01", "%s %q", e.PayloadEncoding, e.Payload)
			}},
		{"nil properties and payload", func(m *PulsarMessage) { m.Properties = nil; m.Payload = nil; m.Key = "" },
			func(e envelope.Envelope) string {
				return want(strings.Contains(e.Malformed, "event"), "Malformed %q", e.Malformed)
			}},
		{"bad RECONSUMETIMES", func(m *PulsarMessage) { m.Properties["RECONSUMETIMES"] = "three" },
			func(e envelope.Envelope) string {
				return want(strings.Contains(e.Malformed, "RECONSUMETIMES") && e.ID == "123:45:-1:-1", "Malformed %q", e.Malformed)
			}},
		{"bad attempts property", func(m *PulsarMessage) { m.Properties["delivery_count"] = "x" },
			func(e envelope.Envelope) string {
				return want(strings.Contains(e.Malformed, "attempts"), "Malformed %q", e.Malformed)
			}},
		{"bad dead_lettered_at property", func(m *PulsarMessage) { m.Properties["dead_lettered_at"] = "now" },
			func(e envelope.Envelope) string {
				return want(strings.Contains(e.Malformed, "dead_lettered_at"), "Malformed %q", e.Malformed)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := pulsarMsg()
			m.Properties = maps.Clone(m.Properties)
			c.edit(&m)
			e := FromPulsar(m, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
			if msg := c.check(e); msg != "" {
				t.Error(msg)
			}
			if e.Malformed == "" && (e.EventID == "" || e.Fingerprint == "") {
				t.Errorf("decoded without event ID or fingerprint: %+v", e)
			}
		})
	}
}

func want(ok bool, format string, args ...any) string {
	if ok {
		return ""
	}
	return "got " + fmt.Sprintf(format, args...)
}

func TestFromPulsarEventID(t *testing.T) {
	names := envelope.DefaultFieldNames()
	cases := []struct {
		name    string
		from    string
		props   map[string]string
		key     string
		payload string
		want    string // "" = malformed
		reason  string // substring of Malformed
	}{
		{"property event_id", "", map[string]string{"event_id": "E1"}, "k", `{}`, "E1", ""},
		{"property eventId", "", map[string]string{"eventId": "E2"}, "k", `{}`, "E2", ""},
		{"event_id beats eventId", "", map[string]string{"event_id": "E1", "eventId": "E2"}, "k", `{}`, "E1", ""},
		{"empty event_id falls to eventId", "", map[string]string{"event_id": "", "eventId": "E2"}, "k", `{}`, "E2", ""},
		{"custom property", "property:msgId", map[string]string{"msgId": "M1", "event_id": "E1"}, "k", `{}`, "M1", ""},
		{"custom property missing", "property:msgId", map[string]string{"event_id": "E1"}, "k", `{}`, "", "msgId"},
		{"json top level", "json:eventId", nil, "k", `{"eventId":"J1"}`, "J1", ""},
		{"json nested", "json:meta.event.id", nil, "k", `{"meta":{"event":{"id":"J2"}}}`, "J2", ""},
		{"json numeric", "json:seq", nil, "k", `{"seq":42}`, "42", ""},
		{"json numeric fraction", "json:seq", nil, "k", `{"seq":4.5}`, "4.5", ""},
		{"json numeric large", "json:id", nil, "k", `{"id":1234567890123456789}`, "1234567890123456789", ""},
		{"json beats property", "json:id", map[string]string{"event_id": "E1"}, "k", `{"id":"J3"}`, "J3", ""},
		{"json missing field", "json:meta.id", nil, "k", `{"meta":{}}`, "", "id"},
		{"json not inside object", "json:meta.id", nil, "k", `{"meta":"x"}`, "", "meta.id"},
		{"json payload not JSON", "json:id", nil, "k", `not json`, "", "not JSON"},
		{"json bool", "json:id", nil, "k", `{"id":true}`, "", "not a string or number"},
		{"json object", "json:id", nil, "k", `{"id":{}}`, "", "not a string or number"},
		{"json empty string", "json:id", nil, "k", `{"id":""}`, "", "id"},
		{"json null", "json:id", nil, "k", `{"id":null}`, "", "id"},
		{"key", "key", map[string]string{"event_id": "E1"}, "order-9", `{}`, "order-9", ""},
		{"key missing", "key", map[string]string{"event_id": "E1"}, "", `{}`, "", "key"},
		{"no property", "", map[string]string{"tenant": "acme"}, "k", `{}`, "", "event_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			from, err := envelope.ParseEventIDSource(c.from)
			if err != nil {
				t.Fatal(err)
			}
			m := PulsarMessage{ID: "1:2:3:4", Key: c.key, Properties: c.props, Payload: []byte(c.payload)}
			e := FromPulsar(m, from, names)
			if e.ID != "1:2:3:4" {
				t.Errorf("ID = %q", e.ID)
			}
			if c.want == "" {
				if e.Malformed == "" || !strings.Contains(e.Malformed, c.reason) {
					t.Errorf("Malformed = %q (EventID %q), want a reason mentioning %q", e.Malformed, e.EventID, c.reason)
				}
				return
			}
			if e.Malformed != "" || e.EventID != c.want {
				t.Errorf("EventID = %q, Malformed %q; want %q", e.EventID, e.Malformed, c.want)
			}
		})
	}
}

func TestFromPulsarCustomFieldNames(t *testing.T) {
	names := envelope.DefaultFieldNames().Merge(envelope.FieldNames{envelope.FieldEventID: {"x-event-id"}, envelope.FieldFingerprint: {"x-fp"}})
	m := PulsarMessage{ID: "1:1:-1:-1", Properties: map[string]string{"x-event-id": "X1", "x-fp": "md5:1", "event_id": "E1"}, Payload: []byte("p")}
	e := FromPulsar(m, envelope.EventIDSource{Kind: "property"}, names)
	if e.Malformed != "" || e.EventID != "X1" || e.Fingerprint != "md5:1" || e.Properties["event_id"] != "E1" {
		t.Errorf("custom names: %+v", e)
	}
	// The zero envelope.EventIDSource reads the default properties too.
	e = FromPulsar(PulsarMessage{ID: "1", Properties: map[string]string{"eventId": "E2"}, Payload: []byte("p")}, envelope.EventIDSource{}, envelope.DefaultFieldNames())
	if e.Malformed != "" || e.EventID != "E2" {
		t.Errorf("zero EventIDSource: %+v", e)
	}
}

func TestParseEventIDSource(t *testing.T) {
	good := []struct {
		in   string
		want envelope.EventIDSource
	}{
		{"", envelope.EventIDSource{Kind: "property"}},
		{"key", envelope.EventIDSource{Kind: "key"}},
		{"property:msgId", envelope.EventIDSource{Kind: "property", Name: "msgId"}},
		{"property:a:b", envelope.EventIDSource{Kind: "property", Name: "a:b"}},
		{"json:order.id", envelope.EventIDSource{Kind: "json", Name: "order.id"}},
		{"json:id", envelope.EventIDSource{Kind: "json", Name: "id"}},
	}
	for _, c := range good {
		got, err := envelope.ParseEventIDSource(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseEventIDSource(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"property", "property:", "json", "json:", "key:x", "header:x", "PROPERTY:x", "Key", ":x", "payload"} {
		if got, err := envelope.ParseEventIDSource(in); err == nil {
			t.Errorf("ParseEventIDSource(%q) = %+v, want an error", in, got)
		} else if !strings.Contains(err.Error(), "--event-id-from") {
			t.Errorf("ParseEventIDSource(%q) error %q does not name the flag", in, err)
		}
	}
}

func TestFromPulsarInvalidUTF8KeyIsMalformed(t *testing.T) {
	m := PulsarMessage{ID: "1:2:-1:-1", Key: "k\xff", Properties: map[string]string{"event_id": "E1"}, Payload: []byte(`{}`)}
	e := FromPulsar(m, envelope.EventIDSource{Kind: "property"}, envelope.DefaultFieldNames())
	if e.Malformed == "" {
		t.Fatalf("a message key with invalid UTF-8 must make the entry malformed, got %+v", e)
	}
}

// maxPublishMillis is 9999-12-31T23:59:59.999Z: a broker's publish time
// is a wall clock, never outside RFC 3339's years.
const maxPublishMillis = 253402300799999

func FuzzFromPulsar(f *testing.F) {
	f.Fuzz(func(t *testing.T, id, key, orderingKey, from string, props, payload []byte, eventTimeMillis, publishTimeMillis int64, redelivery uint32) {
		id = envelopetest.FuzzID(id)
		src, err := envelope.ParseEventIDSource(from)
		if err != nil {
			src = envelope.EventIDSource{Kind: "property"}
		}
		m := PulsarMessage{
			ID: id, Topic: "persistent://t/n/dlq", Key: key, OrderingKey: orderingKey,
			Properties: envelopetest.FuzzFields(props), Payload: payload, RedeliveryCount: redelivery,
		}
		if eventTimeMillis != 0 {
			m.EventTime = time.UnixMilli(eventTimeMillis)
		}
		if publishTimeMillis > 0 {
			m.PublishTime = time.UnixMilli(publishTimeMillis % (maxPublishMillis + 1))
		}
		before := len(m.Properties)
		e := FromPulsar(m, src, envelope.DefaultFieldNames())
		if len(m.Properties) != before {
			t.Fatal("FromPulsar changed the message's properties")
		}
		if e.Origin.Backend != "pulsar" {
			t.Fatalf("Origin.Backend = %q", e.Origin.Backend)
		}
		if rt, ok := m.Properties[PulsarRealTopic]; ok && e.Origin.Topic != rt {
			t.Fatalf("Origin.Topic = %q, want REAL_TOPIC %q", e.Origin.Topic, rt)
		}
		if orderingKey != "" && e.Properties[PropOrderingKey] != orderingKey {
			t.Fatalf("ordering key lost: %v", e.Properties)
		}
		if !m.EventTime.IsZero() && e.Properties[PropEventTime] == "" {
			t.Fatalf("event time lost: %v", e.Properties)
		}
		envelopetest.Check(t, e, id)
	})
}

// specPayloadFingerprint is sha256 of `{"orderId":"order-123","amount":1200}`.
const specPayloadFingerprint = "sha256:a5ef18c1769683090410a6668cade89dfc96ea052a28d25734d9d6cd323e1af8"
