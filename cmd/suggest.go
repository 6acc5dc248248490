package cmd

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
)

// suggestDistance is how many edits a typo may be from a name it is taken
// for: "shcema" is two from "schema", "transiant" one from "transient".
// Cobra uses the same figure for command names.
const suggestDistance = 2

// closest returns the known names that typed may be a typo of: those a
// few edits away, or that it is the start of; nearest first.
func closest(typed string, known []string) []string {
	lower := strings.ToLower(typed)
	var out []string
	for d := 0; d <= suggestDistance; d++ {
		for _, k := range known {
			if editDistance(lower, strings.ToLower(k)) == d {
				out = append(out, k)
			}
		}
	}
	for _, k := range known {
		if lower != "" && strings.HasPrefix(strings.ToLower(k), lower) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, by rune.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// checkCategories refuses category names the rules in effect cannot
// produce, so a typo does not silently select (or allow) nothing. The
// error names the flag it came from, the nearest known names and all of
// them.
func checkCategories(flag string, names []string, cl *envelope.Classifier) error {
	var known []string
	for _, c := range cl.Categories() {
		known = append(known, c.Category)
	}
	for _, n := range names {
		if _, ok := cl.Disposition(n); ok {
			continue
		}
		msg := fmt.Sprintf("%s %q: no such category", flag, n)
		if s := closest(n, known); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %s?", quoteJoin(s, " or "))
		}
		return usageErrorf("%s (known: %s; a --rules file adds its own)", msg, strings.Join(known, ", "))
	}
	return nil
}

// didYouMeanText is "; did you mean "a" or "b"?" for the known names typed
// may be a typo of, or "".
func didYouMeanText(typed string, known []string) string {
	if s := closest(typed, known); len(s) > 0 {
		return fmt.Sprintf("; did you mean %s?", quoteJoin(s, " or "))
	}
	return ""
}

var (
	unknownFlag     = regexp.MustCompile(`^unknown flag: --([^\s=]+)`)
	badDurationFlag = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-\w, )?--([\w-]+)" flag: time: `)
)

// flagHint is what a flag error of c adds: the flags a mistyped one may
// be (cobra's "Did you mean this?", as for a mistyped command), or the
// duration a mistyped one means ("3days" for --settle is 72h); "" when it
// has nothing to add.
func flagHint(c *cobra.Command, err error) string {
	if m := unknownFlag.FindStringSubmatch(err.Error()); m != nil {
		var names []string
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		if s := closest(m[1], names); len(s) > 0 {
			return "\n\nDid you mean this?\n\t--" + strings.Join(s, "\n\t--") + "\n"
		}
		return ""
	}
	if m := badDurationFlag.FindStringSubmatch(err.Error()); m != nil {
		if sug := inspect.SuggestDuration(m[1], false); sug != "" {
			return fmt.Sprintf("; did you mean --%s %s?", m[2], sug)
		}
	}
	return ""
}

// unknownKey is yaml's error for a key that no field of the type takes
// (KnownFields).
var unknownKey = regexp.MustCompile(`line (\d+): field (\S+) not found in type (\S+)`)

// explainUnknownKeys rewrites yaml's "field X not found in type T" in err,
// for a document decoded into root, as the key it is, the keys that T
// takes that it may be a typo of, and all of them.
func explainUnknownKeys(err error, root reflect.Type) error {
	keys := yamlKeys(root, map[string][]string{})
	msg := unknownKey.ReplaceAllStringFunc(err.Error(), func(m string) string {
		p := unknownKey.FindStringSubmatch(m)
		known, ok := keys[p[3]]
		if !ok {
			return m
		}
		return fmt.Sprintf("line %s: unknown key %q%s (known here: %s)", p[1], p[2], didYouMeanText(p[2], known), strings.Join(known, ", "))
	})
	return errors.New(msg)
}

// yamlKeys maps every struct type reachable from t (as reflect names it,
// which is how yaml names it) to the keys its fields take.
func yamlKeys(t reflect.Type, out map[string][]string) map[string][]string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return out
	}
	if _, seen := out[t.String()]; seen {
		return out
	}
	out[t.String()] = nil
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
			continue
		case strings.Contains(opts, "inline"):
			inner := yamlKeys(f.Type, map[string][]string{})
			keys = append(keys, inner[f.Type.String()]...)
			continue
		case name == "":
			name = strings.ToLower(f.Name)
		}
		keys = append(keys, name)
		yamlKeys(f.Type, out)
	}
	out[t.String()] = keys
	return out
}

func quoteJoin(items []string, sep string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, sep)
}
