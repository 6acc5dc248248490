package conformance

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// TestNotApplicableList holds which backend may declare which battery
// case not applicable. A backend that declares a case this list does not
// allow fails its battery; widening the list means changing this test,
// with the reason in mayNotApply, so that no case is silenced by a
// declaration nobody reviewed.
func TestNotApplicableList(t *testing.T) {
	want := map[string]string{
		"broker-crash":            "dir",
		"conn-drop":               "dir",
		"read-only-limited":       "dir kafka nats pulsar rabbitmq/stream redis",
		"two-pointers":            "dir pulsar rabbitmq redis sqs",
		"forged-record":           "dir nats redis sqs",
		"bookkeeping-destination": "dir sqs",
		"identical-copies":        "kafka/share",
		"refused-destination":     "kafka/share",
	}
	got := map[string]string{}
	for c, backends := range mayNotApply() {
		var names []string
		for b, why := range backends {
			names = append(names, b)
			if strings.TrimSpace(why) == "" {
				t.Errorf("%s may be declared not applicable on %s with no reason given", c, b)
			}
		}
		sort.Strings(names)
		got[c] = strings.Join(names, " ")
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the battery's not-applicable list changed:\n got %v\nwant %v", got, want)
	}
	cases := map[string]bool{}
	for _, c := range append(batteryCases(), suiteCases()...) {
		cases[c.name] = true
	}
	for c := range got {
		if !cases[c] {
			t.Errorf("mayNotApply names %q, which is no battery case", c)
		}
	}
}

// TestReadCostList holds which backend may say that its reads cost: on
// the others, a read that raises a delivery count fails.
func TestReadCostList(t *testing.T) {
	var names []string
	for b, why := range mayCostReads() {
		names = append(names, b)
		if strings.TrimSpace(why) == "" {
			t.Errorf("%s may declare a read cost with no reason given", b)
		}
	}
	sort.Strings(names)
	if got := strings.Join(names, " "); got != "sqs" {
		t.Errorf("the backends that may declare a read cost changed: %s, want sqs", got)
	}
}

// TestDeclarationsChecked: a declaration the list allows passes; one it
// does not allow, one of no case, and one without a reason fail.
func TestDeclarationsChecked(t *testing.T) {
	for who, decl := range map[string]map[string]string{
		"dir":             {"conn-drop": "no connection"},
		"rabbitmq/stream": {"read-only-limited": "no delivery count", "two-pointers": "a copy holds it whole"},
	} {
		if bad := checkDeclarations(who, decl); len(bad) != 0 {
			t.Errorf("%s: an allowed declaration fails: %v", who, bad)
		}
	}
	for _, c := range []struct {
		backend string
		decl    map[string]string
		says    string
	}{
		{"rabbitmq", map[string]string{"conn-drop": "hard to test"}, "allows no backend rabbitmq"},
		{"rabbitmq", map[string]string{"read-only-limited": "a stream has none"}, "allows no backend rabbitmq"},
		{"rabbitmq/stream", map[string]string{"conn-drop": "hard to test"}, "allows no backend rabbitmq/stream"},
		{"kafka", map[string]string{"read-only": "costly"}, "allows no backend kafka"},
		{"dir", map[string]string{"no-such-case": "x"}, "no such case"},
		{"dir", map[string]string{"conn-drop": " "}, "without a reason"},
	} {
		bad := checkDeclarations(c.backend, c.decl)
		if len(bad) != 1 || !strings.Contains(bad[0], c.says) {
			t.Errorf("%s declaring %v: %v, want one failure saying %q", c.backend, c.decl, bad, c.says)
		}
	}
}
