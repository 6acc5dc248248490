package envelope

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func classifyText(c *Classifier, lastError string) Classification {
	return c.Classify(Envelope{EventID: "E1", LastError: lastError}, false)
}

func TestDefaultRules(t *testing.T) {
	c := NewClassifier(DefaultRules())
	cases := []struct {
		text string
		want string
	}{
		// schema
		{"json: cannot unmarshal string into Go struct field Order.amount of type int", CategorySchema},
		{"schema validation failed: /currency is required", CategorySchema},
		{"failed to deserialize OrderCreated v3", CategorySchema},
		{"Deserialization error at offset 12", CategorySchema},
		{"cannot parse \"12,50\" as decimal", CategorySchema},
		{"Parse Error: unexpected token", CategorySchema},
		{"invalid JSON in body", CategorySchema},
		{"invalid format for field date", CategorySchema},
		{"required field currency is empty", CategorySchema},
		{"missing field `currency`", CategorySchema},
		// code-defect
		{"panic: runtime error: invalid memory address or nil pointer dereference", CategoryCodeDefect},
		{"PANIC in handler", CategoryCodeDefect},
		{"java.lang.NullPointerException at Shipping.label", CategoryCodeDefect},
		{"null pointer in recipient address", CategoryCodeDefect},
		{"runtime error: index out of range [3] with length 3", CategoryCodeDefect},
		{"assertion failed: total >= 0", CategoryCodeDefect},
		{"fatal: stack overflow", CategoryCodeDefect},
		// permission
		{"ledger: permission denied for table entries", CategoryPermission},
		{"403 Forbidden", CategoryPermission},
		{"error 403", CategoryPermission},
		{"HTTP 403: nope", CategoryPermission},
		{"request unauthorized", CategoryPermission},
		{"Unauthorised client", CategoryPermission},
		{"status 401", CategoryPermission},
		{"S3: Access Denied", CategoryPermission},
		// missing-reference
		{"order order-123 not found", CategoryMissingReference},
		{"open /data/x: no such file or directory", CategoryMissingReference},
		{"customer does not exist", CategoryMissingReference},
		{"order was deleted by purge job", CategoryMissingReference},
		{"unknown order order-9", CategoryMissingReference},
		{"Unknown ID 42", CategoryMissingReference},
		{"unknown record", CategoryMissingReference},
		{"unknown entity Customer", CategoryMissingReference},
		// transient
		{"capture payment: context deadline exceeded", CategoryTransient},
		{"read tcp: i/o timeout", CategoryTransient},
		{"PSP timed out after 30s", CategoryTransient},
		{"dial tcp 10.0.0.1:5432: connection refused", CategoryTransient},
		{"read: connection reset by peer", CategoryTransient},
		{"service unavailable", CategoryTransient},
		{"upstream returned 503", CategoryTransient},
		{"HTTP 502 from gateway", CategoryTransient},
		{"504", CategoryTransient},
		{"429 Too Many Requests", CategoryTransient},
		{"rate limited: too many requests", CategoryTransient},
		{"status=429", CategoryTransient},
		{"temporary failure in name resolution", CategoryTransient},
		{"Temporarily out of capacity", CategoryTransient},
		// near misses and the fallback
		{"could not parse amount", CategoryUnknown},  // not "cannot parse"
		{"index out of bounds", CategoryUnknown},     // not "index out of range"
		{"pointer arithmetic", CategoryUnknown},      // not "nil pointer"
		{"code 14039", CategoryUnknown},              // \b403\b
		{"order-4031 rejected", CategoryUnknown},     // \b403\b
		{"4030 items", CategoryUnknown},              // \b403\b
		{"ticket 1401 closed", CategoryUnknown},      // \b401\b
		{"permission granted late", CategoryUnknown}, // not "permission denied"
		{"unknown customer c-1", CategoryUnknown},    // unknown (order|id|record|entity)
		{"found nothing to do", CategoryUnknown},     // not "not found"
		{"temp file too big", CategoryUnknown},       // not "temporar"
		{"batch 5030 failed", CategoryUnknown},       // \b50[234]\b
		{"error 500", CategoryUnknown},               // 500 is not 502/503/504
		{"order 4290 over limit", CategoryUnknown},   // \b429\b
		{"connection closed", CategoryUnknown},       // not refused/reset
		{"insufficient inventory for sku-1", CategoryUnknown},
		{"fraud check rejected payment", CategoryUnknown},
		{"", CategoryUnknown},
	}
	for _, tc := range cases {
		got := classifyText(c, tc.text)
		if got.Category != tc.want {
			t.Errorf("%q: category %q (rule %s), want %q", tc.text, got.Category, got.Rule, tc.want)
		}
	}
}

