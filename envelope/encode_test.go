package envelope

import (
	"reflect"
	"testing"
)

// TestFieldWriterForImporters: what every importer writes the same way —
// the event's identity, its origin, its properties — reads back as it
// was: a computed fingerprint is not written, and no property turns into
// an envelope field.
func TestFieldWriterForImporters(t *testing.T) {
	e := Envelope{EventID: "E1", Payload: []byte("p"), Origin: Origin{Topic: "orders", Subscription: "g"}}
	e.FillFingerprint()
	w := NewFieldWriter(DefaultFieldNames())
	w.Identity(e)
	w.Origin(e.Origin, "")
	w.Property("event_id", "shadow") // written already
	w.Property("owner", "shadow")    // a field's first name
	w.Property("reason", "kept")     // an alias of last_error, which was left out
	w.Property("tenant", "acme")
	want := []string{"event_id", "E1", "origin_stream", "orders", "origin_group", "g", "last_error", "", "reason", "kept", "tenant", "acme"}
	if !reflect.DeepEqual(w.Pairs, want) {
		t.Errorf("pairs\n got %q\nwant %q", w.Pairs, want)
	}

	e.Fingerprint, e.FingerprintComputed = "sha256:ab", false
	w = NewFieldWriter(DefaultFieldNames())
	w.Identity(e)
	w.Origin(Origin{Topic: "orders", Consumer: "c"}, "REAL_TOPIC")
	w.Origin(Origin{}, "REAL_TOPIC")
	want = []string{"event_id", "E1", "fingerprint", "sha256:ab", "REAL_TOPIC", "orders", "origin_consumer", "c"}
	if !reflect.DeepEqual(w.Pairs, want) {
		t.Errorf("pairs\n got %q\nwant %q", w.Pairs, want)
	}

	if p, enc := ImportPayload(Envelope{Payload: []byte("x"), PayloadEncoding: EncodingUTF8}); string(p) != "x" || enc != EncodingUTF8 {
		t.Errorf("ImportPayload of an entry = %q, %q", p, enc)
	}
	bad := Envelope{Malformed: "no event id", Raw: []byte(`{"a":"b"}`)}
	if p, enc := ImportPayload(bad); string(p) != `{"a":"b"}` || enc != "" {
		t.Errorf("ImportPayload of a malformed entry without payload = %q, %q; want its raw form, no encoding", p, enc)
	}
}
