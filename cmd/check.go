package cmd

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

// checkOptions is what check compares and with what: the thresholds, the
// output settings resolved for the invocation, and how it opens the
// source.
type checkOptions struct {
	IO     *IOStreams
	Report report.Options
	// OpenSession opens the source in effect with the category rules in
	// effect, refusing a DLQ that does not exist unless allowMissing.
	OpenSession func(context.Context) (*session, error)

	maxTotal       int
	maxAge         string
	maxCategory    []string
	failOnConflict bool
	allowMissing   bool
	// maxSourceGone and minSourceRetention are the thresholds on entries
	// whose payload lives in a source log (check_source.go).
	maxSourceGone      int
	minSourceRetention string
}

// newCheckCmd builds check; runF, when not nil, runs instead of runCheck.
func newCheckCmd(f *Factory, runF func(context.Context, *checkOptions) error) *cobra.Command {
	opts := &checkOptions{maxTotal: -1, maxSourceGone: -1}
	c := &cobra.Command{
		Use:   "check",
		Short: "CI smoke check: exit 4 when the DLQ breaches a threshold",
		Long: `Compare the DLQ against thresholds and exit 4 when any is breached, with a
report on stdout naming each violation. At least one threshold is needed:
a check without one would always pass.

Where dead letters hold no payload of their own and dlqctl reads it back
from the log they were consumed from (Kafka share groups with copy off),
that log's retention decides how long they can be redriven: an entry whose
source record is gone is malformed ("source gone: …") and never redrivable.
--max-source-gone N fails once more than N entries lost their source, and
--min-source-retention DUR fails while any source holds its oldest such
entry's record for less than DUR more; the report says how long each
source still holds it, and on what that figure is based.`,
		Example: `  dlqctl check --max-total 0                      # the DLQ must be empty
  dlqctl check --max-age 1h --max-category schema=0 --fail-on-conflict -o json
  dlqctl check --max-source-gone 0 --min-source-retention 1d    # share-group dead letters, copy off`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			f.allowMissing, f.refusesMissing, f.offersAllowMissing = opts.allowMissing, true, true
			opts.IO, opts.Report, opts.OpenSession = f.IO, f.reportOptions(), f.openSession
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runCheck(c.Context(), opts)
		},
	}
	c.Flags().IntVar(&opts.maxTotal, "max-total", -1, "at most N entries in the DLQ")
	c.Flags().StringVar(&opts.maxAge, "max-age", "", "no entry older than DUR (e.g. 30m, 2h, 1d)")
	c.Flags().StringArrayVar(&opts.maxCategory, "max-category", nil, "at most N entries of category NAME, as NAME=N (repeatable)")
	c.Flags().BoolVar(&opts.failOnConflict, "fail-on-conflict", false, "fail when any event ID has conflicting fingerprints")
	c.Flags().IntVar(&opts.maxSourceGone, "max-source-gone", -1, "at most N entries whose source no longer holds their payload (source gone)")
	c.Flags().StringVar(&opts.minSourceRetention, "min-source-retention", "", "every source holds its oldest header-only entry's record for at least DUR more")
	c.Flags().BoolVar(&opts.allowMissing, "allow-missing", false, allowMissingUsage)
	return c
}

// Violation is one breached threshold of dlqctl.check/v1.
type Violation struct {
	Rule   string `json:"rule"`
	Limit  int64  `json:"limit"`
	Actual int64  `json:"actual"`
}

// CheckDoc is dlqctl.check/v1.
type CheckDoc struct {
	Schema string `json:"schema"`
	// AsOf is when the DLQ was read.
	AsOf       time.Time   `json:"as_of"`
	OK         bool        `json:"ok"`
	Violations []Violation `json:"violations"`
	Total      int         `json:"total"`
	// NotSeen counts entries in the DLQ that the scan could not read (SQS:
	// messages in flight); max-total counts them too.
	NotSeen int64 `json:"not_seen"`
	// SourceGone and SourceRetention are stats' (StatsDoc).
	SourceGone      int                  `json:"source_gone"`
	SourceRetention []SourceRetentionDoc `json:"source_retention,omitempty"`
}

type categoryLimit struct {
	name  string
	limit int
}

func parseCategoryLimits(specs []string) ([]categoryLimit, error) {
	var out []categoryLimit
	for _, s := range specs {
		name, n, ok := strings.Cut(s, "=")
		limit, err := strconv.Atoi(n)
		if !ok || name == "" || err != nil || limit < 0 {
			return nil, usageErrorf("--max-category %q: want NAME=N with N a whole number ≥ 0", s)
		}
		out = append(out, categoryLimit{name, limit})
	}
	return out, nil
}