func TestDefaultRulesDispositionsAndOrder(t *testing.T) {
	rules := DefaultRules()
	var got [][2]string
	for _, r := range rules {
		got = append(got, [2]string{r.Name, r.Disposition})
		if r.Source != "default" {
			t.Errorf("rule %s source %q", r.Name, r.Source)
		}
	}
	want := [][2]string{
		{CategorySchema, DispositionFixThenRedrive},
		{CategoryCodeDefect, DispositionFixThenRedrive},
		{CategoryPermission, DispositionInvestigate},
		{CategoryMissingReference, DispositionResolve},
		{CategoryTransient, DispositionRedrive},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultRules = %v, want %v", got, want)
	}
}

func TestRuleOrder(t *testing.T) {
	c := NewClassifier(DefaultRules())
	cases := []struct {
		text string
		want string
	}{
		{"cannot unmarshal response: timeout", CategorySchema},                      // schema + transient
		{"schema registry unavailable", CategorySchema},                             // schema + transient
		{"deserializing: permission denied", CategorySchema},                        // schema + permission
		{"nil pointer dereference after 403", CategoryCodeDefect},                   // code-defect + permission
		{"panic: access denied", CategoryCodeDefect},                                // code-defect + permission
		{"panic: order not found", CategoryCodeDefect},                              // code-defect + missing-reference
		{"permission denied: bucket does not exist", CategoryPermission},            // permission + missing-reference
		{"403: order not found", CategoryPermission},                                // permission + missing-reference
		{"forbidden while the service was unavailable", CategoryPermission},         // permission + transient
		{"order not found after timeout", CategoryMissingReference},                 // missing-reference + transient
		{"no such host (temporary failure)", CategoryMissingReference},              // missing-reference + transient
		{"record was deleted; connection reset on retry", CategoryMissingReference}, // missing-reference + transient
	}
	for _, tc := range cases {
		got := classifyText(c, tc.text)
		if got.Category != tc.want {
			t.Errorf("%q: category %q, want %q", tc.text, got.Category, tc.want)
		}
	}
}

