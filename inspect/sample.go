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
	var out []Item
	for _, known := range w.Classifier.Categories() {
		if r := res[known.Category]; r != nil {
			out = append(out, sortByID(r.items)...)
			delete(res, known.Category)
		}
	}
	rest := make([]string, 0, len(res))
	for name := range res {
		rest = append(rest, name)
	}
	slices.Sort(rest)
	for _, name := range rest {
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
