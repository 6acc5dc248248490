package rabbitmq

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/envelope"
)

func testDecoder(t testing.TB, from string, limits map[string]int) *decoder {
	t.Helper()
	names, err := envelope.FieldNames(nil).Complete()
	if err != nil {
		t.Fatal(err)
	}
	src, err := parseEventIDSource(from)
	if err != nil {
		t.Fatal(err)
	}
	return &decoder{names: names, from: src, quorumDeliveries: func(q string) int {
		if l, ok := limits[q]; ok {
			return l + 1
		}
		return 0
	}}
}

var deathTime = time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC)

func deadLetter(headers amqp.Table) message {
	h := amqp.Table{
		"x-death": []any{
			amqp.Table{"count": int64(3), "exchange": "orders-ex", "queue": "orders", "reason": "rejected",
				"routing-keys": []any{"orders.created"}, "time": deathTime},
			amqp.Table{"count": int64(1), "exchange": "", "queue": "intake", "reason": "expired",
				"routing-keys": []any{"intake"}, "time": deathTime.Add(-time.Hour)},
		},
		"x-first-death-queue": "intake", "x-first-death-reason": "expired", "x-first-death-exchange": "",
	}
	for k, v := range headers {
		h[k] = v
	}
	return message{headers: h, props: amqp.Publishing{MessageId: "E42", ContentType: "application/json",
		DeliveryMode: amqp.Persistent, CorrelationId: "c1", Body: []byte(`{"order":1}`)}}
}

func TestDecodeDeadLetter(t *testing.T) {
	e := testDecoder(t, "", nil).decode(deadLetter(amqp.Table{"tenant": "acme", "bin": []byte{0xff, 0}}), false)
	if e.Malformed != "" {
		t.Fatalf("malformed: %s", e.Malformed)
	}
	if e.EventID != "E42" || e.Origin.Topic != "intake" || e.Origin.Backend != "rabbitmq" {
		t.Errorf("event/origin: %+v", e)
	}
	if e.LastError != "rejected" || e.Attempts != 3 || !e.DeadLetteredAt.Equal(deathTime) {
		t.Errorf("from x-death[0]: last_error %q attempts %d at %s", e.LastError, e.Attempts, e.DeadLetteredAt)
	}
	if !e.FingerprintComputed || e.Fingerprint != envelope.ComputeFingerprint([]byte(`{"order":1}`)) {
		t.Errorf("fingerprint %s computed=%v", e.Fingerprint, e.FingerprintComputed)
	}
	if e.Properties["tenant"] != "acme" || e.Properties["bin"] != "base64:/wA=" || e.Properties[pCorrelationID] != "c1" ||
		e.Properties[pDeliveryMode] != "2" || e.Properties[hFirstDeathQueue] != "intake" {
		t.Errorf("properties: %v", e.Properties)
	}
	xd := e.Properties[pXDeath]
	for _, want := range []string{`"queue":"orders"`, `"queue":"intake"`, `"routing_keys":["orders.created"]`, `"count":3`, `"reason":"expired"`} {
		if !strings.Contains(xd, want) {
			t.Errorf("x-death property %s lacks %s", xd, want)
		}
	}
	if len(e.ID) != 24 {
		t.Errorf("id %q", e.ID)
	}
}

func TestDecodeConsumerHeadersWin(t *testing.T) {
	e := testDecoder(t, "", map[string]int{"intake": 5}).decode(deadLetter(amqp.Table{
		"last_error": "timeout calling payments", "attempts": "7", "fingerprint": "sha256:abc", "key": "order-1",
	}), false)
	if e.LastError != "timeout calling payments" || e.Attempts != 7 || e.Fingerprint != "sha256:abc" || e.FingerprintComputed || e.Key != "order-1" {
		t.Errorf("headers named like fields: %+v", e)
	}
	if _, ok := e.Properties["last_error"]; ok {
		t.Errorf("a field header is also a property: %v", e.Properties)
	}
}

func TestDecodeAttemptsFromQuorumLimit(t *testing.T) {
	e := testDecoder(t, "", map[string]int{"intake": 4}).decode(deadLetter(nil), false)
	if e.Attempts != 5 {
		t.Errorf("attempts %d, want the quorum origin's limit + 1", e.Attempts)
	}
	// x-delivery-count counts this DLQ's redeliveries: never attempts, never a property.
	e = testDecoder(t, "", nil).decode(deadLetter(amqp.Table{"x-delivery-count": int64(9)}), false)
	if e.Attempts != 3 || e.Properties["x-delivery-count"] != "" {
		t.Errorf("x-delivery-count leaked: attempts %d props %v", e.Attempts, e.Properties)
	}
}

func TestDecodeEventIDRules(t *testing.T) {
	m := deadLetter(amqp.Table{"event_id": "H1"})
	if e := testDecoder(t, "", nil).decode(m, false); e.EventID != "E42" {
		t.Errorf("message_id first: %q", e.EventID)
	}
	m.props.MessageId = ""
	if e := testDecoder(t, "", nil).decode(m, false); e.EventID != "H1" || e.Malformed != "" {
		t.Errorf("event_id header second: %q %s", e.EventID, e.Malformed)
	}
	if e := testDecoder(t, "property:message_id", nil).decode(m, false); e.Malformed == "" {
		t.Errorf("property:message_id without one: not malformed")
	}
	m = deadLetter(amqp.Table{"trace": "T9"})
	if e := testDecoder(t, "header:trace", nil).decode(m, false); e.EventID != "T9" {
		t.Errorf("header:trace: %q", e.EventID)
	}
	if e := testDecoder(t, "json:order", nil).decode(m, false); e.EventID != "1" {
		t.Errorf("json:order: %q", e.EventID)
	}
	if _, err := parseEventIDSource("attribute:x"); err == nil {
		t.Error("attribute:x accepted")
	}
}

