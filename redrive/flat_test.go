package redrive

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The flat parser gives what encoding/json gives, or leaves the line to it.
func TestFlatRecordsReadAsEncodingJSONReadsThem(t *testing.T) {
	lines := []string{
		`{"type":"intent","at":"2026-12-01T12:00:00.123456789Z","seq":7}`,
		`{"type":"published","seq":7,"dest_id":"1764-0","mac":"hmac-sha256:ab"}`,
		`{"type":"removed","seq":7,"note":"already gone from the DLQ"}`,
		`{"type":"failed","seq":3,"note":"remove: \"quoted\" \u003c"}`,
		`{"type":"gone","seq":3,"note":"é ü"}`,
		"{\"type\":\"gone\",\"seq\":3,\"note\":\"bad \xff\"}",
		`{"type":"skipped","seq":-1,"id":"a","event_id":"E","fingerprint":"f","dest":"d","run_id":"r"}`,
		`{"type":"intent","seq":01}`,
		`{"type":"intent","seq":1.5}`,
		`{"type":"intent","seq":"1"}`,
		`{"type":"intent","SEQ":4}`,
		`{"type":"intent","seq":4,"at":"not a time"}`,
		`{"type":"intent","seq":4,}`,
		`{"type":"intent","seq":4} x`,
		`{"type":"batch-start","seqs":[1,2],"batch":{"index":1,"size":2}}`,
		`{"seq":4,"type":"intent"}`,
		` { "type" : "intent" , "seq" : 9 } `,
		`{"type":"intent","seq":99999999999999999999}`,
	}
	for _, l := range lines {
		var want Record
		wantErr := json.Unmarshal([]byte(l), &want)
		var got Record
		gotErr := decodeRecord([]byte(l), &got)
		if (gotErr == nil) != (wantErr == nil) || (wantErr == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s: got %+v, %v; encoding/json %+v, %v", l, got, gotErr, want, wantErr)
		}
	}
}

func TestFlatEntriesReadAsEncodingJSONReadsThem(t *testing.T) {
	objs := []string{
		`{"seq":1,"id":"1-0","event_id":"E1","fingerprint":"sha256:ab","key":"k","category":"transient","dest":"orders"}`,
		`{
      "seq": 2,
      "id": "2-0",
      "event_id": "E\u003c2",
      "fingerprint": "f",
      "category": "transient"
    }`,
		`{"seq":3,"id":"3","event_id":"E\ufffd","fingerprint":"f","category":"c","exact_base64":{"event_id":"Rf8="}}`,
		`{"seq":4,"id":"4","unknown":"x"}`,
		`{"seq":5,"ID":"5"}`,
	}
	for _, o := range objs {
		var want, got Entry
		wantErr := want.UnmarshalJSON([]byte(o))
		gotErr := decodeEntry([]byte(o), &got)
		if (gotErr == nil) != (wantErr == nil) || (wantErr == nil && got != want) {
			t.Errorf("%s: got %+v, %v; UnmarshalJSON %+v, %v", o, got, gotErr, want, wantErr)
		}
	}
}

// The entries may stand anywhere among the plan's fields, or be null.
func TestReadPlanTakesEntriesAnywhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.json")
	for name, doc := range map[string]string{
		"first": `{"entries":[{"seq":1,"id":"a","event_id":"E","fingerprint":"f","category":"c"}],"schema":"dlqctl.plan/v1","kind":"redrive"}`,
		"last":  `{"schema":"dlqctl.plan/v1","kind":"redrive","entries":[{"seq":1,"id":"a","event_id":"E","fingerprint":"f","category":"c"}]}` + "\n",
		"only":  `{"schema":"dlqctl.plan/v1","kind":"redrive","entries" : [ {"seq":1,"id":"a","event_id":"E","fingerprint":"f","category":"c"} ] , "reason":"x}"}`,
	} {
		os.WriteFile(path, []byte(doc), 0o600)
		p, err := ReadPlan(path)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if p.Kind != KindRedrive || p.Entries.Len() != 1 || p.Entries.At(0).ID != "a" {
			t.Errorf("%s: read %+v with %+v", name, p, p.Entries.Slice())
		}
	}
	os.WriteFile(path, []byte(`{"schema":"dlqctl.plan/v1","entries":null}`), 0o600)
	if p, err := ReadPlan(path); err != nil || p.Entries.Present() {
		t.Errorf("null entries: %v, present %v", err, p != nil && p.Entries.Present())
	}
	for _, bad := range []string{
		`{"schema":"dlqctl.plan/v1","entries":[{"seq":1}`,
		`{"schema":"dlqctl.plan/v1","entries":[{"seq":1},]}`,
		`{"schema":"dlqctl.plan/v1","entries":[] "x":1}`,
		`{"schema":"dlqctl.plan/v1","entries":[]} trailing`,
		`{"schema":"dlqctl.plan/v1","entries":[],"nope":1}`,
	} {
		os.WriteFile(path, []byte(bad), 0o600)
		if _, err := ReadPlan(path); err == nil {
			t.Errorf("ReadPlan took %s", bad)
		}
	}
}
