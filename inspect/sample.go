package inspect

import (
	"context"
	"math/rand/v2"
	"slices"
)

// Sample picks up to perCategory entries of each category with reservoir
// sampling seeded by seed, so the same seed over the same DLQ picks the same
// entries. Memory holds perCategory envelopes per category, never the DLQ.
func (w Walker) Sample(ctx context.Context, sel Selector, perCategory int, seed uint64) ([]Item, error) {
	conflicts, err := w.Conflicts(ctx)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	type reservoir struct {
		seen  int
		items []Item
	}
	res := map[string]*reservoir{}
	limit := sel.Limit
	sel.Limit = 0
	_, err = w.Walk(ctx, conflicts, sel, "", func(it Item) error {
		r := res[it.Class.Category]
		if r == nil {
			r = &reservoir{}
			res[it.Class.Category] = r
		}
		r.seen++
		if len(r.items) < perCategory {
			r.items = append(r.items, it)
		} else if j := rng.IntN(r.seen); j < perCategory {
			r.items[j] = it
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var rules, names []string
	for _, known := range w.Classifier.Categories() {
		rules = append(rules, known.Category)
	}
	for name := range res {
		names = append(names, name)
	}
	OrderCategories(names, func(n string) int { return res[n].seen }, rules)
	var out []Item
	for _, name := range names {
		out = append(out, sortByID(res[name].items)...)
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func sortByID(items []Item) []Item {
	slices.SortFunc(items, func(a, b Item) int {
		switch {
		case a.Envelope.ID < b.Envelope.ID:
			return -1
		case a.Envelope.ID > b.Envelope.ID:
			return 1
		}
		return 0
	})
	return items
}