func TestClassifyPrecedence(t *testing.T) {
	c := NewClassifier(DefaultRules())
	cases := []struct {
		name        string
		e           Envelope
		conflict    bool
		category    string
		disposition string
		rule        string
		reason      string // substring
	}{
		{"malformed first", Envelope{Malformed: "no event_id", LastError: "timeout", ErrorClass: "schema"}, true,
			CategoryMalformed, DispositionInvestigate, "malformed", "no event_id"},
		{"conflict second", Envelope{EventID: "E1", LastError: "timeout"}, true,
			CategoryConflict, DispositionQuarantine, "conflict", "E1"},
		{"conflict beats error_class", Envelope{EventID: "E1", ErrorClass: "transient"}, true,
			CategoryConflict, DispositionQuarantine, "conflict", "E1"},
		{"producer hint beats regex", Envelope{EventID: "E1", ErrorClass: "permission", LastError: "context deadline exceeded"}, false,
			CategoryPermission, DispositionInvestigate, "error_class", "permission"},
		{"producer hint without last_error", Envelope{EventID: "E1", ErrorClass: "missing-reference"}, false,
			CategoryMissingReference, DispositionResolve, "error_class", "missing-reference"},
		{"producer hint unknown", Envelope{EventID: "E1", ErrorClass: "unknown", LastError: "timeout"}, false,
			CategoryUnknown, DispositionInvestigate, "error_class", "unknown"},
		{"unknown error_class falls through", Envelope{EventID: "E1", ErrorClass: "BusinessRule", LastError: "timeout"}, false,
			CategoryTransient, DispositionRedrive, "default:transient", "timeout"},
		{"error_class is case-sensitive", Envelope{EventID: "E1", ErrorClass: "Schema", LastError: "order not found"}, false,
			CategoryMissingReference, DispositionResolve, "default:missing-reference", "not found"},
		{"error_class conflict is not a hint", Envelope{EventID: "E1", ErrorClass: "conflict", LastError: "timeout"}, false,
			CategoryTransient, DispositionRedrive, "default:transient", ""},
		{"error_class malformed is not a hint", Envelope{EventID: "E1", ErrorClass: "malformed", LastError: ""}, false,
			CategoryUnknown, DispositionInvestigate, "fallback", ""},
		{"default rule", Envelope{EventID: "E1", LastError: "connection refused"}, false,
			CategoryTransient, DispositionRedrive, "default:transient", `"connection refused"`},
		{"fallback", Envelope{EventID: "E1", LastError: "coupon expired"}, false,
			CategoryUnknown, DispositionInvestigate, "fallback", "no rule"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := c.Classify(tc.e, tc.conflict)
			if got.Category != tc.category || got.Disposition != tc.disposition || got.Rule != tc.rule {
				t.Errorf("Classify = %+v, want %s/%s/%s", got, tc.category, tc.disposition, tc.rule)
			}
			if !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("Reason = %q, want it to contain %q", got.Reason, tc.reason)
			}
		})
	}
}

