package envelope

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const incidentDir = "../testdata/incident/error"

type incidentEntry struct {
	name string
	data []byte
	e    Envelope
}

func readIncident(t testing.TB) []incidentEntry {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(incidentDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var out []incidentEntry
	for _, p := range names {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSuffix(filepath.Base(p), ".json")
		out = append(out, incidentEntry{id, data, DecodeFile(id, data)})
	}
	return out
}

func TestIncident(t *testing.T) {
	entries := readIncident(t)
	if len(entries) != 284 {
		t.Fatalf("%d files in %s, want 284", len(entries), incidentDir)
	}
	tr := NewConflictTracker()
	for _, x := range entries {
		tr.Add(x.e)
	}
	c := NewClassifier(DefaultRules())
	counts := map[string]int{}
	hints := map[string]int{}
	fps := map[string]int{}
	encodings := map[string]int{}
	var malformed, mismatch, unverifiable, computed []string
	for _, x := range entries {
		if x.e.ID != x.name {
			t.Errorf("%s: ID %q", x.name, x.e.ID)
		}
		cl := c.Classify(x.e, tr.IsConflict(x.e.EventID))
		counts[cl.Category]++
		if cl.Rule == "error_class" {
			hints[cl.Category]++
		}
		if x.e.Malformed != "" {
			malformed = append(malformed, x.name)
			if string(x.e.Raw) != string(x.data) {
				t.Errorf("%s: Raw is not the file", x.name)
			}
			continue
		}
		encodings[x.e.PayloadEncoding]++
		v := x.e.VerifyFingerprint()
		fps[v]++
		switch v {
		case FingerprintMismatch:
			mismatch = append(mismatch, x.name)
		case FingerprintUnverifiable:
			unverifiable = append(unverifiable, x.name)
		case FingerprintComputed:
			computed = append(computed, x.name)
		}
	}
	wantCounts := map[string]int{
		CategoryMalformed: 8, CategoryConflict: 6, CategorySchema: 44, CategoryCodeDefect: 27,
		CategoryPermission: 24, CategoryMissingReference: 34, CategoryTransient: 125, CategoryUnknown: 16,
	}
	for cat, n := range wantCounts {
		if counts[cat] != n {
			t.Errorf("category %s: %d, want %d", cat, counts[cat], n)
		}
	}
	if len(counts) != len(wantCounts) {
		t.Errorf("categories %v", counts)
	}
	wantHints := map[string]int{CategorySchema: 2, CategoryCodeDefect: 1, CategoryPermission: 1, CategoryMissingReference: 2, CategoryTransient: 4}
	for cat, n := range wantHints {
		if hints[cat] != n {
			t.Errorf("producer hints for %s: %d, want %d", cat, hints[cat], n)
		}
	}
	if got := tr.Unique(); got != 269 {
		t.Errorf("unique event IDs: %d, want 269", got)
	}
	if got := tr.ConflictCount(); got != 3 {
		t.Errorf("ConflictCount = %d, want 3", got)
	}
	for _, id := range []string{"evt-22006c7fe6c3", "evt-268573f47bce", "evt-89e517dde935"} {
		if !tr.IsConflict(id) {
			t.Errorf("%s is not a conflict", id)
		}
	}
	for _, id := range []string{"evt-84cc7d675284", "evt-bcb9a81a86f9", "evt-53c42e2a3bf6", "evt-52b1c6d214c9"} {
		if tr.IsConflict(id) {
			t.Errorf("plain duplicate %s is a conflict", id)
		}
	}
	wantFps := map[string]int{FingerprintMatch: 256, FingerprintComputed: 15, FingerprintMismatch: 3, FingerprintUnverifiable: 2}
	for v, n := range wantFps {
		if fps[v] != n {
			t.Errorf("fingerprint %s: %d, want %d", v, fps[v], n)
		}
	}
	if want := map[string]int{EncodingJSON: 250, EncodingUTF8: 19, EncodingBase64: 7}; !mapsEqual(encodings, want) {
		t.Errorf("payload encodings %v, want %v", encodings, want)
	}
	check := func(what string, got, want []string) {
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", what, got, want)
		}
	}
	check("malformed", malformed, []string{"20261129T080713Z-0001", "20261129T082640Z-0014", "20261129T084409Z-0036", "20261129T090327Z-0100",
		"20261129T091150Z-0135", "20261129T092102Z-0173", "20261129T093644Z-0247", "20261129T095231Z-0279"})
	check("mismatch", mismatch, []string{"20261129T085141Z-0054", "20261129T092104Z-0174", "20261129T092221Z-0176"})
	check("unverifiable", unverifiable, []string{"20261129T090920Z-0128", "20261129T092904Z-0216"})
	check("computed", computed, []string{"20261129T085010Z-0052", "20261129T085702Z-0067", "20261129T085955Z-0080", "20261129T090011Z-0081",
		"20261129T090047Z-0082", "20261129T090545Z-0110", "20261129T090810Z-0121", "20261129T091057Z-0133", "20261129T091405Z-0143",
		"20261129T091608Z-0148", "20261129T091816Z-0162", "20261129T093321Z-0231", "20261129T093339Z-0232", "20261129T094641Z-0271",
		"20261129T094818Z-0274"})
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Each malformed file of the incident, with the field its reason names.
func TestIncidentMalformedReasons(t *testing.T) {
	want := map[string]string{
		"20261129T080713Z-0001": "invalid JSON",
		"20261129T082640Z-0014": "event_id",
		"20261129T084409Z-0036": "base64",
		"20261129T090327Z-0100": "attempts",
		"20261129T091150Z-0135": "dead_lettered_at",
		"20261129T092102Z-0173": "empty",
		"20261129T093644Z-0247": "not a JSON object",
		"20261129T095231Z-0279": "UTF-8",
	}
	for _, x := range readIncident(t) {
		w, ok := want[x.name]
		if !ok {
			continue
		}
		if !strings.Contains(x.e.Malformed, w) {
			t.Errorf("%s: Malformed %q, want it to mention %q", x.name, x.e.Malformed, w)
		}
	}
}

// Export and re-import of the whole incident: MarshalJSON of every entry
// reads back with DecodeRecord (malformed ones keep reason and raw bytes),
// and a decodable entry's second MarshalJSON is byte-identical.
func TestIncidentExportRoundTrip(t *testing.T) {
	for _, x := range readIncident(t) {
		line, err := x.e.MarshalJSON()
		if err != nil {
			t.Errorf("%s: MarshalJSON: %v", x.name, err)
			continue
		}
		r, err := DecodeRecord(line)
		if err != nil {
			t.Errorf("%s: DecodeRecord: %v", x.name, err)
			continue
		}
		if x.e.Malformed != "" {
			if r.Malformed != x.e.Malformed || string(r.Raw) != string(x.data) || r.ID != x.name {
				t.Errorf("%s: malformed record lost reason or bytes: %q", x.name, r.Malformed)
			}
			continue
		}
		if r.EventID != x.e.EventID || string(r.Payload) != string(x.e.Payload) || r.Fingerprint != x.e.Fingerprint {
			t.Errorf("%s: record differs", x.name)
		}
		again, err := r.MarshalJSON()
		if err != nil || string(again) != string(line) {
			t.Errorf("%s: second MarshalJSON differs (%v)", x.name, err)
		}
	}
}
