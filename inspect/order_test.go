package inspect

import (
	"fmt"
	"testing"
)

// TestOrderCategories: by count, largest first; ties in the rules' order;
// names no rule has after the known ones of their count, alphabetically.
func TestOrderCategories(t *testing.T) {
	counts := map[string]int{"transient": 5, "conflict": 2, "malformed": 2, "zeta-hint": 2, "alpha-hint": 2, "schema": 9}
	names := []string{"zeta-hint", "transient", "conflict", "alpha-hint", "malformed", "schema"}
	OrderCategories(names, func(n string) int { return counts[n] }, []string{"malformed", "conflict", "schema", "transient"})
	if got := fmt.Sprint(names); got != "[schema transient malformed conflict alpha-hint zeta-hint]" {
		t.Errorf("order %s", got)
	}
}
