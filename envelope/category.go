package envelope

import (
	"fmt"
	"regexp"
	"strings"
)

// Category names that dlqctl itself decides (the built-in category rules).
const (
	CategoryMalformed        = "malformed"
	CategoryConflict         = "conflict"
	CategorySchema           = "schema"
	CategoryCodeDefect       = "code-defect"
	CategoryPermission       = "permission"
	CategoryMissingReference = "missing-reference"
	CategoryTransient        = "transient"
	CategoryUnknown          = "unknown"
)

// SourceGone starts the malformed reason of an entry that holds no
// payload of its own and whose source no longer holds it (a Kafka share
// group's header-only dead letter whose source record retention deleted):
// nothing can redrive it, and stats and check count such entries apart.
const SourceGone = "source gone: "

// Dispositions: what an operator does with a category.
const (
	DispositionRedrive        = "redrive"
	DispositionFixThenRedrive = "fix-then-redrive"
	DispositionInvestigate    = "investigate"
	DispositionResolve        = "resolve"
	DispositionQuarantine     = "quarantine"
)

// Dispositions lists the valid dispositions.
func Dispositions() []string {
	return []string{DispositionRedrive, DispositionFixThenRedrive, DispositionInvestigate, DispositionResolve, DispositionQuarantine}
}

// Rule puts an envelope whose last_error matches Pattern (and whose origin
// and properties match, when given) into category Name.
type Rule struct {
	Name        string
	Disposition string
	Pattern     *regexp.Regexp
	// Origin, when set, must match the origin topic.
	Origin *regexp.Regexp
	// Properties, when set, must all be present with these exact values.
	Properties map[string]string
	// Source says where the rule came from ("default" or a rules file) for --explain.
	Source string
}

func (r Rule) matches(e Envelope) (string, bool) {
	if r.Origin != nil && !r.Origin.MatchString(e.Origin.Topic) {
		return "", false
	}
	for k, v := range r.Properties {
		if got, ok := e.Properties[k]; !ok || got != v {
			return "", false
		}
	}
	if r.Pattern == nil {
		return "", true
	}
	loc := r.Pattern.FindStringIndex(e.LastError)
	if loc == nil {
		return "", false
	}
	return e.LastError[loc[0]:loc[1]], true
}

// DefaultRules are the built-in rules 4 to 8, in order.
func DefaultRules() []Rule {
	rule := func(name, disposition, pattern string) Rule {
		return Rule{Name: name, Disposition: disposition, Pattern: regexp.MustCompile(pattern), Source: "default"}
	}
	return []Rule{
		rule(CategorySchema, DispositionFixThenRedrive, `(?i)schema|unmarshal|deserializ|cannot parse|parse error|invalid json|invalid format|required field|missing field`),
		rule(CategoryCodeDefect, DispositionFixThenRedrive, `(?i)panic|nil pointer|null ?pointer|NullPointerException|index out of range|assertion failed|stack overflow`),
		rule(CategoryPermission, DispositionInvestigate, `(?i)permission denied|forbidden|\b403\b|unauthori[sz]ed|\b401\b|access denied`),
		rule(CategoryMissingReference, DispositionResolve, `(?i)not found|no such|does not exist|was deleted|unknown (order|id|record|entity)`),
		rule(CategoryTransient, DispositionRedrive, `(?i)timeout|timed out|deadline exceeded|connection (refused|reset)|unavailable|\b50[234]\b|too many requests|\b429\b|temporar`),
	}
}

// Classification is the category an envelope got and why.
type Classification struct {
	Category    string `json:"category"`
	Disposition string `json:"disposition"`
	// Rule names the rule that decided: "malformed", "conflict",
	// "error_class", "default:<name>", "<source>:<name>" or "fallback".
	Rule string `json:"rule"`
	// Reason says what matched, for --explain.
	Reason string `json:"reason"`
}

// Classifier assigns the built-in category rules categories. It holds no mutable state and is
// safe for concurrent use.
type Classifier struct {
	rules []Rule
	known map[string]string // category → disposition, for producer hints
}

// NewClassifier builds a classifier over rules, which take the place of
// the built-in rules 4–8; malformed, conflict, producer hints and unknown
// keep their places around them.
func NewClassifier(rules []Rule) *Classifier {
	c := &Classifier{rules: rules, known: map[string]string{}}
	for _, r := range rules {
		if _, ok := c.known[r.Name]; !ok {
			c.known[r.Name] = r.Disposition
		}
	}
	c.known[CategoryUnknown] = DispositionInvestigate
	return c
}

// Categories lists every category this classifier can produce with its
// disposition, in rule order.
func (c *Classifier) Categories() []Classification {
	out := []Classification{
		{Category: CategoryMalformed, Disposition: DispositionInvestigate},
		{Category: CategoryConflict, Disposition: DispositionQuarantine},
	}
	seen := map[string]bool{CategoryMalformed: true, CategoryConflict: true}
	for _, r := range c.rules {
		if !seen[r.Name] {
			seen[r.Name] = true
			out = append(out, Classification{Category: r.Name, Disposition: r.Disposition})
		}
	}
	if !seen[CategoryUnknown] {
		out = append(out, Classification{Category: CategoryUnknown, Disposition: DispositionInvestigate})
	}
	return out
}

// Disposition returns the disposition of a category name, and whether the
// classifier knows it.
func (c *Classifier) Disposition(category string) (string, bool) {
	switch category {
	case CategoryMalformed:
		return DispositionInvestigate, true
	case CategoryConflict:
		return DispositionQuarantine, true
	}
	d, ok := c.known[category]
	return d, ok
}