func TestRulesSpecCompile(t *testing.T) {
	ext, err := RulesSpec{Rules: []RuleSpec{
		{Name: "payments-outage", Match: `(?i)psp`, Origin: "payments", Disposition: DispositionRedrive},
		{Name: "acme-only", Properties: map[string]string{"tenant": "acme"}, Disposition: DispositionQuarantine},
	}}.Compile("rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(ext) != 2+len(DefaultRules()) {
		t.Fatalf("extend: %d rules", len(ext))
	}
	if ext[0].Name != "payments-outage" || ext[1].Name != "acme-only" || ext[2].Name != CategorySchema || ext[len(ext)-1].Name != CategoryTransient {
		t.Errorf("extend order: %v, %v, %v, ..., %v", ext[0].Name, ext[1].Name, ext[2].Name, ext[len(ext)-1].Name)
	}
	if ext[0].Source != "rules.yaml" || ext[2].Source != "default" {
		t.Errorf("sources %q %q", ext[0].Source, ext[2].Source)
	}
	c := NewClassifier(ext)
	cases := []struct {
		name string
		e    Envelope
		cat  string
		rule string
	}{
		{"custom before default", Envelope{EventID: "E", LastError: "PSP timeout", Origin: Origin{Topic: "payments"}}, "payments-outage", "rules.yaml:payments-outage"},
		{"origin anchored: prefix", Envelope{EventID: "E", LastError: "PSP timeout", Origin: Origin{Topic: "payments-eu"}}, CategoryTransient, "default:transient"},
		{"origin anchored: suffix", Envelope{EventID: "E", LastError: "PSP timeout", Origin: Origin{Topic: "old-payments"}}, CategoryTransient, "default:transient"},
		{"pattern must match too", Envelope{EventID: "E", LastError: "timeout", Origin: Origin{Topic: "payments"}}, CategoryTransient, "default:transient"},
		{"properties exact", Envelope{EventID: "E", LastError: "timeout", Properties: map[string]string{"tenant": "acme", "region": "eu"}}, "acme-only", "rules.yaml:acme-only"},
		{"properties other value", Envelope{EventID: "E", LastError: "timeout", Properties: map[string]string{"tenant": "acme-corp"}}, CategoryTransient, "default:transient"},
		{"properties case", Envelope{EventID: "E", LastError: "timeout", Properties: map[string]string{"tenant": "ACME"}}, CategoryTransient, "default:transient"},
		{"properties absent", Envelope{EventID: "E", LastError: "timeout"}, CategoryTransient, "default:transient"},
		{"custom name as producer hint", Envelope{EventID: "E", ErrorClass: "payments-outage", LastError: "x"}, "payments-outage", "error_class"},
	}
	for _, tc := range cases {
		got := c.Classify(tc.e, false)
		if got.Category != tc.cat || got.Rule != tc.rule {
			t.Errorf("%s: %+v, want %s by %s", tc.name, got, tc.cat, tc.rule)
		}
	}
	if d, ok := c.Disposition("acme-only"); !ok || d != DispositionQuarantine {
		t.Errorf("Disposition(acme-only) = %q %v", d, ok)
	}
	if got := c.Classify(Envelope{EventID: "E", LastError: "PSP", Origin: Origin{Topic: "payments"}}, false); got.Reason == "" || !strings.Contains(got.Reason, "psp") {
		t.Errorf("custom rule reason %q", got.Reason)
	}

	// Origin alternatives are anchored as a group.
	alt, err := RulesSpec{Rules: []RuleSpec{{Name: "o", Origin: "orders|payments", Disposition: DispositionRedrive}}}.Compile("f")
	if err != nil {
		t.Fatal(err)
	}
	ca := NewClassifier(alt)
	for topic, want := range map[string]string{"orders": "o", "payments": "o", "orders-x": CategoryUnknown, "x-payments": CategoryUnknown} {
		if got := ca.Classify(Envelope{EventID: "E", Origin: Origin{Topic: topic}}, false); got.Category != want {
			t.Errorf("origin alternation, topic %q: %s, want %s", topic, got.Category, want)
		}
	}

	rep, err := RulesSpec{Mode: "replace", Rules: []RuleSpec{{Name: "all-timeouts", Match: "timeout", Disposition: DispositionInvestigate}}}.Compile("r")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep) != 1 || rep[0].Name != "all-timeouts" {
		t.Fatalf("replace: %v", rep)
	}
	cr := NewClassifier(rep)
	if got := cr.Classify(Envelope{EventID: "E", LastError: "order not found"}, false); got.Category != CategoryUnknown {
		t.Errorf("replace kept defaults: %+v", got)
	}
	if got := cr.Classify(Envelope{EventID: "E", ErrorClass: CategoryTransient, LastError: "x"}, false); got.Category != CategoryUnknown {
		t.Errorf("replace: dropped default category still a producer hint: %+v", got)
	}
	if got := cr.Classify(Envelope{EventID: "E", LastError: "timeout"}, false); got.Category != "all-timeouts" || got.Rule != "r:all-timeouts" {
		t.Errorf("replace rule: %+v", got)
	}

	none, err := RulesSpec{Mode: "extend"}.Compile("e")
	if err != nil || len(none) != len(DefaultRules()) {
		t.Errorf("empty extend: %d rules, %v", len(none), err)
	}
}

