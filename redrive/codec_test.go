package redrive

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/approval"
)

// legacyPlan is Plan as it was before its entries became compact: what
// json.Marshal hashed and json.Encoder wrote. The streamed forms must be
// byte for byte the same, so that every existing plan still verifies.
type legacyPlan struct {
	Schema    string     `json:"schema"`
	Kind      string     `json:"kind"`
	Digest    string     `json:"digest"`
	Reason    string     `json:"reason"`
	PlannedBy string     `json:"planned_by"`
	PlannedAt time.Time  `json:"planned_at"`
	Source    string     `json:"source"`
	Params    Params     `json:"params"`
	Selectors Selectors  `json:"selectors"`
	Entries   []Entry    `json:"entries"`
	Excluded  []Excluded `json:"excluded"`
	Approvals []Approval `json:"approvals"`
}

func legacyOf(p *Plan) legacyPlan {
	l := legacyPlan{Schema: p.Schema, Kind: p.Kind, Digest: p.Digest, Reason: p.Reason, PlannedBy: p.PlannedBy,
		PlannedAt: p.PlannedAt, Source: p.Source, Params: p.Params, Selectors: p.Selectors, Excluded: p.Excluded, Approvals: p.Approvals}
	if p.Entries.Present() {
		l.Entries = p.Entries.Slice()
	}
	return l
}

func legacyDigest(t *testing.T, p *Plan) string {
	l := legacyOf(p)
	l.Digest, l.Approvals, l.PlannedAt = "", nil, l.PlannedAt.UTC()
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func legacyFile(t *testing.T, p *Plan) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(legacyOf(p)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// codecPlans are plans whose text takes every path of the codec: plain
// entries, HTML characters and escapes, text that is not UTF-8 (exact
// bytes in exact_base64), fingerprints of other forms, sequence numbers
// out of place, an empty list and an absent one.
func codecPlans() map[string]*Plan {
	base := func() *Plan {
		return &Plan{Schema: PlanSchema, Kind: KindRedrive, Reason: "psp <back> & \"up\"", PlannedBy: "ana", Source: "redis://h/0?stream=dlq",
			PlannedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.FixedZone("X", 3600)),
			Params:    Params{To: "orders", Rate: 10, Burst: 5, Ramp: []int{1, 10}, Settle: Duration(time.Second), AllowDispositions: []string{"review"}},
			Selectors: Selectors{Categories: []string{"transient"}, Limit: 3},
			Excluded:  []Excluded{{ID: "9-0", EventID: "X\xff", Why: "held back <key>", HeldBy: "8-0"}},
			Approvals: []Approval{{By: "bo", At: approval.NewStamp(time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)), ExpiresAt: approval.NewStamp(time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)), HMAC: "hmac-sha256:00"}},
		}
	}
	fp := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	out := map[string]*Plan{}
	p := base()
	p.Entries = NewEntries(
		Entry{Seq: 1, ID: "1-0", EventID: "E1", Fingerprint: fp, Key: "order-1", Category: "transient", Dest: "orders"},
		Entry{Seq: 2, ID: "2-0", EventID: "E<2>&", Fingerprint: "sha256:ab", Category: "transient", Dest: "orders"},
		Entry{Seq: 3, ID: "3-0", EventID: "E\xff\xfe", Fingerprint: strings.ToUpper(fp), Key: "k\xc3", Category: "conflict"},
		Entry{Seq: 4, ID: "4-0", EventID: "tab\there \"q\" \\ \u2028 é", Fingerprint: fp[:len(fp)-1] + "g", Key: "\x01", Category: "transient", Dest: "pay\nments"},
	)
	out["mixed"] = p
	p = base()
	p.Entries = NewEntries(Entry{Seq: 5, ID: "a", EventID: "E", Fingerprint: fp}, Entry{Seq: 2, ID: "b", EventID: "F", Fingerprint: fp})
	out["seq out of place"] = p
	p = base()
	p.Entries = NewEntries()
	p.Excluded = []Excluded{}
	out["empty"] = p
	p = base()
	p.Excluded, p.Approvals = nil, nil
	out["absent"] = p
	return out
}