func runCheck(ctx context.Context, opts *checkOptions) error {
	maxAge, err := inspect.ParseDuration(opts.maxAge)
	if err != nil {
		return usageErrorf("--max-age: %v", err)
	}
	if opts.maxTotal < -1 {
		return usageErrorf("--max-total %d: must be 0 or more", opts.maxTotal)
	}
	limits, err := parseCategoryLimits(opts.maxCategory)
	if err != nil {
		return err
	}
	minRetention, err := parseSourceThresholds(opts)
	if err != nil {
		return err
	}
	// A CI step that forgot its threshold must not go green for ever.
	if opts.maxTotal < 0 && maxAge == 0 && len(limits) == 0 && !opts.failOnConflict && opts.maxSourceGone < 0 && minRetention == 0 {
		return usageErrorf("check: no threshold given: use at least one of --max-total N, --max-age DUR, --max-category NAME=N, --fail-on-conflict, --max-source-gone N, --min-source-retention DUR")
	}
	s, err := opts.OpenSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	if err := checkCategories("--max-category", namesOf(limits), s.walker.Classifier); err != nil {
		return err
	}
	sum, err := s.walker.Summarize(ctx)
	if err != nil {
		return err
	}
	doc := CheckDoc{Schema: "dlqctl.check/v1", AsOf: s.walker.Now.UTC(), Violations: []Violation{}, Total: sum.Total, SourceGone: sum.SourceGone}
	if doc.SourceRetention, err = sourceRetention(ctx, s.src, s.walker.Now); err != nil {
		return err
	}
	if u, ok := s.src.(backend.UnseenCounter); ok {
		doc.NotSeen = u.Unseen()
	}
	if n := int64(sum.Total) + doc.NotSeen; opts.maxTotal >= 0 && n > int64(opts.maxTotal) {
		doc.Violations = append(doc.Violations, Violation{"max-total", int64(opts.maxTotal), n})
	}
	if maxAge > 0 && sum.OldestAge > maxAge {
		doc.Violations = append(doc.Violations, Violation{"max-age", seconds(maxAge), seconds(sum.OldestAge)})
	}
	for _, l := range limits {
		if n := sum.ByCategory[l.name]; n > l.limit {
			doc.Violations = append(doc.Violations, Violation{"max-category:" + l.name, int64(l.limit), int64(n)})
		}
	}
	if opts.failOnConflict && len(sum.Conflicts) > 0 {
		doc.Violations = append(doc.Violations, Violation{"fail-on-conflict", 0, int64(len(sum.Conflicts))})
	}
	doc.Violations = append(doc.Violations, sourceViolations(opts.maxSourceGone, minRetention, doc)...)
	doc.OK = len(doc.Violations) == 0
	if err := writeCheck(opts.IO.Out, opts.Report, s, sum, doc); err != nil {
		return err
	}
	if !doc.OK {
		return withCode(ExitCheck, fmt.Errorf("check failed: %s breached", plural(len(doc.Violations), "threshold")))
	}
	return nil
}

// writeCheck writes check's verdict doc in the report's format: the gauges,
// the document, or a line (ok) or a table of what was breached, with the
// source retention after it.
func writeCheck(w io.Writer, ro report.Options, s *session, sum inspect.Summary, doc CheckDoc) error {
	var err error
	switch ro.Format {
	case report.FormatOpenMetrics:
		stats := statsDoc(s.src, sum, s.walker.Now)
		stats.SourceRetention = doc.SourceRetention
		err = report.WriteOpenMetrics(w, checkGauges(stats, doc))
	case report.FormatJSON, report.FormatNDJSON:
		_, err = emitJSON(w, ro.Format, doc)
	default:
		if doc.OK {
			err = report.WriteLine(w, report.ToneGood, fmt.Sprintf("ok: %s%s, no threshold breached", entries(sum.Total), notSeenNote(doc.NotSeen)), ro)
		} else {
			t := report.Table{Title: "Check failed", Columns: []report.Column{{Name: "rule", Kind: report.Key, Tone: func(string) report.Tone { return report.ToneBad }}, {Name: "limit", Right: true}, {Name: "actual", Right: true}}}
			for _, v := range doc.Violations {
				t.Rows = append(t.Rows, []any{v.Rule, v.Limit, v.Actual})
			}
			err = report.WriteTable(w, t, ro)
		}
		if err == nil {
			err = writeSourceRetention(w, doc.SourceRetention, ro)
		}
	}
	return err
}

// notSeenNote says how many entries the scan could not see, if any.
func notSeenNote(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d in flight, not seen)", n)
}

func namesOf(limits []categoryLimit) []string {
	var out []string
	for _, l := range limits {
		out = append(out, l.name)
	}
	return out
}
