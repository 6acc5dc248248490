package redisstream

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

func fullEnvelope(id string, payload []byte) envelope.Envelope {
	e := envelope.Envelope{
		ID:              id,
		EventID:         "E42",
		PayloadVersion:  "3",
		ContentType:     "application/octet-stream",
		Key:             "order-123",
		Origin:          envelope.Origin{Backend: "dir", Topic: "orders", Subscription: "order-workers", Consumer: "worker-2"},
		FirstReceivedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
		DeadLetteredAt:  time.Date(2026, 11, 29, 10, 5, 0, 123456789, time.UTC),
		Attempts:        5,
		LastError:       "timeout calling payments: context deadline exceeded",
		ErrorClass:      "transient",
		Owner:           "team-payments",
		RecoverBy:       time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC),
		SchemaInfo:      "orders.v3",
		RedriveCount:    2,
		Properties:      map[string]string{"tenant": "acme", "trace": "t-1"},
		PayloadEncoding: envelope.ClassifyPayload(payload),
		Payload:         payload,
		Fingerprint:     "sha256:carried-by-the-producer",
	}
	return e
}

// roundTrip imports e, reads it back and checks every field.
func roundTrip(t *testing.T, s *Stream, e envelope.Envelope) envelope.Envelope {
	t.Helper()
	ctx := context.Background()
	id, err := s.Import(ctx, e)
	if err != nil {
		t.Fatalf("Import(%s): %v", e.ID, err)
	}
	if IsStreamID(e.ID) && id != e.ID {
		t.Errorf("Import kept id %s as %s", e.ID, id)
	}
	got, err := s.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	var scanned envelope.Envelope
	_ = s.Scan(ctx, "", func(x envelope.Envelope) error {
		if x.ID == id {
			scanned = x
			return backend.ErrStop
		}
		return nil
	})
	if !reflect.DeepEqual(scanned, got) {
		t.Errorf("Scan and Get disagree:\n%+v\n%+v", scanned, got)
	}
	if !IsStreamID(e.ID) {
		if got.Properties[SourceIDField] != e.ID {
			t.Errorf("%s = %q, want the source id %q", SourceIDField, got.Properties[SourceIDField], e.ID)
		}
		delete(got.Properties, SourceIDField)
		if len(got.Properties) == 0 {
			got.Properties = nil
		}
	}
	want := e
	want.ID = id
	want.Origin.Backend = "redis"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip of %s:\n got %+v\nwant %+v", e.ID, got, want)
	}
	return got
}

func TestImportRoundTrip(t *testing.T) {
	s := openStream(t, shared.URL(0, key(t, "dlq")), Options{})

	j := fullEnvelope("1700000000000-7", []byte(`{"orderId":"order-123","amount":1200}`))
	j.EventID = "E43"
	roundTrip(t, s, j)

	// A computed fingerprint is not written: it reads back computed, and
	// the same.
	c := fullEnvelope("1700000000001-0", []byte("plain text"))
	c.Fingerprint, c.FingerprintComputed = envelope.ComputeFingerprint(c.Payload), true
	got := roundTrip(t, s, c)
	if !got.FingerprintComputed || got.VerifyFingerprint() != envelope.FingerprintComputed {
		t.Errorf("computed fingerprint read back as carried")
	}

	// A string that is valid JSON but was utf8 stays utf8.
	u := fullEnvelope("1700000000002-0", []byte(`123`))
	u.PayloadEncoding = envelope.EncodingUTF8
	roundTrip(t, s, u)

	// Ids that are no stream ids get new ones, after the ones above.
	binary := []byte("\x00\xff\xfebin\x00ary\xc3\x28")
	e := fullEnvelope("dir-file-001", binary)
	if e.PayloadEncoding != envelope.EncodingBase64 {
		t.Fatalf("test payload classified %s", e.PayloadEncoding)
	}
	roundTrip(t, s, e)

	// Minimal envelope: only what is set is written.
	m := envelope.Envelope{ID: "min-1", EventID: "E1", PayloadEncoding: envelope.EncodingUTF8, Payload: []byte{}, Origin: envelope.Origin{Backend: "redis"}}
	m.FillFingerprint()
	roundTrip(t, s, m)
}

