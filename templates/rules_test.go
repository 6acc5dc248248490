package templates

import (
	"path/filepath"
	"regexp"
	"testing"
)

// TestSuggestedRulesSeparateTheCorpus: over each whole corpus, the first
// suggested rule (in the order Suggest gives) that matches a message is the
// rule of the group the miner put it in.
func TestSuggestedRulesSeparateTheCorpus(t *testing.T) {
	for _, f := range []string{"errors.tsv", "dlqerrors.tsv"} {
		_, msgs := readLabelled(t, filepath.Join("testdata", f))
		if wrong := ruleMisses(t, msgs, true); wrong > 0 {
			t.Errorf("%s: %d of %d messages matched another group's rule first", f, wrong, len(msgs))
		}
	}
}

// ruleMisses counts the messages that a rule other than their group's
// matches first, or none does.
func ruleMisses(t *testing.T, msgs []string, verbose bool) int {
	m := New(Default())
	cl := make([]int, len(msgs))
	for i, s := range msgs {
		cl[i] = m.Add(s).ID
	}
	groups := m.Groups()
	groupOf := map[int]int{}
	for gi, g := range groups {
		for _, c := range g.Clusters {
			groupOf[c] = gi
		}
	}
	sugg := Suggest(groups, func(string) bool { return false })
	res := make([]*regexp.Regexp, len(sugg))
	names := map[string]bool{}
	for i, s := range sugg {
		res[i] = regexp.MustCompile(s.Pattern)
		if names[s.Name] {
			t.Errorf("name %q twice", s.Name)
		}
		names[s.Name] = true
	}
	wrong := 0
	for i, msg := range msgs {
		want := groupOf[cl[i]]
		got := -1
		for j, re := range res {
			if re.MatchString(msg) {
				got = sugg[j].Group
				break
			}
		}
		if got != want {
			wrong++
			if verbose && wrong < 10 {
				g := "none"
				if got >= 0 {
					g = groups[got].Template
				}
				t.Logf("%q: in group %q, first rule is %s's", msg, groups[want].Template, g)
			}
		}
	}
	return wrong
}

func TestName(t *testing.T) {
	cases := map[string]string{
		"fraud check rejected order <*> (score <*>)": "fraud-check-rejected-order-score",
		"<*>": "template",
		"dial tcp <*>: connect: connection refused": "dial-tcp-connect-connection-refused",
	}
	for in, want := range cases {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPatternCut(t *testing.T) {
	m := New(Default())
	long := "stack: " + string(make([]byte, 0))
	for len(long) < MaxErrorBytes+100 {
		long += "frame "
	}
	c := m.Add(long)
	g := m.Groups()[0]
	if !g.Cut || !c.Cut {
		t.Fatal("not marked cut")
	}
	if !regexp.MustCompile(g.Pattern()).MatchString(long) {
		t.Errorf("the pattern of a cut group does not match its message")
	}
}

// TestPatternSpansLines: a variable that spans whitespace spans newlines
// too, so the rule of a multi-line error matches it.
func TestPatternSpansLines(t *testing.T) {
	m := New(Default())
	msgs := []string{"gift message \"blue\ngift wrap\" contains blocked words", "job 7\n8 9 failed"}
	for _, s := range msgs {
		m.Add(s)
	}
	gs := m.Groups()
	for i, s := range msgs {
		if p := gs[i].Pattern(); !regexp.MustCompile(p).MatchString(s) {
			t.Errorf("%s does not match %q", p, s)
		}
	}
}
