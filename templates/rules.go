package templates

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Pattern is an anchored regular expression that matches every message of
// the group: literal tokens as they are, each variable as any run of
// non-space characters (of any characters, newlines included, where one of
// its messages had whitespace there, a quoted string or a run of
// variables), tokens separated by whitespace. A group that held a cut message is anchored at the start
// only, since what came past the cut was never seen.
func (g Group) Pattern() string {
	if g.overflow {
		return ""
	}
	var b strings.Builder
	b.WriteString(`^\s*`)
	for i, t := range g.tokens {
		if i > 0 {
			b.WriteString(`\s+`)
		}
		if !t.variable {
			b.WriteString(regexp.QuoteMeta(t.text))
			continue
		}
		// A token may hold several variables ("ready=<*>,policy=<*>").
		for j, lit := range strings.Split(t.text, Wildcard) {
			if j > 0 {
				if t.spans {
					b.WriteString(`(?s:.*?)`) // newlines too: a stack trace
				} else {
					b.WriteString(`\S*?`)
				}
			}
			b.WriteString(regexp.QuoteMeta(lit))
		}
	}
	if !g.Cut {
		b.WriteString(`\s*$`)
	}
	return b.String()
}

// Specificity orders rules made from groups: a rule with more literal text
// goes first, so that a broader one cannot take another's messages.
func (g Group) Specificity() int {
	n := 0
	for _, t := range g.tokens {
		if t.variable {
			pre, suf, _ := strings.Cut(t.text, Wildcard)
			n += len(pre) + len(suf)
		} else {
			n += len(t.text) + 1
		}
	}
	return n
}

// Name derives a rule name from a template: its first literal words,
// lowercased and joined by dashes ("fraud-check-rejected-order-score");
// "template" when it has none.
func Name(template string) string {
	var words []string
	for _, f := range strings.Fields(template) {
		if strings.Contains(f, Wildcard) {
			continue
		}
		// Other characters separate words: do_not_honor, "orders.v2".
		words = append(words, strings.FieldsFunc(strings.ToLower(f), func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		})...)
		if len(words) >= 6 {
			words = words[:6]
			break
		}
	}
	name := strings.Join(words, "-")
	if len(name) > 48 {
		name = strings.TrimRight(name[:48], "-")
	}
	if name == "" {
		return "template"
	}
	return name
}

// Suggestion is one rule made from a group.
type Suggestion struct {
	Name    string
	Pattern string
	// Group indexes the groups passed to Suggest.
	Group int
}

// Suggest makes one rule per group (the overflow group has none), most
// specific first, with names unique among themselves and against taken.
func Suggest(groups []Group, taken func(string) bool) []Suggestion {
	var out []Suggestion
	used := map[string]bool{}
	for i, g := range groups {
		if g.overflow {
			continue
		}
		base := Name(g.Template)
		name := base
		for n := 2; used[name] || taken(name); n++ {
			name = base + "-" + strconv.Itoa(n)
		}
		used[name] = true
		out = append(out, Suggestion{Name: name, Pattern: g.Pattern(), Group: i})
	}
	sort.SliceStable(out, func(a, b int) bool {
		return groups[out[a].Group].Specificity() > groups[out[b].Group].Specificity()
	})
	return out
}
