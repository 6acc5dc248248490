package cmd

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dlqctl/dlqctl/envelope"
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

func quoteJoin(items []string, sep string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, sep)
}
