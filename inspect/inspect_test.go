package inspect

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backends/dir"
	"github.com/dlqctl/dlqctl/envelope"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{"": 0, "90s": 90 * time.Second, "15m": 15 * time.Minute, "2d": 48 * time.Hour, "1d12h": 36 * time.Hour}
	for in, want := range good {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"3x", "d", "-5m", "1.5d", "2dd"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

func TestSelectorMatch(t *testing.T) {
	e := envelope.Envelope{EventID: "E1", Origin: envelope.Origin{Topic: "orders"}, Owner: "team-a", Attempts: 4,
		LastError: "timeout calling psp", DeadLetteredAt: now.Add(-2 * time.Hour), RecoverBy: now.Add(-time.Minute)}
	c := envelope.Classification{Category: "transient"}
	cases := []struct {
		sel  Selector
		want bool
	}{
		{Selector{}, true},
		{Selector{Categories: []string{"schema"}}, false},
		{Selector{Categories: []string{"schema", "transient"}}, true},
		{Selector{Origins: []string{"payments"}}, false},
		{Selector{Error: regexp.MustCompile("psp$")}, true},
		{Selector{Error: regexp.MustCompile("^psp")}, false},
		{Selector{EventIDs: []string{"E2"}}, false},
		{Selector{Owners: []string{"team-a"}}, true},
		{Selector{Overdue: true}, true},
		{Selector{OlderThan: time.Hour}, true},
		{Selector{OlderThan: 3 * time.Hour}, false},
		{Selector{NewerThan: time.Hour}, false},
		{Selector{NewerThan: 3 * time.Hour}, true},
		{Selector{MinAttempts: 5}, false},
		{Selector{MinAttempts: 4}, true},
	}
	for i, c2 := range cases {
		if got := c2.sel.Match(e, c, now); got != c2.want {
			t.Errorf("case %d %+v: Match = %v, want %v", i, c2.sel, got, c2.want)
		}
	}
	if IsOverdue(envelope.Envelope{}, now) {
		t.Error("an entry without recover_by is overdue")
	}
}

func quantilesOf(secs ...uint32) *ageQuantiles {
	var q ageQuantiles
	for _, v := range secs {
		q.add(time.Duration(v) * time.Second)
	}
	return &q
}

func TestPercentileNearestRank(t *testing.T) {
	ages := quantilesOf(10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
	if p := ages.percentile(50); p != 5*time.Second {
		t.Errorf("p50 = %v, want 5s", p)
	}
	if p := ages.percentile(95); p != 10*time.Second {
		t.Errorf("p95 = %v, want 10s", p)
	}
	if p := quantilesOf().percentile(50); p != 0 {
		t.Errorf("p50 of nothing = %v", p)
	}
	if p := quantilesOf(7).percentile(95); p != 7*time.Second {
		t.Errorf("p95 of one = %v", p)
	}
}

// TestPercentilesPastTheExactListStayWithinTheirAccuracy feeds more ages
// than are kept exactly and compares with the exact nearest rank.
func TestPercentilesPastTheExactListStayWithinTheirAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q ageQuantiles
	var all []uint32
	for range exactAges*3 + 17 {
		// Ages from seconds to weeks, skewed towards the recent.
		v := uint32(math.Exp(rng.Float64() * math.Log(14*24*3600)))
		q.add(time.Duration(v) * time.Second)
		all = append(all, v)
	}
	if q.buckets == nil || q.exact != nil {
		t.Fatal("the exact list was not folded into buckets")
	}
	slices.Sort(all)
	for _, p := range []int{1, 50, 95, 99, 100} {
		rank := (p*len(all) + 99) / 100
		want := float64(all[rank-1])
		got := q.percentile(p).Seconds()
		if want < linearAges && got != want || math.Abs(got-want) > want*ageAccuracy+1 {
			t.Errorf("p%d = %.0fs, exact %.0fs: off by more than %.1f%%", p, got, want, ageAccuracy*100)
		}
	}
}

func TestRedactor(t *testing.T) {
	r := NewRedactor([]string{"order.amount", "sku"})
	e := envelope.Envelope{PayloadEncoding: envelope.EncodingJSON, Payload: []byte(
		`{"customer":{"name":"Ann","customerEmail":"a@x","phone_number":"1"},"order":{"amount":5,"id":"o1"},"amount":7,"items":[{"sku":"S1","qty":2}],"note":"<ok>"}`)}
	got := string(r.Envelope(e).Payload)
	for _, leak := range []string{"Ann", "a@x", `"1"`, "S1", `"amount":5`} {
		if strings.Contains(got, leak) {
			t.Errorf("%s still in %s", leak, got)
		}
	}
	for _, kept := range []string{`"amount":7`, `"qty":2`, `"id":"o1"`, `"<ok>"`} {
		if !strings.Contains(got, kept) {
			t.Errorf("%s was redacted from %s", kept, got)
		}
	}
	text := r.Envelope(envelope.Envelope{PayloadEncoding: envelope.EncodingUTF8, Payload: []byte("name=Ann")})
	if strings.Contains(string(text.Payload), "Ann") || !strings.Contains(string(text.Payload), "8 bytes") {
		t.Errorf("a text payload must be hidden whole: %q", text.Payload)
	}
}

func incident(t *testing.T) Walker {
	q, err := dirqueue.Open(filepath.Join("..", "testdata", "incident"))
	if err != nil {
		t.Fatal(err)
	}
	return Walker{Source: q, Classifier: envelope.NewClassifier(envelope.DefaultRules()), Now: now}
}

func TestSampleIsDeterministicPerSeed(t *testing.T) {
	w := incident(t)
	ids := func(seed uint64) string {
		items, err := w.Sample(context.Background(), Selector{}, 2, seed)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			out = append(out, it.Class.Category+":"+it.Envelope.ID)
		}
		return strings.Join(out, " ")
	}
	a, b, c := ids(1), ids(1), ids(2)
	if a != b {
		t.Errorf("the same seed picked different entries:\n%s\n%s", a, b)
	}
	if a == c {
		t.Errorf("seeds 1 and 2 picked the same entries: %s", a)
	}
	if n := strings.Count(a, "transient:"); n != 2 {
		t.Errorf("%d transient entries, want 2 per category: %s", n, a)
	}
}

