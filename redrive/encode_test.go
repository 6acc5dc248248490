package redrive

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestAppendStepMatchesEncodingJSON holds the direct encoder to what
// encoding/json writes for the same record.
func TestAppendStepMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	for _, r := range []Record{
		{Type: RecIntent, At: at, RunID: "r1", Seq: 7, ID: "1-0", EventID: "E1", Fingerprint: "sha256:ab", Dest: "orders"},
		{Type: RecPublished, At: at, RunID: "r1", Seq: 7, ID: "1-0", DestID: "2-0"},
		{Type: RecFailed, At: at, RunID: "r\\1", Seq: 1, Note: "quote \" tab \t nl \n ctl \x01 é ☃ <&>"},
		{Type: RecGone, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), RunID: "r1", Note: "bad \xff byte"},
		{Type: RecRemoved, At: at},
		{Type: RecRemoved, Seq: 8}, // not the first of its write: no time
	} {
		got, ok := appendStep(nil, r)
		if !ok {
			t.Fatalf("appendStep refused %+v", r)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(r)
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		json.Unmarshal(want.Bytes(), &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("appendStep:\n%s\nencoding/json:\n%s", got, want.Bytes())
		}
	}
	if _, ok := appendStep(nil, Record{Type: RecRunEnd, Status: StatusCompleted}); ok {
		t.Error("appendStep took a run-end record")
	}
}