func TestRulesSpecCompileErrors(t *testing.T) {
	ok := RuleSpec{Name: "n", Match: "x", Disposition: DispositionRedrive}
	with := func(f func(*RuleSpec)) RulesSpec {
		r := ok
		f(&r)
		return RulesSpec{Rules: []RuleSpec{ok, r}}
	}
	cases := []struct {
		name string
		spec RulesSpec
		want []string
	}{
		{"missing name", with(func(r *RuleSpec) { r.Name = "" }), []string{"rules.yaml", "rule 2", "name"}},
		{"bad disposition", with(func(r *RuleSpec) { r.Disposition = "retry" }), []string{"rule 2", "disposition", "retry"}},
		{"empty disposition", with(func(r *RuleSpec) { r.Disposition = "" }), []string{"disposition"}},
		{"bad regex", with(func(r *RuleSpec) { r.Match = "(unclosed" }), []string{"rule 2", "match"}},
		{"bad origin regex", with(func(r *RuleSpec) { r.Origin = "[a-" }), []string{"rule 2", "origin"}},
		{"reserved malformed", with(func(r *RuleSpec) { r.Name = CategoryMalformed }), []string{"malformed"}},
		{"reserved conflict", with(func(r *RuleSpec) { r.Name = CategoryConflict }), []string{"conflict"}},
		{"no condition", with(func(r *RuleSpec) { r.Match = "" }), []string{"match, origin or properties"}},
		{"bad mode", RulesSpec{Mode: "merge", Rules: []RuleSpec{ok}}, []string{"mode", "merge"}},
	}
	for _, tc := range cases {
		rules, err := tc.spec.Compile("rules.yaml")
		if err == nil {
			t.Errorf("%s: no error (%d rules)", tc.name, len(rules))
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, w)
			}
		}
	}
}

// Rule.Properties is documented as "must all be present with these exact
// values": an empty expected value must not match an absent property.
func TestRulePropertiesMustBePresent(t *testing.T) {
	rules, err := RulesSpec{Mode: "replace", Rules: []RuleSpec{{Name: "flagged", Properties: map[string]string{"flag": ""}, Disposition: DispositionInvestigate}}}.Compile("f")
	if err != nil {
		t.Fatal(err)
	}
	c := NewClassifier(rules)
	if got := c.Classify(Envelope{EventID: "E", Properties: map[string]string{"flag": ""}}, false); got.Category != "flagged" {
		t.Errorf("present empty property: %s", got.Category)
	}
	if got := c.Classify(Envelope{EventID: "E"}, false); got.Category != CategoryUnknown {
		t.Errorf("absent property matched a rule that requires it present: %+v", got)
	}
}

func TestClassifierCategories(t *testing.T) {
	names := func(cs []Classification) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Category+"="+c.Disposition)
		}
		return out
	}
	got := names(NewClassifier(DefaultRules()).Categories())
	want := []string{"malformed=investigate", "conflict=quarantine", "schema=fix-then-redrive", "code-defect=fix-then-redrive",
		"permission=investigate", "missing-reference=resolve", "transient=redrive", "unknown=investigate"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Categories =\n%v\nwant\n%v", got, want)
	}

	rules, err := RulesSpec{Rules: []RuleSpec{
		{Name: "psp", Match: "psp", Disposition: DispositionRedrive},
		{Name: CategoryTransient, Match: "flaky", Disposition: DispositionRedrive},
		{Name: "psp", Match: "stripe", Disposition: DispositionRedrive},
	}}.Compile("f")
	if err != nil {
		t.Fatal(err)
	}
	got = names(NewClassifier(rules).Categories())
	want = []string{"malformed=investigate", "conflict=quarantine", "psp=redrive", "transient=redrive", "schema=fix-then-redrive",
		"code-defect=fix-then-redrive", "permission=investigate", "missing-reference=resolve", "unknown=investigate"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("extended Categories =\n%v\nwant\n%v", got, want)
	}

	c := NewClassifier(DefaultRules())
	for cat, want := range map[string]string{CategoryMalformed: DispositionInvestigate, CategoryConflict: DispositionQuarantine,
		CategoryMissingReference: DispositionResolve, CategoryUnknown: DispositionInvestigate} {
		if d, ok := c.Disposition(cat); !ok || d != want {
			t.Errorf("Disposition(%s) = %q %v, want %q", cat, d, ok, want)
		}
	}
	if _, ok := c.Disposition("nope"); ok {
		t.Error("Disposition(nope) known")
	}
}

func TestValidDisposition(t *testing.T) {
	for _, d := range Dispositions() {
		if !ValidDisposition(d) {
			t.Errorf("%s not valid", d)
		}
	}
	for _, d := range []string{"", "Redrive", "retry", "drop"} {
		if ValidDisposition(d) {
			t.Errorf("%q valid", d)
		}
	}
	if len(Dispositions()) != 5 {
		t.Errorf("Dispositions = %v", Dispositions())
	}
}

