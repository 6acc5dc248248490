package redrive

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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

// DefaultDisposition is the only disposition a plan of kind takes unless
// Params.AllowDispositions names others.
func DefaultDisposition(kind string) string {
	if kind == KindResolve {
		return envelope.DispositionResolve
	}
	return envelope.DispositionRedrive
}

// keyHash stands for an entry key in the held-back table: fixed size
// whatever the keys' length, and wide enough that two keys never meet.
type keyHash [16]byte

// hashKey scopes a key to the origin it was dead-lettered from: order
// holds per key within one topic or stream (per partition), and the same
// key on two origins names two independent sequences.
func hashKey(origin, k string) keyHash {
	sum := sha256.Sum256([]byte(origin + "\x00" + k))
	var h keyHash
	copy(h[:], sum[:])
	return h
}

// heldBack is the oldest entry of a key that stays in the DLQ, which
// every later entry of that key waits behind.
type heldBack struct {
	id, why string
}

// BuildPlan reads the whole DLQ once, in dead-letter order, and writes the
// plan: the selected entries it may move, what it left out and why,
// sealed with its digest.
//
// Per-key order holds across the whole DLQ, not only the selection: an
// entry whose key (on its origin) has an older entry that stays behind (not selected,
// refused, or without a destination) is held back, and with it every
// later entry of that key, so that no event overtakes an earlier one of
// its key. Only one small record per held key is kept, never envelopes.
func BuildPlan(ctx context.Context, w inspect.Walker, mover backend.Mover, req PlanRequest, now time.Time) (*Plan, error) {
	p := &Plan{
		Schema: PlanSchema, Kind: req.Kind, Reason: req.Reason, PlannedBy: req.PlannedBy,
		PlannedAt: now.UTC().Truncate(time.Second), Source: req.Source, Params: req.Params,
		Selectors: req.Selectors, Entries: NewEntries(), Excluded: []Excluded{}, Approvals: []Approval{},
	}
	conflicts, err := w.Conflicts(ctx)
	if err != nil {
		return nil, err
	}
	b := &planning{p: p, req: req, mover: mover, guards: backend.NewGuards(mover), now: w.Now, held: map[keyHash]heldBack{}}
	// Every entry is walked, selected or not: one that is not selected
	// still holds its key's later entries back.
	_, err = w.Walk(ctx, conflicts, inspect.Selector{}, "", func(it inspect.Item) error {
		return b.visit(ctx, &it)
	})
	if err != nil {
		return nil, err
	}
	return p, p.Seal()
}

// planning is one BuildPlan's walk of the DLQ: the plan so far, and the
// keys whose later entries are held back.
type planning struct {
	p       *Plan
	req     PlanRequest
	mover   backend.Mover
	guards  *backend.Guards
	now     time.Time
	held    map[keyHash]heldBack
	matched int // entries the selector took so far
}

// visit takes one walked entry into the plan, or leaves it out (and its
// key's later entries with it) with the reason.
func (b *planning) visit(ctx context.Context, it *inspect.Item) error {
	e := &it.Envelope
	sel := &b.req.Selector
	if !sel.Match(*e, it.Class, b.now) {
		b.hold(e.Origin.Topic, e.Key, e.ID, "not selected")
		return nil
	}
	if sel.Limit > 0 && b.matched == sel.Limit {
		return backend.ErrStop // everything from here on is newer: order cannot suffer
	}
	b.matched++
	if why, heldBy := b.leftOut(it); why != "" {
		b.exclude(it, why, heldBy)
		return nil
	}
	dest := ""
	if b.req.Kind == KindRedrive {
		var why string
		var err error
		if dest, why, err = b.destination(ctx, e); err != nil {
			return err
		}
		if why != "" {
			b.exclude(it, why, "")
			return nil
		}
	}
	if limit := b.req.Params.Max; limit > 0 && b.p.Entries.Len() == limit {
		return backend.ErrStop
	}
	b.p.Entries.Append(Entry{
		Seq: int64(b.p.Entries.Len() + 1), ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint,
		Key: e.Key, Category: it.Class.Category, Dest: dest,
	})
	return nil
}

// leftOut is why a selected entry stays out of the plan whatever its
// destination, and the older entry that holds it back when that is why;
// "" when nothing keeps it out.
func (b *planning) leftOut(it *inspect.Item) (why, heldBy string) {
	e := &it.Envelope
	if why := refusal(b.req, it.Class); why != "" {
		return why, ""
	}
	if i := strings.IndexFunc(e.EventID, unicode.IsControl); i >= 0 {
		// A newline or other control character splits the event ID
		// wherever it is written line by line (consumers' logs, the
		// effects lookup), so the move could never be reconciled.
		r, _ := utf8.DecodeRuneInString(e.EventID[i:])
		return fmt.Sprintf("event ID %q holds a control character (%U at byte %d): it cannot be reconciled; fix the producer, or resolve the entry", e.EventID, r, i), ""
	}
	if e.Key != "" {
		if hb, ok := b.held[hashKey(e.Origin.Topic, e.Key)]; ok {
			return fmt.Sprintf("held back: the older entry %s with key %q stays in the DLQ (%s), and order per key must hold", hb.id, e.Key, hb.why), hb.id
		}
	}
	return "", ""
}

