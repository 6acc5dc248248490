package cmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

// statsOptions is what stats reads and with what: the flags, the output
// settings resolved for the invocation, and how it opens the source.
type statsOptions struct {
	IO     *IOStreams
	Report report.Options
	// OpenSession opens the source in effect with the category rules in
	// effect, refusing a DLQ that does not exist unless allowMissing.
	OpenSession func(context.Context) (*session, error)

	// Now is the clock --watch reads the DLQ by.
	Now func() time.Time

	sel          selectorFlags
	allowMissing bool
	watch        watchOptions
}

// newStatsCmd builds stats; runF, when not nil, runs instead of runStats
// (and of the --watch loop).
func newStatsCmd(f *Factory, runF func(context.Context, *statsOptions) error) *cobra.Command {
	opts := &statsOptions{}
	sel, w := &opts.sel, &opts.watch
	c := &cobra.Command{
		Use:   "stats",
		Short: "Totals, ages and counts by category, origin, disposition and owner",
		Long: `Read the whole DLQ once and report its size, age percentiles, counts by
category, origin, disposition and owner, conflicts and malformed entries.
On Redis it adds the origin streams' consumer groups (pending, oldest idle,
delivery counts, lag).

--watch redraws every --interval with the change since the last draw, the
growth per minute, and a timeline of dead letters per interval, which shows
when an incident started. Ctrl-C stops it (exit 130, as for every command).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			f.allowMissing, f.refusesMissing, f.offersAllowMissing = opts.allowMissing, true, true
			opts.IO, opts.Report, opts.OpenSession, opts.Now = f.IO, f.reportOptions(), f.openSession, f.Now
			switch {
			case runF != nil:
				return runF(c.Context(), opts)
			case w.watch:
				return runWatch(c.Context(), opts)
			}
			return runStats(c.Context(), opts)
		},
	}
	sel.register(c.Flags(), 0)
	c.Flags().BoolVar(&opts.allowMissing, "allow-missing", false, allowMissingUsage)
	c.Flags().BoolVar(&w.watch, "watch", false, "redraw every --interval until Ctrl-C")
	c.Flags().DurationVar(&w.interval, "interval", 10*time.Second, "with --watch: time between draws")
	c.Flags().IntVar(&w.count, "count", 0, "with --watch: stop after N draws (0: until Ctrl-C)")
	return c
}

// StatsDoc is dlqctl.stats/v1.
type StatsDoc struct {
	Schema string `json:"schema"`
	// AsOf is when the DLQ was read: ages are measured from it.
	AsOf             time.Time      `json:"as_of"`
	Source           string         `json:"source"`
	Total            int            `json:"total"`
	UniqueEvents     int            `json:"unique_events"`
	OldestAgeSeconds *int64         `json:"oldest_age_seconds"`
	AgeP50Seconds    *int64         `json:"age_p50_seconds"`
	AgeP95Seconds    *int64         `json:"age_p95_seconds"`
	ByCategory       map[string]int `json:"by_category"`
	ByOrigin         map[string]int `json:"by_origin"`
	ByDisposition    map[string]int `json:"by_disposition"`
	ByOwner          map[string]int `json:"by_owner"`
	Overdue          int            `json:"overdue"`
	Conflicts        int            `json:"conflicts"`
	ConflictEventIDs []string       `json:"conflict_event_ids"`
	Malformed        int            `json:"malformed"`
	// SourceGone counts the malformed entries whose source no longer
	// holds their payload.
	SourceGone int `json:"source_gone"`
	// SourceRetention is, where entries read their payload back from a
	// source log, how long each log still holds the oldest one's record.
	SourceRetention []SourceRetentionDoc `json:"source_retention,omitempty"`
	AgeHistogram    []AgeBucketDoc       `json:"age_histogram"`
	Backend         any                  `json:"backend,omitempty"`
	// Watch is set by --watch only.
	Watch *WatchDoc `json:"watch,omitempty"`
}

// AgeBucketDoc is one bucket of the age histogram.
type AgeBucketDoc struct {
	Label string `json:"label"`
	Count int    `json:"count"`
}

func seconds(d time.Duration) int64 { return int64(d / time.Second) }

// knownSeconds is d in whole seconds, or nil (JSON null) when not known.
func knownSeconds(d time.Duration, known bool) *int64 {
	if !known {
		return nil
	}
	s := seconds(d)
	return &s
}

// statsDoc is dlqctl.stats/v1 from a summary read at now.
func statsDoc(src backend.Source, sum inspect.Summary, now time.Time) StatsDoc {
	doc := StatsDoc{
		Schema: "dlqctl.stats/v1", AsOf: now.UTC(), Source: src.String(), Total: sum.Total, UniqueEvents: sum.UniqueEvents,
		OldestAgeSeconds: knownSeconds(sum.OldestAge, sum.AgesKnown > 0),
		AgeP50Seconds:    knownSeconds(sum.AgeP50, sum.AgesKnown > 0),
		AgeP95Seconds:    knownSeconds(sum.AgeP95, sum.AgesKnown > 0),
		ByCategory:       sum.ByCategory, ByOrigin: sum.ByOrigin, ByDisposition: sum.ByDisposition, ByOwner: sum.ByOwner,
		Overdue: sum.Overdue, Conflicts: len(sum.Conflicts), ConflictEventIDs: sum.Conflicts, Malformed: sum.Malformed,
		SourceGone: sum.SourceGone,
	}
	for _, b := range sum.AgeBuckets {
		doc.AgeHistogram = append(doc.AgeHistogram, AgeBucketDoc{b.Label, b.Count})
	}
	return doc
}

func runStats(ctx context.Context, opts *statsOptions) error {
	sel, err := opts.sel.selector()
	if err != nil {
		return err
	}
	s, err := opts.OpenSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	if err := checkCategories("--category", sel.Categories, s.walker.Classifier); err != nil {
		return err
	}
	var progress *scanProgress
	if opts.IO.ErrTTY {
		progress = newScanProgress(ctx, opts.IO.ErrOut, s.src)
		s.walker.Progress = progress.update
	}
	sum, err := s.walker.SummarizeSelected(ctx, sel)
	progress.clear()
	if err != nil {
		return err
	}
	doc := statsDoc(s.src, sum, s.walker.Now)
	if doc.SourceRetention, err = sourceRetention(ctx, s.src, s.walker.Now); err != nil {
		return err
	}
	ro, w := opts.Report, opts.IO.Out
	if ro.Format == report.FormatOpenMetrics {
		return report.WriteOpenMetrics(w, statsGauges(doc))
	}
	var extra *backend.ExtraStats
	if ex, ok := s.src.(backend.Extras); ok {
		es, err := ex.Extras(ctx, sortedKeys(sum.ByOrigin))
		if err != nil {
			return err
		}
		extra = &es
		doc.Backend = es.JSON
	}
	if done, err := emitJSON(w, ro.Format, doc); done {
		return err
	}
	return writeStats(w, s.walker.Classifier, doc, extra, ro)
}

// writeStats is stats as text: the headline fields, the counts by
// category, disposition, origin and owner, an age histogram on a terminal
// or in Markdown, and what the backend adds. Categories are ordered by the
// rules of cl.
func writeStats(w io.Writer, cl *envelope.Classifier, doc StatsDoc, extra *backend.ExtraStats, ro report.Options) error {
	err := report.WriteFields(w, "DLQ "+doc.Source, []report.Field{
		{Key: "total", Value: doc.Total},
		{Key: "unique events", Value: doc.UniqueEvents},
		{Key: "as of", Value: doc.AsOf},
		{Key: "oldest", Value: report.AgeSeconds(doc.OldestAgeSeconds)},
		{Key: "age p50", Value: report.AgeSeconds(doc.AgeP50Seconds)},
		{Key: "age p95", Value: report.AgeSeconds(doc.AgeP95Seconds)},
		{Key: "overdue", Value: doc.Overdue},
		{Key: "conflicts", Value: conflictsText(doc.ConflictEventIDs)},
		{Key: "malformed", Value: malformedText(doc)},
	}, ro)
	if err != nil {
		return err
	}
	if err := writeSourceRetention(w, doc.SourceRetention, ro); err != nil {
		return err
	}
	sections := []struct {
		title, col string
		counts     map[string]int
	}{
		{"By category", "category", doc.ByCategory},
		{"By disposition", "disposition", doc.ByDisposition},
		{"By origin", "origin", doc.ByOrigin},
		{"By owner", "owner", doc.ByOwner},
	}
	for _, sec := range sections {
		if err := writeCounts(w, cl, sec.title, sec.col, sec.counts, ro); err != nil {
			return err
		}
	}
	if ro.TTY || ro.Format == report.FormatMarkdown {
		var bars []report.Bar
		for _, b := range doc.AgeHistogram {
			bars = append(bars, report.Bar{Label: b.Label, Count: int64(b.Count)})
		}
		fmt.Fprintln(w)
		if err := report.WriteHistogram(w, "Age", bars, ro); err != nil {
			return err
		}
	}
	if extra != nil && len(extra.Rows) > 0 {
		fmt.Fprintln(w)
		var fs []report.Field
		for _, r := range extra.Rows {
			fs = append(fs, report.Field{Key: r[0], Value: r[1]})
		}
		return report.WriteFields(w, extra.Title, fs, ro)
	}
	return nil
}

// conflictsShown is how many conflicting event IDs stats names in text;
// -o json lists them all.
const conflictsShown = 5

// conflictsText is the count of event IDs in conflict and the first few
// of them: hundreds of IDs before the rest of the report would push it off
// the screen.
func conflictsText(ids []string) string {
	if len(ids) <= conflictsShown {
		return strings.TrimSpace(fmt.Sprintf("%d %s", len(ids), joinOr(ids, "")))
	}
	return fmt.Sprintf("%d: %s … and %d more (-o json lists them all)", len(ids),
		strings.Join(ids[:conflictsShown], ", "), len(ids)-conflictsShown)
}

// scanProgress shows on a terminal's stderr how far stats has read a DLQ:
// a large one takes seconds, and a silent terminal reads as a hang.
type scanProgress struct {
	w     io.Writer
	total int64 // -1: unknown
	drawn bool
}

func newScanProgress(ctx context.Context, w io.Writer, src backend.Source) *scanProgress {
	p := &scanProgress{w: w, total: -1}
	if n, err := src.Len(ctx); err == nil {
		p.total = n
	}
	return p
}

// update redraws the line: how many entries this pass has read, of how
// many.
func (p *scanProgress) update(pass, read int) {
	of := ""
	if p.total > 0 {
		of = " of " + report.Thousands(p.total)
	}
	text := fmt.Sprintf("reading the DLQ: %s%s entries", report.Thousands(int64(read)), of)
	if pass > 1 {
		text = fmt.Sprintf("conflicts found, reading again: %s%s entries", report.Thousands(int64(read)), of)
	}
	fmt.Fprint(p.w, "\r"+text+"\033[K")
	p.drawn = true
}

// clear removes the line, before the report is written; nil or never
// drawn, it does nothing.
func (p *scanProgress) clear() {
	if p != nil && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// section separates blocks of output: a blank line between tables.
// writeCounts is one table of counts, largest first; categories in the
// order of the rules of cl (nil: the built-in order only).
func writeCounts(w io.Writer, cl *envelope.Classifier, title, col string, counts map[string]int, ro report.Options) error {
	fmt.Fprintln(w)
	c := report.Column{Name: col, Kind: report.Key}
	if col == "disposition" {
		c.Tone = report.DispositionTone
	}
	t := report.Table{Title: title, Columns: []report.Column{c, {Name: "count", Right: true}}}
	keys := sortedByCount(counts)
	if col == "category" {
		keys = categoryOrder(cl, counts)
	}
	for _, k := range keys {
		name := k
		if name == "" {
			name = "(none)"
		}
		t.Rows = append(t.Rows, []any{name, counts[k]})
	}
	return report.WriteTable(w, t, ro)
}

// categoryOrder lists categories as every view does (see
// inspect.OrderCategories), ties in the order of the rules in effect.
func categoryOrder(cl *envelope.Classifier, counts map[string]int) []string {
	var rules []string
	if cl != nil {
		for _, c := range cl.Categories() {
			rules = append(rules, c.Category)
		}
	}
	keys := sortedKeys(counts)
	inspect.OrderCategories(keys, func(k string) int { return counts[k] }, rules)
	return keys
}

// sortedByCount orders keys by count, largest first, then by name.
func sortedByCount(counts map[string]int) []string {
	keys := sortedKeys(counts)
	sortStable(keys, func(a, b string) bool { return counts[a] > counts[b] })
	return keys
}
