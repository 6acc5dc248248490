package redrive

import (
	"context"
	"fmt"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
)

// PlanRequest is what a plan is made from.
type PlanRequest struct {
	Kind               string
	Selector           inspect.Selector
	Selectors          Selectors
	Params             Params
	Reason             string
	PlannedBy          string
	Source             string
	IncludeQuarantined bool
}

// BuildPlan selects entries with the walker and writes the plan: entries
// in dead-letter order, what was left out and why, sealed with its digest.
//
// Per-key order holds across exclusions: once an entry is held back
// (quarantined, or without a destination), later entries with the same
// key are held back too, so that no event overtakes an earlier one of its
// key.
func BuildPlan(ctx context.Context, w inspect.Walker, mover backend.Mover, req PlanRequest, now time.Time) (*Plan, error) {
	p := &Plan{
		Schema: PlanSchema, Kind: req.Kind, Reason: req.Reason, PlannedBy: req.PlannedBy,
		PlannedAt: now.UTC().Truncate(time.Second), Source: req.Source, Params: req.Params,
		Selectors: req.Selectors, Entries: []Entry{}, Excluded: []Excluded{}, Approvals: []Approval{},
	}
	conflicts, err := w.Conflicts(ctx)
	if err != nil {
		return nil, err
	}
	held := map[string]string{} // key → id of the entry that holds it
	limit := req.Params.Max
	sel := req.Selector
	_, err = w.Walk(ctx, conflicts, sel, "", func(it inspect.Item) error {
		e := it.Envelope
		exclude := func(why string) {
			p.Excluded = append(p.Excluded, Excluded{ID: e.ID, EventID: e.EventID, Why: why})
			if e.Key != "" {
				if _, ok := held[e.Key]; !ok {
					held[e.Key] = e.ID
				}
			}
		}
		if why := refusal(req, it.Class); why != "" {
			exclude(why)
			return nil
		}
		if by, ok := held[e.Key]; ok && e.Key != "" {
			exclude(fmt.Sprintf("held back: an earlier entry with key %q (%s) is not in the plan, and order per key must hold", e.Key, by))
			return nil
		}
		dest := ""
		if req.Kind == KindRedrive {
			dest = req.Params.To
			if dest == "" {
				dest = mover.DefaultDest(e.Origin.Topic)
			}
			if dest == "" {
				exclude("no destination: the envelope names no origin; give --to")
				return nil
			}
		}
		if limit > 0 && len(p.Entries) == limit {
			return backend.ErrStop
		}
		p.Entries = append(p.Entries, Entry{
			Seq: int64(len(p.Entries) + 1), ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint,
			Key: e.Key, Category: it.Class.Category, Dest: dest,
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, p.Seal()
}

func refusal(req PlanRequest, c envelope.Classification) string {
	quarantined := c.Category == envelope.CategoryConflict || c.Category == envelope.CategoryMalformed
	switch {
	case quarantined && !req.IncludeQuarantined:
		return fmt.Sprintf("category %s is never moved without --include-quarantined", c.Category)
	case req.Kind == KindResolve && !quarantined && c.Disposition != envelope.DispositionResolve:
		return fmt.Sprintf("disposition %s, not resolve: resolve only ends entries that retrying cannot fix", c.Disposition)
	}
	return ""
}

// Stale lists the plan's entries that are gone from the DLQ or whose
// fingerprint changed, with one read of the DLQ.
func Stale(ctx context.Context, src backend.Source, p *Plan) (missing, changed []Entry, err error) {
	want := make(map[string]int, len(p.Entries))
	for i, e := range p.Entries {
		want[e.ID] = i
	}
	seen := make([]bool, len(p.Entries))
	check := func(id, fingerprint string) error {
		i, ok := want[id]
		if !ok {
			return nil
		}
		seen[i] = true
		if fingerprint != p.Entries[i].Fingerprint {
			changed = append(changed, p.Entries[i])
		}
		return nil
	}
	if fs, ok := src.(backend.FingerprintScanner); ok {
		err = fs.ScanFingerprints(ctx, check)
	} else {
		err = src.Scan(ctx, "", func(env envelope.Envelope) error { return check(env.ID, env.Fingerprint) })
	}
	for i, ok := range seen {
		if !ok {
			missing = append(missing, p.Entries[i])
		}
	}
	return missing, changed, err
}
