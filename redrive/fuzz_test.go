package redrive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Differential fuzz targets: each hand-written reader or writer of the
// plan and the journal (flat.go, codec.go) against the plain
// encoding/json code whose result it must equal. `go test` runs the
// seeds; `go test -run X -fuzz FuzzName ./redrive` searches further.

// recordSeeds are journal lines: what dlqctl writes, and near misses.
var recordSeeds = []string{
	`{"type":"intent","at":"2026-12-01T12:00:00.123456789Z","seq":7}`,
	`{"type":"published","seq":7,"dest_id":"1764-0","mac":"hmac-sha256:ab"}`,
	`{"type":"removed","seq":7,"note":"already gone from the DLQ"}`,
	`{"type":"failed","seq":3,"note":"remove: \"quoted\" \u003c"}`,
	"{\"type\":\"gone\",\"seq\":3,\"note\":\"bad \xff\"}",
	`{"type":"skipped","seq":-1,"id":"a","event_id":"E","fingerprint":"f","dest":"d","run_id":"r"}`,
	`{"type":"intent","seq":01}`,
	`{"type":"intent","seq":-0}`,
	`{"type":"intent","seq":1.5}`,
	`{"type":"intent","SEQ":4}`,
	`{"type":"intent","seq":4,"at":"2026-12-01T12:00:00+02:00"}`,
	`{"type":"intent","seq":4,}`,
	`{"type":"intent","seq":4} x`,
	`{"type":"batch-start","seqs":[1,2],"batch":{"index":1,"size":2}}`,
	` { "type" : "intent" , "seq" : 9 } `,
	`{"type":"intent","seq":99999999999999999999}`,
	`{}`,
}

// FuzzDecodeRecord: decodeRecord reads a journal line as json.Unmarshal
// into a Record does, and fails where it fails.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range recordSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want, got Record
		wantErr := json.Unmarshal(b, &want)
		gotErr := decodeRecord(b, &got)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: decodeRecord error %v, encoding/json %v", b, gotErr, wantErr)
		}
		if wantErr == nil && !sameRecord(got, want) {
			t.Fatalf("%q: decodeRecord %+v, encoding/json %+v", b, got, want)
		}
	})
}

// sameRecord compares records, their times by instant and offset.
func sameRecord(a, b Record) bool {
	if !a.At.Equal(b.At) || a.At.Format("Z07:00") != b.At.Format("Z07:00") {
		return false
	}
	a.At = b.At
	return reflect.DeepEqual(a, b)
}

var entrySeeds = []string{
	`{"seq":1,"id":"1-0","event_id":"E1","fingerprint":"sha256:ab","key":"k","category":"transient","dest":"orders"}`,
	"{\n      \"seq\": 2,\n      \"id\": \"2-0\",\n      \"event_id\": \"E\\u003c2\",\n      \"fingerprint\": \"f\",\n      \"category\": \"transient\"\n    }",
	`{"seq":3,"id":"3","event_id":"E\ufffd","fingerprint":"f","category":"c","exact_base64":{"event_id":"Rf8="}}`,
	`{"seq":4,"id":"4","unknown":"x"}`,
	`{"seq":5,"ID":"5"}`,
	`{"seq":6,"id":"6","id":"7"}`,
	`{"seq":"8"}`,
	`{"seq":9,"key":null}`,
}

// FuzzDecodeEntry: decodeEntry reads a plan entry as Entry.UnmarshalJSON
// (encoding/json, unknown fields refused) does.
func FuzzDecodeEntry(f *testing.F) {
	for _, s := range entrySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want, got Entry
		wantErr := want.UnmarshalJSON(b)
		gotErr := decodeEntry(b, &got)
		if (gotErr == nil) != (wantErr == nil) || (wantErr == nil && got != want) {
			t.Fatalf("%q: decodeEntry %+v, %v; UnmarshalJSON %+v, %v", b, got, gotErr, want, wantErr)
		}
	})
}

// FuzzReadEntriesArray: the streamed reader of a plan's "entries" member
// takes what encoding/json takes from the same member, and gives the same
// entries (or null).
func FuzzReadEntriesArray(f *testing.F) {
	f.Add(`[]`)
	f.Add(`null`)
	f.Add(`[` + strings.Join(entrySeeds[:3], ",") + `]`)
	f.Add(`[{"seq":1,"id":"a","note":"}"}]`)
	f.Add(`[{"seq":1},]`)
	f.Add(`[{"seq":1} {"seq":2}]`)
	f.Add(`nul`)
	f.Add(`[{"seq":1,"id":"a\"}"}]`)
	f.Fuzz(func(t *testing.T, text string) {
		var want struct {
			Entries *[]Entry `json:"entries"`
		}
		wantErr := json.Unmarshal([]byte(`{"entries":`+text+`}`), &want)

		r := bufio.NewReader(strings.NewReader(":" + text + "}"))
		var got []Entry
		present, gotErr := readEntriesArray(r, func(e Entry) { got = append(got, e) })
		if gotErr == nil {
			// What follows the member must be the object's end, as for
			// encoding/json.
			if _, more, err := withOpenBrace(r); err != nil || more {
				gotErr = errTrailing
			} else if rest, _ := r.Peek(1); len(rest) > 0 {
				gotErr = errTrailing
			}
		}
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: readEntriesArray error %v, encoding/json %v", text, gotErr, wantErr)
		}
		if wantErr != nil {
			return
		}
		if present != (want.Entries != nil) {
			t.Fatalf("%q: present %v, encoding/json %v", text, present, want.Entries != nil)
		}
		if want.Entries != nil && len(*want.Entries) != len(got) || want.Entries != nil && len(got) > 0 && !reflect.DeepEqual(got, *want.Entries) {
			t.Fatalf("%q: entries %+v, encoding/json %+v", text, got, *want.Entries)
		}
	})
}

var errTrailing = errors.New("text after the entries member")

// FuzzAppendEntry: the hand-written entry writer gives Entry.MarshalJSON's
// bytes (indented as json.Indent indents them in a plan file), and the
// reader gives back the entry it wrote.
func FuzzAppendEntry(f *testing.F) {
	f.Add(int64(1), "1-0", "E1", "sha256:ab", "k", "transient", "orders")
	f.Add(int64(-5), "", "", "", "", "", "")
	f.Add(int64(7), "a<b", "E&", "f\"", "k\\", "c\n", "d\xff")
	f.Add(int64(1<<62), "é", "\u2028", "x", "", "c", "")
	f.Fuzz(func(t *testing.T, seq int64, id, eventID, fp, key, category, dest string) {
		e := Entry{Seq: seq, ID: id, EventID: eventID, Fingerprint: fp, Key: key, Category: category, Dest: dest}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendEntry(nil, e, false)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%+v: appendEntry %s, %v; MarshalJSON %s", e, got, err, want)
		}
		var ind bytes.Buffer
		if err := json.Indent(&ind, want, "    ", "  "); err != nil {
			t.Fatal(err)
		}
		gotInd, err := appendEntry(nil, e, true)
		if err != nil || !bytes.Equal(gotInd, ind.Bytes()) {
			t.Fatalf("%+v: appendEntry indented %s, %v; json.Indent %s", e, gotInd, err, ind.Bytes())
		}
		var back Entry
		if err := decodeEntry(gotInd, &back); err != nil || back != e {
			t.Fatalf("%+v: read back as %+v, %v", e, back, err)
		}
	})
}
