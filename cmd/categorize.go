package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/report"
)

// categorizeOptions is what categorize groups and with what: the flags,
// the output settings resolved for the invocation, and how it opens the
// source.
type categorizeOptions struct {
	IO     *IOStreams
	Report report.Options
	// OpenSession opens the source in effect with the category rules in
	// effect.
	OpenSession func(context.Context) (*session, error)
	// RuleSpecs are the category rules in effect as written, which
	// --suggest-rules keeps in the file it writes.
	RuleSpecs func() ([]envelope.RuleSpec, error)

	explain      bool
	discover     bool
	category     string
	all          bool
	suggestRules string
}

// newCategorizeCmd builds categorize; runF, when not nil, runs instead of
// runCategorize and runDiscover, after the flags are checked.
func newCategorizeCmd(f *Factory, runF func(context.Context, *categorizeOptions) error) *cobra.Command {
	opts := &categorizeOptions{}
	c := &cobra.Command{
		Use:   "categorize",
		Short: "Per category: disposition, count, oldest age, an example error and sample ids",
		Long: `Group the DLQ by category (the built-in rules, or --rules FILE) and say what to
do with each: redrive, fix-then-redrive, investigate, resolve or quarantine.
--explain adds which rules put entries in each category.

--discover groups the entries of one category (unknown unless --category C;
--all for every entry) by the template of their last_error: the message with
what varies masked as <*> (numbers, IDs, hex, UUIDs, hosts and ports, e-mail
addresses, paths, URLs, quoted values, durations, timestamps, key=value
values, and words that vary between messages of one kind). Biggest group
first, with its count, oldest age, a sample error and sample ids; -o json
lists every entry id of each group, and "match", a regular expression that
--error takes to select the group. Errors longer than 2048 bytes are mined
on their first 2048 bytes.

--suggest-rules FILE writes a rules file with one rule per template (an
anchored regular expression, a name from the template, disposition
investigate) to rename, edit and pass to --rules.`,
		Example: `  dlqctl categorize --discover
  dlqctl categorize --discover --category transient
  dlqctl categorize --discover --suggest-rules rules.yaml && dlqctl --rules rules.yaml categorize
  dlqctl redrive plan --error "$(dlqctl categorize --discover -o json --jq '.groups[0].match')" --reason ...`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			opts.IO, opts.Report, opts.OpenSession, opts.RuleSpecs = f.IO, f.reportOptions(), f.openSession, f.ruleSpecsInEffect
			if opts.suggestRules != "" {
				opts.discover = true
			}
			if !opts.discover {
				if opts.all || opts.category != "" {
					return usageErrorf("--all and --category go with --discover")
				}
				if runF != nil {
					return runF(c.Context(), opts)
				}
				return runCategorize(c.Context(), opts)
			}
			if opts.explain {
				return usageErrorf("--explain does not go with --discover")
			}
			if opts.all && opts.category != "" {
				return usageErrorf("--all and --category exclude each other")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runDiscover(c.Context(), opts)
		},
	}
	c.Flags().BoolVar(&opts.explain, "explain", false, "say which rule put entries into each category")
	c.Flags().BoolVar(&opts.discover, "discover", false, "group a category's entries by the template of their error")
	c.Flags().StringVar(&opts.category, "category", "", "with --discover: the category to mine (default unknown)")
	c.Flags().BoolVar(&opts.all, "all", false, "with --discover: mine every entry, whatever its category")
	c.Flags().StringVar(&opts.suggestRules, "suggest-rules", "", "write a rules file with one rule per template to FILE (implies --discover)")
	return c
}

// CategoryDoc is one entry of dlqctl.categories/v1.
type CategoryDoc struct {
	Name             string         `json:"name"`
	Disposition      string         `json:"disposition"`
	Count            int            `json:"count"`
	OldestAgeSeconds *int64         `json:"oldest_age_seconds"`
	ExampleError     string         `json:"example_error"`
	SampleIDs        []string       `json:"sample_ids"`
	Rules            map[string]int `json:"rules,omitempty"`
}

// CategoriesDoc is dlqctl.categories/v1.
type CategoriesDoc struct {
	Schema     string        `json:"schema"`
	Total      int           `json:"total"`
	Categories []CategoryDoc `json:"categories"`
}

func runCategorize(ctx context.Context, opts *categorizeOptions) error {
	s, err := opts.OpenSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	sum, err := s.walker.Summarize(ctx)
	if err != nil {
		return err
	}
	doc := CategoriesDoc{Schema: "dlqctl.categories/v1", Total: sum.Total, Categories: []CategoryDoc{}}
	for _, c := range sum.Categories {
		cd := CategoryDoc{Name: c.Name, Disposition: c.Disposition, Count: c.Count,
			OldestAgeSeconds: knownSeconds(c.OldestAge, c.OldestKnown), ExampleError: c.ExampleError, SampleIDs: c.SampleIDs}
		if opts.explain {
			cd.Rules = c.Rules
		}
		doc.Categories = append(doc.Categories, cd)
	}
	ro := opts.Report
	if done, err := emitJSON(opts.IO.Out, ro.Format, doc); done {
		return err
	}
	t := report.Table{Columns: []report.Column{
		{Name: "category", Kind: report.Key}, {Name: "disposition", Kind: report.Key, Tone: report.DispositionTone},
		{Name: "count", Right: true}, {Name: "oldest", Right: true},
		{Name: "example error", MaxWidth: 50}, {Name: "sample ids", Kind: report.Key, Optional: true},
	}}
	if opts.explain {
		t.Columns = append(t.Columns, report.Column{Name: "rules", MaxWidth: 60})
	}
	for _, c := range sum.Categories {
		row := []any{c.Name, c.Disposition, c.Count, report.AgeOrUnknown(c.OldestAge, c.OldestKnown), c.ExampleError, strings.Join(c.SampleIDs, " ")}
		if opts.explain {
			var parts []string
			for _, r := range sortedByCount(c.Rules) {
				parts = append(parts, fmt.Sprintf("%s=%d", r, c.Rules[r]))
			}
			row = append(row, strings.Join(parts, " "))
		}
		t.Rows = append(t.Rows, row)
	}
	return report.WriteTable(opts.IO.Out, t, ro)
}