// destination is where a redrive sends e: --to, else the mover's default
// for its origin. why says why it has none the guard allows; err that the
// guard could not tell.
func (b *planning) destination(ctx context.Context, e *envelope.Envelope) (dest, why string, err error) {
	dest = b.req.Params.To
	if dest == "" {
		dest = b.mover.DefaultDest(e.Origin.Topic)
	}
	if dest == "" {
		return "", "no destination: the envelope names no origin; give --to", nil
	}
	if err := b.guards.Check(ctx, dest); err != nil {
		if !errors.Is(err, backend.ErrRefusedDestination) {
			return "", "", err
		}
		return "", err.Error(), nil
	}
	return dest, "", nil
}

// exclude leaves it out of the plan for why, and holds its key's later
// entries back. The plan keeps a copy of the event ID: it may be a slice
// of the whole entry's text (a Redis entry's fields, a Kafka record's
// headers; backend.Source), and a plan that leaves a million entries out
// would keep every one of them whole. The id is a string of its own.
func (b *planning) exclude(it *inspect.Item, why, heldBy string) {
	e := &it.Envelope
	b.p.Excluded = append(b.p.Excluded, Excluded{ID: e.ID, EventID: strings.Clone(e.EventID), Why: why, Disposition: it.Class.Disposition, HeldBy: heldBy})
	short, _, _ := strings.Cut(why, ":")
	b.hold(e.Origin.Topic, e.Key, e.ID, "left out of the plan: "+short)
}

// hold makes key (on origin) wait behind the entry id, unless an older
// entry holds it already.
func (b *planning) hold(origin, key, id, why string) {
	if key == "" {
		return
	}
	h := hashKey(origin, key)
	if _, ok := b.held[h]; !ok {
		b.held[h] = heldBack{id: id, why: why}
	}
}

// ExcludedByDisposition counts the plan's exclusions by disposition.
func (p *Plan) ExcludedByDisposition() map[string]int {
	out := map[string]int{}
	for _, x := range p.Excluded {
		out[firstNonEmptyString(x.Disposition, "unknown")]++
	}
	return out
}

func firstNonEmptyString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func refusal(req PlanRequest, c envelope.Classification) string {
	quarantined := c.Category == envelope.CategoryConflict || c.Category == envelope.CategoryMalformed
	if quarantined {
		if !req.IncludeQuarantined {
			return fmt.Sprintf("category %s is never moved without --include-quarantined", c.Category)
		}
		return "" // --include-quarantined names these on purpose
	}
	want := DefaultDisposition(req.Kind)
	if c.Disposition == want {
		return ""
	}
	for _, d := range req.Params.AllowDispositions {
		if d == c.Disposition {
			return ""
		}
	}
	if req.Kind == KindResolve {
		return fmt.Sprintf("disposition %s, not resolve: resolve only ends entries that retrying cannot fix (--allow-disposition %s takes them)", c.Disposition, c.Disposition)
	}
	return fmt.Sprintf("disposition %s, not redrive: a plan takes only redrive entries unless --allow-disposition %s names it", c.Disposition, c.Disposition)
}

// Stale lists the plan's entries that are gone from the DLQ or whose
// fingerprint changed, with one read of the DLQ.
func Stale(ctx context.Context, src backend.Source, p *Plan) (missing, changed []Entry, err error) {
	// The ids and fingerprints are read from the plan's records as they
	// are, without making each entry: this runs over every entry.
	var changedAt []int
	want := make(map[string]int, p.Entries.Len())
	for i := range p.Entries.Len() {
		want[p.Entries.ID(i)] = i
	}
	seen := make([]bool, p.Entries.Len())
	// A scanner need not answer in plan order (Redis reads two halves at
	// once): the changed entries are listed in plan order after the scan.
	check := func(id, fingerprint string) error {
		i, ok := want[id]
		if !ok {
			return nil
		}
		seen[i] = true
		if !p.Entries.HasFingerprint(i, fingerprint) {
			changedAt = append(changedAt, i)
		}
		return nil
	}
	if fs, ok := src.(backend.FingerprintScanner); ok {
		err = fs.ScanFingerprints(ctx, check)
	} else {
		err = src.Scan(ctx, "", func(env envelope.Envelope) error { return check(env.ID, env.Fingerprint) })
	}
	slices.Sort(changedAt)
	for _, i := range changedAt {
		changed = append(changed, p.Entries.At(i))
	}
	for i, ok := range seen {
		if !ok {
			missing = append(missing, p.Entries.At(i))
		}
	}
	return missing, changed, err
}