func TestStreamedDigestAndFileAreTheLegacyBytes(t *testing.T) {
	for name, p := range codecPlans() {
		t.Run(name, func(t *testing.T) {
			got, err := p.ComputeDigest()
			if err != nil {
				t.Fatal(err)
			}
			if want := legacyDigest(t, p); got != want {
				t.Errorf("digest %s, json.Marshal's %s", got, want)
			}
			p.Digest = got
			path := filepath.Join(t.TempDir(), "p.json")
			if err := WritePlan(path, p); err != nil {
				t.Fatal(err)
			}
			file, _ := os.ReadFile(path)
			if want := legacyFile(t, p); !bytes.Equal(file, want) {
				t.Errorf("plan file differs from json.Encoder's:\n%s\nwant:\n%s", file, want)
			}
			back, err := ReadPlan(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := back.Verify(); err != nil {
				t.Fatalf("read back: %v", err)
			}
			if !reflect.DeepEqual(back.Entries.Slice(), p.Entries.Slice()) || back.Entries.Present() != p.Entries.Present() {
				t.Errorf("entries read back %+v, want %+v", back.Entries.Slice(), p.Entries.Slice())
			}
			// The old reader (encoding/json into []Entry) reads the new file.
			var old legacyPlan
			if err := json.Unmarshal(file, &old); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(old.Entries, legacyOf(p).Entries) {
				t.Errorf("json.Unmarshal read %+v", old.Entries)
			}
		})
	}
}

func TestEntriesKeepTheirText(t *testing.T) {
	fp := "sha256:" + strings.Repeat("ab", 32)
	es := NewEntries()
	want := []Entry{
		{Seq: 1, ID: "1-0", EventID: "E1", Fingerprint: fp, Key: "k", Category: "transient", Dest: "orders"},
		{Seq: 2, ID: "", EventID: "", Fingerprint: "", Category: "", Dest: ""},
		{Seq: 3, ID: "3-0", EventID: "E\xff", Fingerprint: "md5:x", Key: "k", Category: "poison", Dest: "pay"},
	}
	for _, e := range want {
		es.Append(e)
	}
	if got := es.Slice(); !reflect.DeepEqual(got, want) {
		t.Fatalf("entries %+v, want %+v", got, want)
	}
	if e, ok := es.BySeq(3); !ok || e.Dest != "pay" {
		t.Errorf("BySeq(3) = %+v, %v", e, ok)
	}
	if _, ok := es.BySeq(4); ok {
		t.Error("BySeq(4) found an entry of a 3-entry plan")
	}
	// A string handed out stays as it was while the arena grows.
	id := es.At(0).ID
	for i := range 1000 {
		es.Append(Entry{Seq: int64(4 + i), ID: strings.Repeat("x", 50)})
	}
	if id != "1-0" || es.At(0).ID != "1-0" {
		t.Errorf("ID changed to %q", id)
	}
	// Across record groups and text blocks, and text longer than a block.
	long := strings.Repeat("y", blockSize+10)
	for i := range 3 * recGroup {
		es.Append(Entry{Seq: int64(1004 + i), ID: strconv.Itoa(i), Key: long[:i%7], Fingerprint: fp})
	}
	es.Append(Entry{Seq: int64(es.Len() + 1), ID: long})
	if got := es.At(es.Len() - 1); got.ID != long {
		t.Errorf("a long ID read back as %d bytes", len(got.ID))
	}
	for i := range 3 * recGroup {
		if got := es.At(1003 + i); got.ID != strconv.Itoa(i) || got.Key != long[:i%7] || got.Fingerprint != fp || got.Seq != int64(1004+i) {
			t.Fatalf("entry %d read back as %+v", 1003+i, got)
		}
	}
	es.Set(0, Entry{Seq: 1, ID: "edited", Fingerprint: fp})
	if id != "1-0" || es.At(0).ID != "edited" {
		t.Errorf("after Set: held %q, entry %q", id, es.At(0).ID)
	}
}

func TestReadPlanRefusesUnknownFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.json")
	for name, doc := range map[string]string{
		"top level": `{"schema":"dlqctl.plan/v1","extra":1,"entries":[]}`,
		"entry":     `{"schema":"dlqctl.plan/v1","entries":[{"seq":1,"id":"a","extra":1}]}`,
		"trailing":  `{"schema":"dlqctl.plan/v1","entries":[]} {}`,
	} {
		os.WriteFile(path, []byte(doc), 0o600)
		if _, err := ReadPlan(path); err == nil {
			t.Errorf("%s: ReadPlan took %s", name, doc)
		}
	}
}
