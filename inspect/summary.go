package inspect

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
)

// Summary is what `stats` and `categorize` report about a whole DLQ.
type Summary struct {
	Total        int
	UniqueEvents int
	// AgesKnown counts entries with a dead-letter time; OldestAge and the
	// percentiles are unknown when it is 0.
	AgesKnown     int
	OldestAge     time.Duration
	AgeP50        time.Duration
	AgeP95        time.Duration
	ByCategory    map[string]int
	ByOrigin      map[string]int
	ByDisposition map[string]int
	ByOwner       map[string]int
	Overdue       int
	Conflicts     []string
	Malformed     int
	// SourceGone counts the malformed entries whose source no longer
	// holds their payload (envelope.SourceGone).
	SourceGone int
	AgeBuckets []AgeBucket
	Categories []CategorySummary
}

// AgeBucket counts entries whose age is below Under; Under < 0 is the open
// last bucket, and "unknown" counts entries without a dead_lettered_at.
type AgeBucket struct {
	Label string
	Under time.Duration
	Count int
}

// CategorySummary is one row of `categorize`.
type CategorySummary struct {
	Name        string
	Disposition string
	Count       int
	OldestAge   time.Duration
	// OldestKnown: at least one entry of the category has a dead-letter
	// time, so OldestAge means something.
	OldestKnown  bool
	ExampleError string
	SampleIDs    []string
	// Rules counts entries by the rule that put them here (--explain).
	Rules map[string]int
}

const sampleIDs = 3

func ageBuckets() []AgeBucket {
	return []AgeBucket{
		{"<5m", 5 * time.Minute, 0},
		{"5m-15m", 15 * time.Minute, 0},
		{"15m-1h", time.Hour, 0},
		{"1h-6h", 6 * time.Hour, 0},
		{"6h-1d", 24 * time.Hour, 0},
		{"1d-3d", 72 * time.Hour, 0},
		{">3d", -1, 0},
		{"unknown", 0, 0},
	}
}

// Summarize reads the DLQ once and, only when that pass found event IDs in
// conflict, a second time so that their entries count as conflicts. A DLQ
// without conflicts, the common case, costs one pass.
func (w Walker) Summarize(ctx context.Context) (Summary, error) {
	return w.SummarizeSelected(ctx, Selector{})
}

// SummarizeSelected is Summarize over the entries sel picks (stats with
// selectors). Conflicts are still found over the whole DLQ, since a
// conflict is between entries that sel may split.
func (w Walker) SummarizeSelected(ctx context.Context, sel Selector) (Summary, error) {
	tracker := envelope.NewConflictTracker()
	s, err := w.summarize(ctx, tracker, true, sel)
	if err != nil || tracker.ConflictCount() == 0 {
		return s, err
	}
	return w.summarize(ctx, tracker, false, sel)
}