// Classify decides e's category. conflict says that the DLQ holds another
// fingerprint for e's event_id (see ConflictTracker).
func (c *Classifier) Classify(e Envelope, conflict bool) Classification {
	if e.Malformed != "" {
		return Classification{CategoryMalformed, DispositionInvestigate, "malformed", e.Malformed}
	}
	if conflict {
		return Classification{CategoryConflict, DispositionQuarantine, "conflict", fmt.Sprintf("event_id %q has more than one fingerprint in the DLQ", e.EventID)}
	}
	if e.ErrorClass != "" {
		if d, ok := c.known[e.ErrorClass]; ok {
			return Classification{e.ErrorClass, d, "error_class", fmt.Sprintf("producer set error_class %q", e.ErrorClass)}
		}
	}
	for _, r := range c.rules {
		if m, ok := r.matches(e); ok {
			reason := "matched origin/properties"
			if r.Pattern != nil {
				reason = fmt.Sprintf("last_error matched %q at %q", r.Pattern.String(), m)
			}
			return Classification{r.Name, r.Disposition, r.Source + ":" + r.Name, reason}
		}
	}
	return Classification{CategoryUnknown, DispositionInvestigate, "fallback", "no rule matched last_error"}
}

// UsesProperties says whether a rule looks at an entry's properties: if
// none does, classifying never needs them (see backend.LeanScanner).
func (c *Classifier) UsesProperties() bool {
	for _, r := range c.rules {
		if len(r.Properties) > 0 {
			return true
		}
	}
	return false
}

// Memo classifies like its Classifier and remembers the outcome by
// (error_class, last_error), which is all the default rules look at: an
// incident repeats a handful of errors a million times, and the regular
// expressions are most of the cost of reading a DLQ. Rules that look at
// origin or properties turn the memo off. A Memo belongs to one scan and is
// not safe for concurrent use; its size is bounded.
type Memo struct {
	c    *Classifier
	m    map[memoKey]Classification
	used bool
}

type memoKey struct{ errorClass, lastError string }

// memoMax bounds a memo: past it, classifications are computed, not kept.
const memoMax = 1 << 14

// Memo returns a memo over c.
func (c *Classifier) Memo() *Memo {
	m := &Memo{c: c, m: map[memoKey]Classification{}, used: true}
	for _, r := range c.rules {
		if r.Origin != nil || len(r.Properties) > 0 {
			m.used = false
		}
	}
	return m
}

// Classify is Classifier.Classify, remembered.
func (m *Memo) Classify(e Envelope, conflict bool) Classification {
	if !m.used || e.Malformed != "" || conflict {
		return m.c.Classify(e, conflict)
	}
	k := memoKey{e.ErrorClass, e.LastError}
	if c, ok := m.m[k]; ok {
		return c
	}
	c := m.c.Classify(e, false)
	if len(m.m) < memoMax {
		m.m[k] = c
	}
	return c
}

// ValidDisposition reports whether d is one of Dispositions.
func ValidDisposition(d string) bool {
	for _, v := range Dispositions() {
		if v == d {
			return true
		}
	}
	return false
}

// RuleSpec is a rule as written in a rules file or the config's
// `categories:` section.
type RuleSpec struct {
	Name        string            `yaml:"name" json:"name"`
	Match       string            `yaml:"match" json:"match"`
	Origin      string            `yaml:"origin" json:"origin"`
	Properties  map[string]string `yaml:"properties" json:"properties"`
	Disposition string            `yaml:"disposition" json:"disposition"`
}

// RulesSpec is a whole rules file: `mode: extend` (default) puts its rules
// before the defaults, `mode: replace` uses them instead.
type RulesSpec struct {
	Mode  string     `yaml:"mode" json:"mode"`
	Rules []RuleSpec `yaml:"rules" json:"rules"`
}

// Compile turns a rules spec into rules; source names it in --explain and
// in errors.
func (s RulesSpec) Compile(source string) ([]Rule, error) {
	var custom []Rule
	for i, rs := range s.Rules {
		where := fmt.Sprintf("%s: rule %d", source, i+1)
		if rs.Name != "" {
			where += fmt.Sprintf(" (%s)", rs.Name)
		}
		if rs.Name == "" {
			return nil, fmt.Errorf("%s: name is required", where)
		}
		if rs.Name == CategoryMalformed || rs.Name == CategoryConflict {
			return nil, fmt.Errorf("%s: %q is decided by dlqctl itself and cannot be a rule", where, rs.Name)
		}
		if !ValidDisposition(rs.Disposition) {
			return nil, fmt.Errorf("%s: disposition %q is not one of %s", where, rs.Disposition, strings.Join(Dispositions(), ", "))
		}
		if rs.Match == "" && rs.Origin == "" && len(rs.Properties) == 0 {
			return nil, fmt.Errorf("%s: needs match, origin or properties", where)
		}
		r := Rule{Name: rs.Name, Disposition: rs.Disposition, Properties: rs.Properties, Source: source}
		var err error
		if rs.Match != "" {
			if r.Pattern, err = regexp.Compile(rs.Match); err != nil {
				return nil, fmt.Errorf("%s: match: %v", where, err)
			}
		}
		if rs.Origin != "" {
			if r.Origin, err = regexp.Compile("^(?:" + rs.Origin + ")$"); err != nil {
				return nil, fmt.Errorf("%s: origin: %v", where, err)
			}
		}
		custom = append(custom, r)
	}
	switch s.Mode {
	case "", "extend":
		return append(custom, DefaultRules()...), nil
	case "replace":
		return custom, nil
	}
	return nil, fmt.Errorf("%s: mode %q is not extend or replace", source, s.Mode)
}

// hashString is 64-bit FNV-1a, deterministic across runs so results are
// reproducible. At a million distinct event IDs a collision has odds of
// about 1 in 4·10^7; one between two event IDs errs on the safe side (a
// false conflict is quarantined, never redriven).
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
