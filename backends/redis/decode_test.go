package redisstream

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/envelope"
)

// trickyEntries are entries that take each branch of the decoders: aliases
// of different rank, repeated names, properties, a payload_encoding that
// holds and ones that do not, invalid UTF-8 in a field and in a property,
// a missing payload or event ID, an imported malformed entry, binary and
// non-compact JSON payloads.
func trickyEntries() []streamEntry {
	fp := "sha256:" + strings.Repeat("ab", 32)
	base := []string{"event_id", "E1", "fingerprint", fp, "payload", `{"a":1}`, "last_error", "timeout", "attempts", "3",
		"dead_lettered_at", "2026-11-29T10:05:00Z", "origin_stream", "orders"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	return []streamEntry{
		{ID: "1-0", Fields: base},
		{ID: "1-1", Fields: with("tenant", "acme", "region", "eu")},
		{ID: "1-2", Fields: with("reason", "second rank", "error", "third rank")},
		{ID: "1-3", Fields: []string{"eventId", "E2", "event_id", "E3", "payload", "x", "delivery_count", "7", "attempts", "2"}},
		{ID: "1-4", Fields: with("event_id", "E1-again", "tenant", "a", "tenant", "b")},
		{ID: "1-5", Fields: with("payload_encoding", "json")},
		{ID: "1-6", Fields: []string{"event_id", "E4", "payload", "not json", "payload_encoding", "json"}},
		{ID: "1-7", Fields: []string{"event_id", "E5", "payload", "\xff\xfe", "payload_encoding", "utf8"}},
		{ID: "1-8", Fields: []string{"event_id", "E6", "payload", "aGk=", "payload_encoding", "base64"}},
		{ID: "1-9", Fields: []string{"event_id", "E7", "payload", "x", "payload_encoding", "rot13"}},
		{ID: "2-0", Fields: []string{"event_id", "E8"}},
		{ID: "2-1", Fields: []string{"payload", "x"}},
		{ID: "2-2", Fields: with("last_error", "bad \xff utf-8")},
		{ID: "2-3", Fields: with("tenant", "bad \xff")},
		{ID: "2-4", Fields: with("ten\xffant", "x")},
		{ID: "2-5", Fields: with(envelope.MalformedMarker, "")},
		{ID: "2-6", Fields: []string{"event_id", "E9", "payload", "\x00\x01binary"}},
		{ID: "2-7", Fields: []string{"event_id", "E10", "payload", "{ \"spaced\": true }"}},
		{ID: "2-8", Fields: with("attempts", "many", "recover_by", "tomorrow")},
		{ID: "2-9", Fields: nil},
		{ID: "3-0", Fields: []string{"event_id", "E11", "payload", "", "fingerprint", ""}},
	}
}

// decodeBoth decodes se the fast way and the plain way, lean or not, and
// says where they differ.
func decodeBoth(d *entryDecoder, se streamEntry, lean bool) string {
	fast := d.decode(se, lean)
	want := d.plainDecode(se, lean)
	if !reflect.DeepEqual(fast, want) {
		return fmt.Sprintf("entry %s (lean %v):\n fast  %+v\n plain %+v", se.ID, lean, fast, want)
	}
	return ""
}

// TestDecodeFastEqualsPlain: the fast decoder gives DecodeFields's
// envelope, lean or whole, with the default names and with aliases that a
// config gives.
func TestDecodeFastEqualsPlain(t *testing.T) {
	custom, err := envelope.FieldNames{envelope.FieldLastError: {"error", "last_error"}, envelope.FieldEventID: {"id", "event_id"}}.Complete()
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range []envelope.FieldNames{envelope.DefaultFieldNames(), custom} {
		d := newEntryDecoder(names)
		for _, se := range trickyEntries() {
			for _, lean := range []bool{false, true} {
				if diff := decodeBoth(d, se, lean); diff != "" {
					t.Error(diff)
				}
			}
		}
	}
}

// TestDecodeLeanIsWholeLessWhatLeanLeavesOut: a lean envelope is the
// whole one without properties, payload encoding and raw form, and
// malformed exactly when the whole one is (backend.LeanScanner).
func TestDecodeLeanIsWholeLessWhatLeanLeavesOut(t *testing.T) {
	d := newEntryDecoder(envelope.DefaultFieldNames())
	for _, se := range trickyEntries() {
		whole, lean := d.decode(se, false), d.decode(se, true)
		whole.Properties, whole.PayloadEncoding, whole.Raw = nil, "", nil
		if !reflect.DeepEqual(whole, lean) {
			t.Errorf("entry %s:\n lean  %+v\n whole %+v", se.ID, lean, whole)
		}
	}
}

// FuzzDecodeEntry: for any fields, the fast decoder equals the plain one,
// lean and whole.
func FuzzDecodeEntry(f *testing.F) {
	for _, se := range trickyEntries() {
		f.Add(strings.Join(se.Fields, "\x1f"))
	}
	d := newEntryDecoder(envelope.DefaultFieldNames())
	f.Fuzz(func(t *testing.T, joined string) {
		fields := strings.Split(joined, "\x1f")
		if len(fields)%2 == 1 {
			fields = fields[:len(fields)-1]
		}
		se := streamEntry{ID: "1-0", Fields: fields}
		for _, lean := range []bool{false, true} {
			if diff := decodeBoth(d, se, lean); diff != "" {
				t.Fatal(diff)
			}
		}
	})
}

// TestScanLeanIsScanLessWhatLeanLeavesOut reads the tricky entries from a
// real server three ways, across a page boundary: Scan and ScanLean with
// the fast decoder and Scan with the plain one, and holds them equal.
func TestScanLeanIsScanLessWhatLeanLeavesOut(t *testing.T) {
	ctx := context.Background()
	k := key(t, "dlq")
	rdb := shared.Client()
	for range 3 {
		for _, se := range trickyEntries() {
			if len(se.Fields) == 0 {
				continue // XADD needs a field
			}
			vals := make([]any, len(se.Fields))
			for i, f := range se.Fields {
				vals[i] = f
			}
			if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: k, Values: vals}).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := openStream(t, shared.URL(0, k), Options{PageSize: 7})
	whole, lean := scanAll(t, s, ""), []envelope.Envelope{}
	if err := s.ScanLean(ctx, "", func(e envelope.Envelope) error { lean = append(lean, e); return nil }); err != nil {
		t.Fatal(err)
	}
	s.dec.plain, s.plainPages = true, true
	plain := scanAll(t, s, "")
	if !reflect.DeepEqual(whole, plain) {
		t.Fatalf("Scan differs from the plain readers:\n%+v\n%+v", whole, plain)
	}
	if len(whole) != 60 || len(lean) != len(whole) {
		t.Fatalf("Scan read %d entries, ScanLean %d, want 60", len(whole), len(lean))
	}
	for i := range whole {
		w := whole[i]
		w.Properties, w.PayloadEncoding, w.Raw = nil, "", nil
		if !reflect.DeepEqual(w, lean[i]) {
			t.Errorf("entry %s:\n lean  %+v\n whole %+v", w.ID, lean[i], w)
		}
	}
}
