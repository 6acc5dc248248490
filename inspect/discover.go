package inspect

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/templates"
)

// DiscoverOptions says what Discover mines.
type DiscoverOptions struct {
	// Selector picks the entries to mine (a category, a filter); the zero
	// value mines every entry. Its Limit is ignored.
	Selector Selector
	// KeepIDs keeps every entry id of every group (for JSON output); without
	// it only sample ids are kept and memory does not grow with the DLQ.
	KeepIDs bool
}

// Discovery is what `categorize --discover` reports.
type Discovery struct {
	// Total counts the entries mined (those of the category).
	Total  int
	Groups []TemplateGroup
}

// TemplateGroup is one template and the entries whose error it matches.
type TemplateGroup struct {
	Template    string
	Count       int
	OldestAge   time.Duration
	OldestKnown bool
	// SampleError is the first error of the group, cut to
	// templates.MaxErrorBytes (and saying so) when it was longer.
	SampleError string
	SampleIDs   []string
	// IDs is every entry id of the group, in DLQ order (with KeepIDs).
	IDs []string
	// Overflow: the group of entries past the template limit, which share
	// no template.
	Overflow bool
	group    templates.Group
}

// Group is the miner's group, for rules made from it.
func (g TemplateGroup) Group() templates.Group { return g.group }

// clusterAcc is what Discover keeps per cluster of the miner.
type clusterAcc struct {
	oldest      time.Duration
	oldestKnown bool
	sampleError string
	sampleIDs   []string
	// ids and seqs: every id (with KeepIDs) and its place in the scan.
	ids  []string
	seqs []int32
}

// Discover reads the DLQ once and groups the errors of the chosen entries
// by template; when the DLQ holds event IDs in conflict it reads it a
// second time, as Summarize does, since they change categories.
func (w Walker) Discover(ctx context.Context, opts DiscoverOptions) (Discovery, error) {
	if len(opts.Selector.Categories) == 0 && len(opts.Selector.Dispositions) == 0 {
		// No category decides what is mined: one pass, no classifying,
		// no conflict tracking (--all).
		return w.discover(ctx, nil, false, opts)
	}
	tracker := envelope.NewConflictTracker()
	d, err := w.discover(ctx, tracker, true, opts)
	if err != nil || tracker.ConflictCount() == 0 {
		return d, err
	}
	return w.discover(ctx, tracker, false, opts)
}

func (w Walker) discover(ctx context.Context, tracker *envelope.ConflictTracker, track bool, opts DiscoverOptions) (Discovery, error) {
	var d Discovery
	miner := templates.New(templates.Default())
	memo := w.Classifier.Memo()
	var accs []*clusterAcc
	seq := 0
	sel := opts.Selector
	sel.Limit = 0
	pick := !sel.IsZero()
	err := w.scanLean(ctx, tracker != nil, func(e envelope.Envelope) error {
		if track {
			tracker.Add(e)
		}
		if pick {
			var c envelope.Classification
			if tracker != nil {
				c = memo.Classify(e, !track && tracker.IsConflict(e.EventID))
			}
			if !sel.Match(e, c, w.Now) {
				return nil
			}
		}
		msg := exampleError(e)
		cl := miner.Add(msg)
		for len(accs) <= cl.ID {
			accs = append(accs, &clusterAcc{})
		}
		d.Total++
		accs[cl.ID].add(&e, msg, w.Now, seq, opts.KeepIDs)
		seq++
		return nil
	})
	if err != nil {
		return d, err
	}
	for _, g := range miner.Groups() {
		d.Groups = append(d.Groups, templateGroup(g, accs, opts.KeepIDs))
	}
	// Biggest first; the overflow group, which is no template, last.
	sort.SliceStable(d.Groups, func(i, j int) bool {
		a, b := d.Groups[i], d.Groups[j]
		if a.Overflow != b.Overflow {
			return b.Overflow
		}
		return a.Count > b.Count
	})
	return d, nil
}

// add counts one mined entry, the seq-th, whose error is msg, in its
// cluster.
func (a *clusterAcc) add(e *envelope.Envelope, msg string, now time.Time, seq int, keepIDs bool) {
	if !e.DeadLetteredAt.IsZero() {
		if age := Age(*e, now); !a.oldestKnown || age > a.oldest {
			a.oldest, a.oldestKnown = age, true
		}
	}
	if a.sampleError == "" && msg != "" {
		a.sampleError = sampleError(msg)
	}
	if len(a.sampleIDs) < sampleIDs {
		a.sampleIDs = append(a.sampleIDs, e.ID)
	}
	if keepIDs {
		a.ids = append(a.ids, e.ID)
		a.seqs = append(a.seqs, int32(seq))
	}
}

// templateGroup is the miner's group g with what its clusters' accs
// gathered; it hands the clusters' ids over (and drops them from accs).
func templateGroup(g templates.Group, accs []*clusterAcc, keepIDs bool) TemplateGroup {
	tg := TemplateGroup{Template: g.Template, Count: g.Count, Overflow: g.IsOverflow(), group: g}
	type idAt struct {
		id  string
		seq int32
	}
	var all []idAt
	for _, cid := range g.Clusters {
		if cid >= len(accs) {
			continue
		}
		a := accs[cid]
		if a.oldestKnown && (!tg.OldestKnown || a.oldest > tg.OldestAge) {
			tg.OldestAge, tg.OldestKnown = a.oldest, true
		}
		if tg.SampleError == "" {
			tg.SampleError = a.sampleError
		}
		for _, id := range a.sampleIDs {
			if len(tg.SampleIDs) < sampleIDs {
				tg.SampleIDs = append(tg.SampleIDs, id)
			}
		}
		if keepIDs && len(g.Clusters) == 1 {
			tg.IDs = a.ids // already in DLQ order
		} else {
			for i, id := range a.ids {
				all = append(all, idAt{id, a.seqs[i]})
			}
		}
		a.ids, a.seqs = nil, nil
	}
	if keepIDs && len(g.Clusters) > 1 {
		// Several clusters' ids, each in DLQ order: merged back into it.
		slices.SortFunc(all, func(a, b idAt) int { return int(a.seq - b.seq) })
		tg.IDs = make([]string, len(all))
		for i, x := range all {
			tg.IDs[i] = x.id
		}
	}
	return tg
}

// sampleError cuts an error to what the miner read of it, and says so.
func sampleError(msg string) string {
	if len(msg) <= templates.MaxErrorBytes {
		return msg
	}
	cut := templates.MaxErrorBytes
	for cut > 0 && msg[cut]&0xC0 == 0x80 {
		cut--
	}
	return fmt.Sprintf("%s… (cut at %d of %d bytes)", msg[:cut], cut, len(msg))
}
