package redrive

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestRunStartPlanRoundTripsCompact(t *testing.T) {
	for name, bad := range map[string]string{"compact": "", "not UTF-8": "k\xff"} {
		t.Run(name, func(t *testing.T) {
			p := &Plan{Schema: PlanSchema, Kind: KindRedrive, Reason: "test", PlannedBy: "t", Source: "fake"}
			for i, key := range []string{"order-1", bad, "order-<&>"} {
				p.Entries.Append(Entry{Seq: int64(i + 1), ID: "1-" + string(rune('0'+i)), EventID: "E" + string(rune('0'+i)),
					Fingerprint: "sha256:ab", Key: key, Category: "transient", Dest: "orders"})
			}
			if err := p.Seal(); err != nil {
				t.Fatal(err)
			}
			line, err := json.Marshal(Record{Type: RecRunStart, RunID: "r1", Plan: p})
			if err != nil {
				t.Fatal(err)
			}
			compact := bytes.Contains(line, []byte(`"entries":[["1-0","E0","sha256:ab","order-1","transient","orders"]`))
			if compact != (bad == "") {
				t.Errorf("compact form %v, want %v: %s", compact, bad == "", line)
			}
			var back Record
			if err := json.Unmarshal(line, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Plan.Entries.Slice(), p.Entries.Slice()) {
				t.Errorf("entries read back %+v, want %+v", back.Plan.Entries, p.Entries)
			}
			if err := back.Plan.Verify(); err != nil {
				t.Errorf("the plan read back does not verify: %v", err)
			}
		})
	}
}
