package natsdlq

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dlqctl/dlqctl/envelope"
)

func testDecoder() decoder { return newDecoder(envelope.DefaultFieldNames()) }

func TestDecodeCopy(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC)
	h := nats.Header{}
	h.Set("event_id", "E42")
	h.Set(HeaderMsgID, "pub-1")
	h.Set(HeaderOriginalSubject, "orders.created")
	h.Set("last_error", "timeout calling payments")
	h.Set("attempts", "5")
	h.Set("key", "order-123")
	h.Set("tenant", "acme")
	h.Set("Nats-Expected-Stream", "ORDERS")
	e := testDecoder().decode(Message{Seq: 7, Subject: "dlq.orders", Header: h, Data: []byte(`{"a":1}`), Time: at}, false)
	if e.Malformed != "" {
		t.Fatal(e.Malformed)
	}
	if e.ID != "7" || e.EventID != "E42" || e.Origin.Topic != "orders.created" || e.Origin.Backend != "nats" ||
		e.Attempts != 5 || e.Key != "order-123" || !e.DeadLetteredAt.Equal(at) || e.PayloadEncoding != envelope.EncodingJSON {
		t.Errorf("decoded %+v", e)
	}
	if e.Properties["tenant"] != "acme" || e.Properties[HeaderMsgID] != "pub-1" {
		t.Errorf("properties %v", e.Properties)
	}
	if !e.FingerprintComputed || e.Fingerprint != envelope.ComputeFingerprint([]byte(`{"a":1}`)) {
		t.Errorf("fingerprint %s", e.Fingerprint)
	}
}

func TestDecodeEventIDFromMsgID(t *testing.T) {
	h := nats.Header{}
	h.Set(HeaderMsgID, "M-9")
	h.Set(HeaderNatsOriginalSubject, "orders")
	e := testDecoder().decode(Message{Seq: 1, Header: h, Data: []byte("x")}, false)
	if e.Malformed != "" || e.EventID != "M-9" || e.Origin.Topic != "orders" {
		t.Errorf("decoded %+v", e)
	}
	if _, ok := e.Properties[HeaderMsgID]; ok {
		t.Errorf("Nats-Msg-Id used as the event ID is also a property: %v", e.Properties)
	}
}

func TestDecodeMalformed(t *testing.T) {
	for name, h := range map[string]nats.Header{
		"no event ID":     {"last_error": {"x"}},
		"invalid UTF-8":   {"event_id": {"E1"}, "note": {"\xff\xfe"}},
		"bad attempts":    {"event_id": {"E1"}, "attempts": {"many"}},
		"bad time":        {"event_id": {"E1"}, "dead_lettered_at": {"yesterday"}},
		"huge event ID":   {"event_id": {strings.Repeat("e", maxEventID+1)}},
		"bad encoding":    {"event_id": {"E1"}, "payload_encoding": {"rot13"}},
		"imported broken": {"event_id": {"E1"}, envelope.MalformedMarker: {"was broken"}},
	} {
		e := testDecoder().decode(Message{Seq: 3, Header: h, Data: []byte("p")}, false)
		if e.Malformed == "" {
			t.Errorf("%s: not malformed: %+v", name, e)
			continue
		}
		if e.ID != "3" || len(e.Raw) == 0 {
			t.Errorf("%s: id %q raw %q", name, e.ID, e.Raw)
		}
	}
}

func TestRedriveMsgIDNeverTheOriginal(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	a := RedriveMsgID("DLQ", 5, at, "E1", "sha256:ab", "orders.created")
	if a != RedriveMsgID("DLQ", 5, at.In(time.FixedZone("X", 3600)), "E1", "SHA256:AB", "orders.created") {
		t.Error("the same copy gives two IDs")
	}
	for name, other := range map[string]string{
		"another sequence":                   RedriveMsgID("DLQ", 6, at, "E1", "sha256:ab", "orders.created"),
		"another incarnation (stored later)": RedriveMsgID("DLQ", 5, at.Add(time.Nanosecond), "E1", "sha256:ab", "orders.created"),
		"another destination":                RedriveMsgID("DLQ", 5, at, "E1", "sha256:ab", "orders.retry"),
		"another stream":                     RedriveMsgID("DLQ2", 5, at, "E1", "sha256:ab", "orders.created"),
		"the producer's ID":                  "E1",
	} {
		if a == other {
			t.Errorf("%s gives the same ID %q", name, a)
		}
	}
	if !strings.HasPrefix(a, "dlqctl-redrive:DLQ:5:") {
		t.Errorf("ID %q", a)
	}
}

func FuzzDecodeCopy(f *testing.F) {
	f.Add("event_id", "E1", "attempts", "3", []byte(`{"a":1}`))
	f.Add("Nats-Msg-Id", "\xff", "dead_lettered_at", "2026-01-01T00:00:00Z", []byte{0xff})
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, data []byte) {
		h := nats.Header{k1: {v1}, k2: {v2}}
		e := testDecoder().decode(Message{Seq: 1, Header: h, Data: data}, false)
		lean := testDecoder().decode(Message{Seq: 1, Header: h, Data: data}, true)
		lean.Properties, lean.PayloadEncoding, lean.Raw = e.Properties, e.PayloadEncoding, e.Raw
		if fmt.Sprint(lean) != fmt.Sprint(e) {
			t.Fatalf("lean decode differs:\n%+v\n%+v", lean, e)
		}
		if e.ID != "1" {
			t.Fatalf("id %q", e.ID)
		}
		if e.Malformed == "" {
			if e.EventID == "" || e.Fingerprint == "" {
				t.Fatalf("well-formed without event ID or fingerprint: %+v", e)
			}
			if _, err := e.MarshalJSON(); err != nil {
				t.Fatalf("well-formed envelope does not marshal: %v", err)
			}
		} else if len(e.Raw) == 0 {
			t.Fatal("malformed without its raw form")
		}
	})
}

func TestParseAdvisory(t *testing.T) {
	ok := `{"type":"io.nats.jetstream.advisory.v1.max_deliver","id":"x","timestamp":"2026-11-29T10:00:00Z","stream":"ORDERS","consumer":"C","stream_seq":7,"deliveries":3}`
	a, err := parseAdvisory([]byte(ok))
	if err != nil || a.Stream != "ORDERS" || a.StreamSeq != 7 || a.Deliveries != 3 || a.Reason != "" {
		t.Errorf("%+v %v", a, err)
	}
	term := `{"type":"io.nats.jetstream.advisory.v1.terminated","stream":"ORDERS","consumer":"C","stream_seq":8,"deliveries":1,"reason":"bad"}`
	if a, err := parseAdvisory([]byte(term)); err != nil || a.Reason != "bad" {
		t.Errorf("%+v %v", a, err)
	}
	if _, err := parseAdvisory([]byte(`{"type":"io.nats.jetstream.advisory.v1.nak","stream":"S","stream_seq":1}`)); err != errNotDeadLetter {
		t.Errorf("a nak advisory: %v", err)
	}
	for _, bad := range []string{`not json`, `{"type":"io.nats.jetstream.advisory.v1.max_deliver","stream":"S"}`, `{"type":"io.nats.jetstream.advisory.v1.terminated","stream_seq":3}`} {
		if _, err := parseAdvisory([]byte(bad)); err == nil || err == errNotDeadLetter {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
