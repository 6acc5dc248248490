package envelope_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/envelope/envelopetest"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/; see `go help testflag`.

func FuzzDecodeFile(f *testing.F) {
	f.Fuzz(func(t *testing.T, id string, data []byte) {
		id = envelopetest.FuzzID(id)
		e := envelope.DecodeFile(id, data)
		if e.Malformed != "" && !bytes.Equal(e.Raw, data) {
			t.Fatalf("Raw = %q, want the input", e.Raw)
		}
		envelopetest.Check(t, e, id)
	})
}

func FuzzDecodeFields(f *testing.F) {
	f.Fuzz(func(t *testing.T, id string, data []byte) {
		id = envelopetest.FuzzID(id)
		fields := envelopetest.FuzzFields(data)
		e := envelope.DecodeFields(id, "redis", fields, envelope.DefaultFieldNames())
		if e.Malformed != "" {
			var raw map[string]string
			if err := json.Unmarshal(e.Raw, &raw); err != nil || len(raw) > len(fields) {
				t.Fatalf("Raw %q is not the fields as a JSON object: %v", e.Raw, err)
			}
		}
		if e.Origin.Backend != "redis" {
			t.Fatalf("Origin.Backend = %q", e.Origin.Backend)
		}
		envelopetest.Check(t, e, id)
	})
}

func FuzzDecodeRecord(f *testing.F) {
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := envelope.DecodeRecord(line)
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
		envelopetest.Check(t, e, e.ID)
		// An exported record reads back as the same record.
		again, err := e.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
		r, err := envelope.DecodeRecord(again)
		if err != nil {
			t.Fatalf("DecodeRecord of MarshalJSON output: %v\n%s", err, again)
		}
		if r.ID != e.ID || r.EventID != e.EventID || r.Malformed != e.Malformed || !bytes.Equal(r.Raw, e.Raw) ||
			!bytes.Equal(r.Payload, e.Payload) || r.Fingerprint != e.Fingerprint {
			t.Fatalf("record changed on a round trip:\n%+v\n%+v", e, r)
		}
	})
}