func TestSummarizeTheIncident(t *testing.T) {
	s, err := incident(t).Summarize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Total != 284 || s.ByCategory["conflict"] != 6 || len(s.Conflicts) != 3 || s.Malformed != 8 || s.UniqueEvents != 269 {
		t.Errorf("summary %+v", s)
	}
	sum := 0
	for _, b := range s.AgeBuckets {
		sum += b.Count
	}
	if sum != s.Total {
		t.Errorf("age buckets count %d entries, want %d", sum, s.Total)
	}
	if s.AgeP50 > s.AgeP95 || s.AgeP95 > s.OldestAge {
		t.Errorf("p50 %v p95 %v oldest %v out of order", s.AgeP50, s.AgeP95, s.OldestAge)
	}
	var names []string
	for _, c := range s.Categories {
		names = append(names, c.Name)
	}
	// By count, largest first (the incident has no two of a count).
	if got := fmt.Sprint(names); got != "[transient schema missing-reference code-defect permission unknown malformed conflict]" {
		t.Errorf("categories in order %s", got)
	}
}

func TestWalkLimitAndCursor(t *testing.T) {
	w := incident(t)
	conflicts, err := w.Conflicts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	next, err := w.Walk(context.Background(), conflicts, Selector{Categories: []string{"transient"}, Limit: 3}, "", func(it Item) error {
		got = append(got, it.Envelope.ID)
		return nil
	})
	if err != nil || len(got) != 3 || next != got[2] {
		t.Fatalf("walk: %v next %q err %v", got, next, err)
	}
	var more []string
	w.Walk(context.Background(), conflicts, Selector{Categories: []string{"transient"}, Limit: 3}, next, func(it Item) error {
		more = append(more, it.Envelope.ID)
		return nil
	})
	if len(more) != 3 || more[0] <= got[2] {
		t.Errorf("the next page %v does not follow %v", more, got)
	}
}

// TestRedactorTargetsPersonalNames: the default list hides a person's name
// wherever the payload keeps it and leaves the names of things alone; a
// "name" given with --redact hides every name, as any word does.
func TestRedactorTargetsPersonalNames(t *testing.T) {
	payload := []byte(`{"name":"Root Person","customer":{"name":"Ann Lee","id":"c1"},"recipient":{"name":"Bo Chan"},` +
		`"first_name":"Cy","lastName":"Dee","fullname":"Ed Fox","surname":"Gu","username":"hi99","customerName":"Ivy",` +
		`"accountHolder":"Jo","items":[{"name":"Espresso beans 1kg","sku":"S1"}],"product":{"name":"Grinder"},` +
		`"productName":"Kettle","hostname":"web-1","fileName":"a.csv","companyName":"Acme GmbH","merchant":{"name":"Shop"}}`)
	e := envelope.Envelope{PayloadEncoding: envelope.EncodingJSON, Payload: payload}
	got := string(NewRedactor(nil).Envelope(e).Payload)
	for _, leak := range []string{"Root Person", "Ann Lee", "Bo Chan", `"Cy"`, `"Dee"`, "Ed Fox", `"Gu"`, "hi99", "Ivy", `"Jo"`} {
		if strings.Contains(got, leak) {
			t.Errorf("a person's name %s is shown: %s", leak, got)
		}
	}
	for _, kept := range []string{"Espresso beans 1kg", "Grinder", "Kettle", "web-1", "a.csv", "Acme GmbH", `"Shop"`, `"c1"`, `"S1"`} {
		if !strings.Contains(got, kept) {
			t.Errorf("%s is no person's and was redacted: %s", kept, got)
		}
	}
	if got := string(NewRedactor([]string{"name"}).Envelope(e).Payload); strings.Contains(got, "Espresso") || strings.Contains(got, "web-1") {
		t.Errorf("--redact name must hide every name: %s", got)
	}
}