func TestImportPropertiesDoNotBecomeFields(t *testing.T) {
	s := openStream(t, shared.URL(0, key(t, "dlq")), Options{})
	e := fullEnvelope("p-1", []byte("x"))
	e.LastError, e.ErrorClass = "", ""
	// "reason" and "category" are aliases of last_error and error_class,
	// which are empty here; "owner" is a field's first name.
	e.Properties = map[string]string{"reason": "kept as a property", "category": "c", "owner": "shadow", "tenant": "acme"}
	id, err := s.Import(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastError != "" || got.ErrorClass != "" || got.Owner != e.Owner {
		t.Errorf("a property became a field: last_error %q error_class %q owner %q", got.LastError, got.ErrorClass, got.Owner)
	}
	if got.Properties["reason"] != "kept as a property" || got.Properties["category"] != "c" || got.Properties["tenant"] != "acme" {
		t.Errorf("properties = %v", got.Properties)
	}
	if _, ok := got.Properties["owner"]; ok {
		t.Errorf("property owner collides with the owner field and must not be written")
	}
}

func TestImportDuplicates(t *testing.T) {
	ctx := context.Background()
	k := key(t, "dlq")
	s := openStream(t, shared.URL(0, k), Options{PageSize: 2})
	for _, id := range []string{"1700000000000-1", "file-a", "file-b", "file-c"} {
		if _, err := s.Import(ctx, fullEnvelope(id, []byte("p"))); err != nil {
			t.Fatalf("Import(%s): %v", id, err)
		}
	}
	for _, id := range []string{"1700000000000-1", "file-b"} {
		if _, err := s.Import(ctx, fullEnvelope(id, []byte("p"))); !errors.Is(err, backend.ErrExists) {
			t.Errorf("second Import(%s) = %v, want ErrExists", id, err)
		}
	}
	// A new Stream builds its set of source ids from the stream (paged).
	s2 := openStream(t, shared.URL(0, k), Options{PageSize: 2})
	for _, id := range []string{"1700000000000-1", "file-a", "file-c"} {
		if _, err := s2.Import(ctx, fullEnvelope(id, []byte("p"))); !errors.Is(err, backend.ErrExists) {
			t.Errorf("Import(%s) on a fresh Stream = %v, want ErrExists", id, err)
		}
	}
	if n, _ := s2.Len(ctx); n != 4 {
		t.Errorf("Len = %d after refused duplicates, want 4", n)
	}

	// Older than the stream's last id: Redis cannot insert it.
	_, err := s.Import(ctx, fullEnvelope("1600000000000-0", []byte("p")))
	if err == nil || errors.Is(err, backend.ErrExists) || !strings.Contains(err.Error(), "only append") {
		t.Errorf("Import of an old id = %v, want an error saying streams only append", err)
	}
}

func TestImportMalformed(t *testing.T) {
	ctx := context.Background()
	k := key(t, "dlq")
	s := openStream(t, shared.URL(0, k), Options{})

	// Read from a Redis entry: written back as exactly its fields.
	srcKey := key(t, "src")
	xadd(t, shared.Client(), srcKey, "payload", "y", "attempts", "five", "tenant", "acme")
	srcStream := openStream(t, shared.URL(0, srcKey), Options{})
	bad := scanAll(t, srcStream, "")[0]
	if bad.Malformed == "" {
		t.Fatal("source entry not malformed")
	}
	bad.ID = "old-1"
	id, err := s.Import(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := shared.Client().XRange(ctx, k, id, id).Result()
	if err != nil || len(vals) != 1 {
		t.Fatalf("XRANGE: %v %v", vals, err)
	}
	want := map[string]any{"payload": "y", "attempts": "five", "tenant": "acme", SourceIDField: "old-1"}
	if !reflect.DeepEqual(vals[0].Values, want) {
		t.Errorf("fields = %v, want %v", vals[0].Values, want)
	}
	if got, _ := s.Get(ctx, id); got.Malformed == "" {
		t.Errorf("imported malformed entry reads back well-formed")
	}

	// A malformed dir file (not a JSON object): its bytes become the payload.
	raw := []byte("{not json")
	f := envelope.DecodeFile("broken", raw)
	id, err = s.Import(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Payload) != string(raw) || got.Malformed == "" || got.Properties[MalformedField] == "" {
		t.Errorf("malformed file imported as payload %q malformed %q properties %v", got.Payload, got.Malformed, got.Properties)
	}
}