func TestConflictTracker(t *testing.T) {
	ent := func(id, fp string) Envelope { return Envelope{EventID: id, Fingerprint: fp} }
	tr := NewConflictTracker()
	tr.Add(ent("dup", "sha256:aa"))
	tr.Add(ent("dup", "sha256:aa"))
	tr.Add(ent("c", "sha256:01"))
	tr.Add(ent("c", "sha256:02"))
	tr.Add(ent("c", "sha256:01"))
	tr.Add(ent("case", "sha256:ABCDEF"))
	tr.Add(ent("case", "SHA256:abcdef"))
	tr.Add(ent("single", "sha256:ff"))
	tr.Add(Envelope{EventID: "mal", Fingerprint: "sha256:1"})
	tr.Add(Envelope{EventID: "mal", Fingerprint: "sha256:2", Malformed: "bad"})
	tr.Add(Envelope{EventID: "onlymal", Fingerprint: "sha256:1", Malformed: "bad"})
	tr.Add(Envelope{EventID: "", Fingerprint: "sha256:3"})
	tr.Add(ent("z", "sha256:1"))
	tr.Add(ent("z", "md5:1"))

	for id, want := range map[string]bool{"dup": false, "c": true, "case": false, "single": false, "mal": false, "onlymal": false, "z": true, "never": false} {
		if got := tr.IsConflict(id); got != want {
			t.Errorf("IsConflict(%q) = %v, want %v", id, got, want)
		}
	}
	if got := tr.ConflictCount(); got != 2 {
		t.Errorf("ConflictCount = %d, want 2 (c and z)", got)
	}
	// dup, c, case, single, mal, z; not onlymal (malformed) nor "".
	if got := tr.Unique(); got != 6 {
		t.Errorf("Unique = %d, want 6", got)
	}
	if got := NewConflictTracker().ConflictCount(); got != 0 {
		t.Errorf("empty ConflictCount = %d", got)
	}
	// Adding after a query sorts again.
	tr.Add(ent("single", "sha256:other"))
	if !tr.IsConflict("single") || tr.ConflictCount() != 3 {
		t.Errorf("a conflict added after a query was not found")
	}
}

// TestConflictTrackerAcrossChunks fills several chunks, with repeats that
// compaction folds, and conflicts whose two fingerprints sit in different
// chunks.
func TestConflictTrackerAcrossChunks(t *testing.T) {
	tr := NewConflictTracker()
	const n = 3*trackerChunk + 100
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("E%d", i%(trackerChunk/2)) // every event four times or more
		tr.Add(Envelope{EventID: id, Fingerprint: "sha256:same"})
	}
	tr.Add(Envelope{EventID: "E7", Fingerprint: "sha256:other"})
	tr.Add(Envelope{EventID: "late", Fingerprint: "sha256:a"})
	for i := 0; i < trackerChunk; i++ {
		tr.Add(Envelope{EventID: fmt.Sprintf("F%d", i), Fingerprint: "sha256:x"})
	}
	tr.Add(Envelope{EventID: "late", Fingerprint: "sha256:b"})
	if got, want := tr.Unique(), trackerChunk/2+1+trackerChunk; got != want {
		t.Errorf("Unique = %d, want %d", got, want)
	}
	if !tr.IsConflict("E7") || !tr.IsConflict("late") || tr.IsConflict("E8") || tr.ConflictCount() != 2 {
		t.Errorf("conflicts: E7 %v late %v E8 %v count %d", tr.IsConflict("E7"), tr.IsConflict("late"), tr.IsConflict("E8"), tr.ConflictCount())
	}
	total := 0
	for _, c := range tr.chunks {
		total += len(c)
	}
	if total > trackerChunk/2+trackerChunk+trackerChunk/2 {
		t.Errorf("%d pairs kept for %d distinct events: repeats were not folded", total, tr.Unique())
	}
}