func (w Walker) summarize(ctx context.Context, tracker *envelope.ConflictTracker, track bool, sel Selector) (Summary, error) {
	s := Summary{
		ByCategory: map[string]int{}, ByOrigin: map[string]int{}, ByDisposition: map[string]int{},
		ByOwner: map[string]int{}, AgeBuckets: ageBuckets(),
	}
	var ages ageQuantiles
	cats := map[string]*CategorySummary{}
	conflictIDs := map[string]struct{}{}
	memo := w.Classifier.Memo()
	// With selectors, unique events are counted over what they pick; on
	// the second pass, over what that pass read, as the totals are: a DLQ
	// read twice (SQS) can hand out fewer entries the first time.
	var selected *envelope.ConflictTracker
	if !sel.IsZero() || !track {
		selected = envelope.NewConflictTracker()
	}
	pass, read := 1, 0
	if !track {
		pass = 2
	}
	err := w.scanLean(ctx, true, func(e envelope.Envelope) error {
		if read++; w.Progress != nil && read%ProgressEvery == 0 {
			w.Progress(pass, read)
		}
		if track {
			tracker.Add(e)
		}
		conflict := !track && tracker.IsConflict(e.EventID)
		c := memo.Classify(e, conflict)
		if !sel.Match(e, c, w.Now) || (sel.Limit > 0 && s.Total == sel.Limit) {
			return nil // still read to the end: the conflict tracker needs every entry
		}
		if selected != nil {
			selected.Add(e)
		}
		if conflict {
			if _, seen := conflictIDs[e.EventID]; !seen {
				// A copy: the event ID may be a slice of the entry's
				// whole text, which a key kept for the whole scan would
				// keep too.
				conflictIDs[strings.Clone(e.EventID)] = struct{}{}
			}
		}
		age := Age(e, w.Now)
		s.count(&e, c, age, IsOverdue(e, w.Now), &ages)
		countCategory(cats, &e, c, age)
		return nil
	})
	if err != nil {
		return s, err
	}
	s.UniqueEvents = tracker.Unique()
	if selected != nil {
		s.UniqueEvents = selected.Unique()
	}
	// The tracker knows hashes; the IDs are the ones the second pass met.
	s.Conflicts = make([]string, 0, len(conflictIDs))
	for id := range conflictIDs {
		s.Conflicts = append(s.Conflicts, id)
	}
	slices.Sort(s.Conflicts)
	s.AgeP50 = ages.percentile(50)
	s.AgeP95 = ages.percentile(95)
	s.Categories = orderedCategories(cats, w.Classifier)
	return s, nil
}

// count adds one selected entry, of class c and age, to the totals, the
// age buckets and the age percentiles.
func (s *Summary) count(e *envelope.Envelope, c envelope.Classification, age time.Duration, overdue bool, ages *ageQuantiles) {
	s.Total++
	s.ByCategory[c.Category]++
	s.ByDisposition[c.Disposition]++
	s.ByOrigin[e.Origin.Topic]++
	s.ByOwner[e.Owner]++
	if c.Category == envelope.CategoryMalformed {
		s.Malformed++
		if strings.HasPrefix(e.Malformed, envelope.SourceGone) {
			s.SourceGone++
		}
	}
	if overdue {
		s.Overdue++
	}
	if e.DeadLetteredAt.IsZero() {
		// No time to take an age from: counted apart, and kept out of
		// the percentiles rather than passed off as brand new.
		s.AgeBuckets[len(s.AgeBuckets)-1].Count++
		return
	}
	s.AgesKnown++
	ages.add(age)
	if age > s.OldestAge {
		s.OldestAge = age
	}
	for i := range s.AgeBuckets {
		if b := &s.AgeBuckets[i]; b.Under < 0 || age < b.Under {
			b.Count++
			break
		}
	}
}

// countCategory adds one selected entry to its category's row.
func countCategory(cats map[string]*CategorySummary, e *envelope.Envelope, c envelope.Classification, age time.Duration) {
	cs := cats[c.Category]
	if cs == nil {
		cs = &CategorySummary{Name: c.Category, Disposition: c.Disposition, Rules: map[string]int{}}
		cats[c.Category] = cs
	}
	cs.Count++
	cs.Rules[c.Rule]++
	if !e.DeadLetteredAt.IsZero() && (!cs.OldestKnown || age >= cs.OldestAge) {
		cs.OldestAge, cs.OldestKnown = age, true
	}
	if cs.ExampleError == "" {
		cs.ExampleError = exampleError(*e)
	}
	if len(cs.SampleIDs) < sampleIDs {
		cs.SampleIDs = append(cs.SampleIDs, e.ID)
	}
}

// orderedCategories is the rows of cats in the order `categorize` shows
// them (OrderCategories: by count, rules' categories first on a tie).
func orderedCategories(cats map[string]*CategorySummary, cl *envelope.Classifier) []CategorySummary {
	var rules, names []string
	for _, known := range cl.Categories() {
		rules = append(rules, known.Category)
	}
	for name := range cats {
		names = append(names, name)
	}
	OrderCategories(names, func(n string) int { return cats[n].Count }, rules)
	var out []CategorySummary
	for _, name := range names {
		out = append(out, *cats[name])
	}
	return out
}

func exampleError(e envelope.Envelope) string {
	if e.Malformed != "" {
		return e.Malformed
	}
	return e.LastError
}
