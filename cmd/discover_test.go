package cmd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backends/redis/redistest"
)

func discoverDoc(t *testing.T, args ...string) TemplatesDoc {
	t.Helper()
	out, errOut, code := run(t, nil, append([]string{"-o", "json", "categorize", "--discover"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc TemplatesDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return doc
}

// TestDiscoverIncident: the unknown bucket of the sample incident falls
// into the business rejections it hides, one template each.
func TestDiscoverIncident(t *testing.T) {
	checkIncidentTemplates(t, incidentSource(t))
}

// TestDiscoverOnRedis: the same on the incident imported into a real
// Redis stream, read through the lean scan.
func TestDiscoverOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	dump := filepath.Join(t.TempDir(), "incident.ndjson")
	if _, stderr, code := run(t, nil, "--source", incidentSource(t), "export", "--out", dump); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	source := srv.URL(0, "orders-dlq")
	if _, stderr, code := run(t, nil, "--source", source, "import", dump); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	checkIncidentTemplates(t, source)
	if all := discoverDoc(t, "--source", source, "--all"); all.Total != 284 {
		t.Errorf("--all on Redis: total %d, want 284", all.Total)
	}
}

func checkIncidentTemplates(t *testing.T, source string) {
	t.Helper()
	doc := discoverDoc(t, "--source", source)
	want := []string{
		"fraud check rejected order <*> (score <*>)=5",
		"refund amount exceeds captured amount=3",
		"coupon <*> expired before checkout completed=2",
		"state machine: cannot transition order <*> from CANCELLED to SHIPPED=2",
		"address rejected by carrier: PO boxes are not supported=2",
		"payment declined by issuer: do_not_honor=1",
		"credit limit exceeded for customer <*>=1",
	}
	var got []string
	seen := map[string]bool{}
	for _, g := range doc.Groups {
		got = append(got, fmt.Sprintf("%s=%d", g.Template, g.Count))
		if len(g.IDs) != g.Count {
			t.Errorf("%s: %d ids for %d entries", g.Template, len(g.IDs), g.Count)
		}
		for _, id := range g.IDs {
			if seen[id] {
				t.Errorf("id %s in two groups", id)
			}
			seen[id] = true
		}
		if g.OldestAgeSeconds == nil || len(g.SampleIDs) == 0 || g.SampleError == "" || g.Match == "" {
			t.Errorf("%s: missing oldest age, sample or match: %+v", g.Template, g)
		}
	}
	if doc.Scope != "unknown" || doc.Total != 16 {
		t.Errorf("scope %q total %d, want unknown 16", doc.Scope, doc.Total)
	}
	if !slices.Equal(got, want) {
		t.Errorf("groups\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSuggestedRulesMoveExactlyUnknown: loading the suggested rules moves
// each unknown entry into the category of its template and leaves every
// other entry where it was.
func TestSuggestedRulesMoveExactlyUnknown(t *testing.T) {
	src := incidentSource(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	doc := discoverDoc(t, "--source", src, "--suggest-rules", rules)
	categoryOf := func(extra ...string) map[string]string {
		out, errOut, code := run(t, nil, append([]string{"--source", src, "-o", "json", "list", "--limit", "0"}, extra...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var l struct {
			Items []struct{ ID, Category string }
		}
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, it := range l.Items {
			m[it.ID] = it.Category
		}
		return m
	}
	before, after := categoryOf(), categoryOf("--rules", rules)
	groupOf := map[string]int{}
	for gi, g := range doc.Groups {
		for _, id := range g.IDs {
			groupOf[id] = gi
		}
	}
	newCat := map[int]string{}
	for id, was := range before {
		now := after[id]
		if was != "unknown" {
			if now != was {
				t.Errorf("%s moved from %s to %s", id, was, now)
			}
			continue
		}
		gi, ok := groupOf[id]
		if !ok {
			t.Errorf("unknown entry %s is in no group", id)
			continue
		}
		if now == "unknown" {
			t.Errorf("%s stayed unknown (template %q)", id, doc.Groups[gi].Template)
		}
		if c, ok := newCat[gi]; ok && c != now {
			t.Errorf("group %q split into %s and %s", doc.Groups[gi].Template, c, now)
		}
		newCat[gi] = now
	}
	names := map[string]bool{}
	for gi, c := range newCat {
		if names[c] {
			t.Errorf("two groups moved into %s", c)
		}
		names[c] = true
		if c == "" || strings.Contains(doc.Groups[gi].Template, "fraud") && c != "fraud-check-rejected-order-score" {
			t.Errorf("group %q went to %q", doc.Groups[gi].Template, c)
		}
	}
	data, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "disposition: investigate"); n < len(doc.Groups) {
		t.Errorf("%d rules with disposition investigate for %d templates", n, len(doc.Groups))
	}
}

func TestDiscoverScopesAndUsage(t *testing.T) {
	src := incidentSource(t)
	all := discoverDoc(t, "--source", src, "--all")
	if all.Scope != "all" || all.Total != 284 {
		t.Errorf("--all: scope %q total %d, want all 284", all.Scope, all.Total)
	}
	sum := 0
	for i, g := range all.Groups {
		sum += g.Count
		if i > 0 && g.Count > all.Groups[i-1].Count {
			t.Errorf("not biggest first at %d", i)
		}
	}
	if sum != 284 {
		t.Errorf("groups hold %d of 284", sum)
	}
	// conflict needs the second pass: its entries are known only then.
	conf := discoverDoc(t, "--source", src, "--category", "conflict")
	if conf.Total != 6 {
		t.Errorf("--category conflict: total %d, want 6", conf.Total)
	}
	for _, args := range [][]string{
		{"categorize", "--discover", "--all", "--category", "schema"},
		{"categorize", "--discover", "--category", "nosuch"},
		{"categorize", "--all"},
		{"categorize", "--discover", "--explain"},
	} {
		if _, _, code := run(t, nil, append([]string{"--source", src}, args...)...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, ExitUsage)
		}
	}
	out, _, code := run(t, nil, "--source", src, "categorize", "--discover")
	if code != 0 || !strings.Contains(out, "fraud check rejected order <*> (score <*>)\t5\t") {
		t.Errorf("table: exit %d\n%s", code, out)
	}
}

// TestDiscoverBadErrors: empty, huge and non-UTF-8 errors are mined
// without a crash, the huge one cut and said so in its sample.
func TestDiscoverBadErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "error"), 0o755); err != nil {
		t.Fatal(err)
	}
	huge := "stack overflow-ish dump: " + strings.Repeat("frame 0x7f00 ", 20000)
	errs := []string{"", "", huge, huge + "x", "bad \xfc byte", "bad \xfd byte"}
	for i, e := range errs {
		b, _ := json.Marshal(e)
		if strings.ContainsAny(e, "\xfc\xfd") {
			b = []byte(`"` + e + `"`) // raw invalid bytes, as some producers write them
		}
		env := fmt.Sprintf(`{"schema":"dlqctl.envelope/v1","id":"e%d","event_id":"evt-%d","origin":{"backend":"redis","topic":"t"},"dead_lettered_at":"2026-11-29T08:00:0%dZ","attempts":1,"last_error":%s,"payload_encoding":"utf8","payload":"x"}`, i, i, i, b)
		if err := os.WriteFile(filepath.Join(dir, "error", fmt.Sprintf("e%d.json", i)), []byte(env), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc := discoverDoc(t, "--source", "dir:"+dir, "--all")
	if doc.Total != len(errs) {
		t.Fatalf("total %d, want %d", doc.Total, len(errs))
	}
	sawCut := false
	for _, g := range doc.Groups {
		if len(g.SampleError) > 4096 {
			t.Errorf("sample of %d bytes", len(g.SampleError))
		}
		if strings.Contains(g.SampleError, "(cut at ") {
			sawCut = true
			if g.Count != 2 {
				t.Errorf("the two huge errors are in a group of %d: %q", g.Count, g.Template)
			}
		}
	}
	if !sawCut {
		t.Errorf("no sample says it was cut: %+v", doc.Groups)
	}
}
