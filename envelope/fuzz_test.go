package envelope

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/; see `go help testflag`.

// checkEnvelope asserts the invariants every decoder keeps: the locator is
// the one given, and an envelope is either malformed or has an event ID and
// a fingerprint. A decodable envelope exports (MarshalJSON) to a file that
// DecodeFile reads back with the same event ID, payload bytes and
// fingerprint; a malformed one still exports, and DecodeRecord reads it
// back as malformed.
func checkEnvelope(t *testing.T, e Envelope, id string) {
	t.Helper()
	if e.ID != id {
		t.Fatalf("ID = %q, want %q", e.ID, id)
	}
	if e.Malformed != "" {
		line, err := e.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON of malformed envelope: %v", err)
		}
		r, err := DecodeRecord(line)
		if err != nil {
			t.Fatalf("DecodeRecord of exported malformed envelope: %v\n%s", err, line)
		}
		if r.Malformed == "" || !bytes.Equal(r.Raw, e.Raw) {
			t.Fatalf("exported malformed envelope reads back as Malformed %q Raw %q, want Raw %q", r.Malformed, r.Raw, e.Raw)
		}
		return
	}
	if e.EventID == "" || e.Fingerprint == "" {
		t.Fatalf("not malformed but EventID %q Fingerprint %q", e.EventID, e.Fingerprint)
	}
	if e.FingerprintComputed && e.Fingerprint != ComputeFingerprint(e.Payload) {
		t.Fatalf("computed fingerprint %s is not the payload's", e.Fingerprint)
	}
	b, err := e.MarshalJSON()
	if err != nil {
		t.Fatalf("MarshalJSON: %v", err)
	}
	d := DecodeFile(id, b)
	if d.Malformed != "" {
		t.Fatalf("MarshalJSON output does not decode: %s\n%q", d.Malformed, b)
	}
	if d.EventID != e.EventID {
		t.Fatalf("EventID %q became %q", e.EventID, d.EventID)
	}
	if !bytes.Equal(d.Payload, e.Payload) {
		t.Fatalf("Payload %q (%s) became %q (%s)", e.Payload, e.PayloadEncoding, d.Payload, d.PayloadEncoding)
	}
	if d.Fingerprint != e.Fingerprint {
		t.Fatalf("Fingerprint %q became %q", e.Fingerprint, d.Fingerprint)
	}
}

// fuzzID keeps locators printable: backends' IDs (stream entry IDs, Pulsar
// message IDs, file names) are never arbitrary bytes.
func fuzzID(id string) string { return strings.ToValidUTF8(id, "?") }

func FuzzDecodeFile(f *testing.F) {
	f.Fuzz(func(t *testing.T, id string, data []byte) {
		id = fuzzID(id)
		e := DecodeFile(id, data)
		if e.Malformed != "" && !bytes.Equal(e.Raw, data) {
			t.Fatalf("Raw = %q, want the input", e.Raw)
		}
		checkEnvelope(t, e, id)
	})
}

// fuzzFields reads a fuzzed entry: a JSON object of strings, else lines of
// name=value (no '=' gives an empty value).
func fuzzFields(data []byte) map[string]string {
	var m map[string]string
	if err := json.Unmarshal(data, &m); err == nil && m != nil {
		return m
	}
	m = map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		m[k] = v
	}
	return m
}

func FuzzDecodeFields(f *testing.F) {
	f.Fuzz(func(t *testing.T, id string, data []byte) {
		id = fuzzID(id)
		fields := fuzzFields(data)
		e := DecodeFields(id, "redis", fields, DefaultFieldNames())
		if e.Malformed != "" {
			var raw map[string]string
			if err := json.Unmarshal(e.Raw, &raw); err != nil || len(raw) > len(fields) {
				t.Fatalf("Raw %q is not the fields as a JSON object: %v", e.Raw, err)
			}
		}
		if e.Origin.Backend != "redis" {
			t.Fatalf("Origin.Backend = %q", e.Origin.Backend)
		}
		checkEnvelope(t, e, id)
	})
}

// maxPublishMillis is 9999-12-31T23:59:59.999Z: a broker's publish time
// is a wall clock, never outside RFC 3339's years.
const maxPublishMillis = 253402300799999

func FuzzFromPulsar(f *testing.F) {
	f.Fuzz(func(t *testing.T, id, key, orderingKey, from string, props, payload []byte, eventTimeMillis, publishTimeMillis int64, redelivery uint32) {
		id = fuzzID(id)
		src, err := ParseEventIDSource(from)
		if err != nil {
			src = EventIDSource{Kind: "property"}
		}
		m := PulsarMessage{
			ID: id, Topic: "persistent://t/n/dlq", Key: key, OrderingKey: orderingKey,
			Properties: fuzzFields(props), Payload: payload, RedeliveryCount: redelivery,
		}
		if eventTimeMillis != 0 {
			m.EventTime = time.UnixMilli(eventTimeMillis)
		}
		if publishTimeMillis > 0 {
			m.PublishTime = time.UnixMilli(publishTimeMillis % (maxPublishMillis + 1))
		}
		before := len(m.Properties)
		e := FromPulsar(m, src, DefaultFieldNames())
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
		checkEnvelope(t, e, id)
	})
}

func FuzzDecodeRecord(f *testing.F) {
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := DecodeRecord(line)
		if err != nil {
			if e.ID != "" || e.EventID != "" || e.Malformed != "" {
				t.Fatalf("error %v with a non-zero envelope %+v", err, e)
			}
			return
		}
		if e.Malformed == "" {
			if e.ID == "" {
				t.Fatal("decoded record without id")
			}
			if !utf8.Valid(line) {
				t.Fatal("decoded a record with invalid UTF-8 as valid")
			}
		}
		checkEnvelope(t, e, e.ID)
		// An exported record reads back as the same record.
		again, err := e.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
		r, err := DecodeRecord(again)
		if err != nil {
			t.Fatalf("DecodeRecord of MarshalJSON output: %v\n%s", err, again)
		}
		if r.ID != e.ID || r.EventID != e.EventID || r.Malformed != e.Malformed || !bytes.Equal(r.Raw, e.Raw) ||
			!bytes.Equal(r.Payload, e.Payload) || r.Fingerprint != e.Fingerprint {
			t.Fatalf("record changed on a round trip:\n%+v\n%+v", e, r)
		}
	})
}