func TestDecodeMalformedNeverDropped(t *testing.T) {
	d := testDecoder(t, "", nil)
	for name, m := range map[string]message{
		"no event id":         {props: amqp.Publishing{Body: []byte("x")}},
		"x-death not array":   deadLetter(amqp.Table{"x-death": "oops"}),
		"x-death entry shape": deadLetter(amqp.Table{"x-death": []any{amqp.Table{"count": "three"}}}),
		"invalid utf8 header": deadLetter(amqp.Table{"note": "a\xffb"}),
		"bad attempts":        deadLetter(amqp.Table{"attempts": "many"}),
		"bad time":            deadLetter(amqp.Table{"dead_lettered_at": "yesterday"}),
		"bad message_id":      {props: amqp.Publishing{MessageId: "\xff", Body: []byte("x")}},
	} {
		e := d.decode(m, false)
		if e.Malformed == "" {
			t.Errorf("%s: not malformed: %+v", name, e)
			continue
		}
		if len(e.Raw) == 0 || !utf8.Valid(e.Raw) || e.ID == "" {
			t.Errorf("%s: malformed without raw form or id", name)
		}
	}
}

func TestIdentityStable(t *testing.T) {
	d := testDecoder(t, "", nil)
	a := d.decode(deadLetter(nil), false)
	b := d.decode(deadLetter(amqp.Table{"x-delivery-count": int64(4), "tenant": "x"}), true)
	if a.ID != b.ID {
		t.Errorf("the id moved with redeliveries: %s vs %s", a.ID, b.ID)
	}
	other := deadLetter(nil)
	other.props.Body = []byte(`{"order":2}`)
	if c := d.decode(other, false); c.ID == a.ID {
		t.Error("two payloads share an id")
	}
	seen := ids{}
	if x, y := seen.next(a.ID), seen.next(a.ID); x != a.ID || y != a.ID+"-2" {
		t.Errorf("ordinals: %s %s", x, y)
	}
}

func TestLeanMatchesFull(t *testing.T) {
	d := testDecoder(t, "", nil)
	m := deadLetter(amqp.Table{"tenant": "acme"})
	full, lean := d.decode(m, false), d.decode(m, true)
	full.Properties, full.Raw = nil, nil
	if full.ID != lean.ID || full.EventID != lean.EventID || full.Fingerprint != lean.Fingerprint || full.Malformed != lean.Malformed ||
		full.Attempts != lean.Attempts || full.LastError != lean.LastError || full.Origin != lean.Origin {
		t.Errorf("lean %+v\nfull %+v", lean, full)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add("E1", "k", "v", []byte(`{"a":1}`), int64(2), "orders", "rejected")
	f.Add("", "event_id", "\xff", []byte{0xff}, int64(-1), "", "")
	f.Add("x", "x-death", "oops", []byte(nil), int64(1<<40), "q\xff", "maxlen")
	f.Fuzz(func(t *testing.T, msgID, hk, hv string, body []byte, count int64, queue, reason string) {
		d := testDecoder(t, "", nil)
		m := message{props: amqp.Publishing{MessageId: msgID, Body: body}, headers: amqp.Table{
			hk:        hv,
			"x-death": []any{amqp.Table{"count": count, "queue": queue, "reason": reason, "time": deathTime}},
		}}
		for _, lean := range []bool{false, true} {
			e := d.decode(m, lean)
			if e.ID == "" {
				t.Fatal("no id")
			}
			if e.Malformed == "" {
				if e.EventID == "" || !utf8.ValidString(e.EventID) || e.Fingerprint == "" {
					t.Fatalf("well-formed without a valid event ID or fingerprint: %+v", e)
				}
				if _, err := e.MarshalJSON(); err != nil {
					t.Fatalf("does not marshal: %v", err)
				}
			} else if !lean && len(e.Raw) == 0 {
				t.Fatal("malformed without raw")
			}
		}
	})
}

func TestDecodeKeyFromHeader(t *testing.T) {
	d := testDecoder(t, "", nil)
	d.keyHeader = "tenant"
	e := d.decode(deadLetter(amqp.Table{"tenant": "acme", "key": "k1"}), false)
	if e.Malformed != "" || e.Key != "acme" || e.Properties["key"] != "k1" || e.Properties["tenant"] != "acme" {
		t.Errorf("key %q malformed %q properties %v", e.Key, e.Malformed, e.Properties)
	}
	if e := d.decode(deadLetter(amqp.Table{"key": "k1"}), false); e.Malformed != "" || e.Key != "" {
		t.Errorf("without the header: key %q malformed %q, want no key", e.Key, e.Malformed)
	}
	if e := d.decode(deadLetter(amqp.Table{"tenant": "\xff"}), false); e.Malformed == "" || !strings.Contains(e.Malformed, "tenant") {
		t.Errorf("invalid UTF-8 key: malformed %q", e.Malformed)
	}
	for _, bad := range []string{"tenant", "header:", "json:a", "property:x"} {
		if _, err := parseKeySource(bad); err == nil {
			t.Errorf("parseKeySource(%q) accepted", bad)
		}
	}
}
