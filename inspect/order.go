package inspect

import (
	"cmp"
	"slices"
)

// OrderCategories sorts category names the one way every view lists them
// (stats, categorize, sample, ui): by count, largest first, since the
// biggest category is where an incident's work is; equal counts in the
// rules' order (rules lists the categories of the rules in effect); names
// no rule has (a producer's hint) after those, alphabetically.
func OrderCategories(names []string, count func(string) int, rules []string) {
	rank := make(map[string]int, len(rules))
	for i, r := range rules {
		rank[r] = i
	}
	rankOf := func(n string) int {
		if i, ok := rank[n]; ok {
			return i
		}
		return len(rules)
	}
	slices.SortStableFunc(names, func(a, b string) int {
		return cmp.Or(
			cmp.Compare(count(b), count(a)),
			cmp.Compare(rankOf(a), rankOf(b)),
			cmp.Compare(a, b),
		)
	})
}
