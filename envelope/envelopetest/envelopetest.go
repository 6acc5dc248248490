// Package envelopetest holds the checks that every decoder's tests and
// fuzz targets share: the invariants a decoded envelope keeps, and how a
// fuzzed input becomes an entry's key/values.
package envelopetest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/envelope"
)

// Check asserts the invariants every decoder keeps: the locator is
// the one given, and an envelope is either malformed or has an event ID and
// a fingerprint. A decodable envelope exports (MarshalJSON) to a file that
// DecodeFile reads back with the same event ID, payload bytes and
// fingerprint; a malformed one still exports, and DecodeRecord reads it
// back as malformed.
func Check(t testing.TB, e envelope.Envelope, id string) {
	t.Helper()
	if e.ID != id {
		t.Fatalf("ID = %q, want %q", e.ID, id)
	}
	if e.Malformed != "" {
		line, err := e.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON of malformed envelope: %v", err)
		}
		r, err := envelope.DecodeRecord(line)
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
	if e.FingerprintComputed && e.Fingerprint != envelope.ComputeFingerprint(e.Payload) {
		t.Fatalf("computed fingerprint %s is not the payload's", e.Fingerprint)
	}
	b, err := e.MarshalJSON()
	if err != nil {
		t.Fatalf("MarshalJSON: %v", err)
	}
	d := envelope.DecodeFile(id, b)
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

// FuzzID keeps locators printable: backends' IDs (stream entry IDs, Pulsar
// message IDs, file names) are never arbitrary bytes.
func FuzzID(id string) string { return strings.ToValidUTF8(id, "?") }

// FuzzFields reads a fuzzed entry: a JSON object of strings, else lines of
// name=value (no '=' gives an empty value).
func FuzzFields(data []byte) map[string]string {
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
