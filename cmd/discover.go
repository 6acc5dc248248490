package cmd

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
	"github.com/dlqctl/dlqctl/templates"
)

// TemplateDoc is one group of dlqctl.templates/v1.
type TemplateDoc struct {
	Template         string   `json:"template"`
	Count            int      `json:"count"`
	OldestAgeSeconds *int64   `json:"oldest_age_seconds"`
	SampleError      string   `json:"sample_error"`
	SampleIDs        []string `json:"sample_ids"`
	IDs              []string `json:"ids"`
	// Match selects the group's entries with --error ("" for the overflow
	// group, which is no template).
	Match string `json:"match"`
}

// TemplatesDoc is dlqctl.templates/v1.
type TemplatesDoc struct {
	Schema string        `json:"schema"`
	Scope  string        `json:"scope"`
	Total  int           `json:"total"`
	Groups []TemplateDoc `json:"groups"`
}

func runDiscover(ctx context.Context, opts *categorizeOptions) error {
	s, err := opts.OpenSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	scope := envelope.CategoryUnknown
	switch {
	case opts.all:
		scope = "all"
	case opts.category != "":
		if err := checkCategories("--category", []string{opts.category}, s.walker.Classifier); err != nil {
			return err
		}
		scope = opts.category
	}
	ro := opts.Report
	json := ro.Format == report.FormatJSON || ro.Format == report.FormatNDJSON
	dopts := inspect.DiscoverOptions{KeepIDs: json}
	if scope != "all" {
		dopts.Selector.Categories = []string{scope}
	}
	d, err := s.walker.Discover(ctx, dopts)
	if err != nil {
		return err
	}
	if opts.suggestRules != "" {
		if err := writeSuggestedRules(opts, opts.suggestRules, scope, d); err != nil {
			return err
		}
	}
	doc := TemplatesDoc{Schema: "dlqctl.templates/v1", Scope: scope, Total: d.Total, Groups: []TemplateDoc{}}
	for _, g := range d.Groups {
		td := TemplateDoc{Template: g.Template, Count: g.Count, OldestAgeSeconds: knownSeconds(g.OldestAge, g.OldestKnown),
			SampleError: g.SampleError, SampleIDs: g.SampleIDs, IDs: g.IDs, Match: g.Group().Pattern()}
		if td.IDs == nil {
			td.IDs = []string{}
		}
		doc.Groups = append(doc.Groups, td)
	}
	if done, err := emitJSON(opts.IO.Out, ro.Format, doc); done {
		return err
	}
	if d.Total == 0 {
		fmt.Fprintf(opts.IO.ErrOut, "dlqctl: no entries in %s\n", scopeName(scope))
	}
	// On a terminal the template is what this table is for: one sample id
	// (ids are never cut, and three would leave it no room) and no sample
	// error, which -o wide, markdown and piped output add.
	full := !ro.TTY || ro.Format != report.FormatTable
	t := report.Table{Columns: []report.Column{
		{Name: "template", MaxWidth: -1}, {Name: "count", Right: true}, {Name: "oldest", Right: true},
		{Name: "sample id", Kind: report.Key, Optional: true},
	}}
	if full {
		t.Columns = append(t.Columns, report.Column{Name: "sample error"})
	}
	for _, g := range d.Groups {
		first := ""
		if len(g.SampleIDs) > 0 {
			first = g.SampleIDs[0]
		}
		row := []any{g.Template, g.Count, report.AgeOrUnknown(g.OldestAge, g.OldestKnown), first}
		if full {
			row = append(row, g.SampleError)
		}
		t.Rows = append(t.Rows, row)
	}
	return report.WriteTable(opts.IO.Out, t, ro)
}

func scopeName(scope string) string {
	if scope == "all" {
		return "the DLQ"
	}
	return "category " + scope
}

// ruleSpecsInEffect are the category rules in effect, in order, as a rules
// file writes them: --rules, else the profile's or the config's
// categories, each with the built-in rules after it unless it replaces
// them.
func (f *Factory) ruleSpecsInEffect() ([]envelope.RuleSpec, error) {
	var spec *envelope.RulesSpec
	if f.Global.Rules != "" {
		s, err := readRulesFile(f.Global.Rules)
		if err != nil {
			return nil, err
		}
		spec = &s
	} else if f.profile.Categories != nil {
		spec = f.profile.Categories
	} else {
		spec = f.config.Categories
	}
	var out []envelope.RuleSpec
	if spec != nil {
		out = append(out, spec.Rules...)
		if spec.Mode == "replace" {
			return out, nil
		}
	}
	for _, r := range envelope.DefaultRules() {
		out = append(out, envelope.RuleSpec{Name: r.Name, Match: r.Pattern.String(), Disposition: r.Disposition})
	}
	return out, nil
}

// writeSuggestedRules writes a rules file (mode replace) that holds the
// rules in effect and one rule per template. Templates of unknown go after
// the rules in effect, so they take only what no rule names today; those of
// another category (or of all) go before, so they split it.
func writeSuggestedRules(opts *categorizeOptions, path, scope string, d inspect.Discovery) error {
	inEffect, err := opts.RuleSpecs()
	if err != nil {
		return err
	}
	taken := map[string]bool{envelope.CategoryMalformed: true, envelope.CategoryConflict: true, envelope.CategoryUnknown: true}
	for _, r := range inEffect {
		taken[r.Name] = true
	}
	groups := make([]templates.Group, len(d.Groups))
	for i, g := range d.Groups {
		groups[i] = g.Group()
	}
	sugg := templates.Suggest(groups, func(n string) bool { return taken[n] })
	// Each group's sample must fall to its own rule: the rules are ordered
	// most specific first, and a sample that another rule takes first is
	// said, not hidden.
	compiled := make([]*regexp.Regexp, len(sugg))
	for i, s := range sugg {
		if compiled[i], err = regexp.Compile(s.Pattern); err != nil {
			return fmt.Errorf("rule for template %q: %v", groups[s.Group].Template, err)
		}
	}
	for i, s := range sugg {
		sample := d.Groups[s.Group].SampleError
		for j, re := range compiled {
			if re.MatchString(sample) {
				if j != i {
					fmt.Fprintf(opts.IO.ErrOut, "dlqctl: note: rule %s also matches the sample of %s, which comes first\n", sugg[i].Name, sugg[j].Name)
				}
				break
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Rules suggested by dlqctl categorize --discover from the error templates of %s\n", scopeName(scope))
	fmt.Fprintf(&b, "# (%d entries, %s), at %s.\n", d.Total, plural(len(sugg), "template"), opts.Report.Now.UTC().Format("2006-01-02T15:04:05Z"))
	b.WriteString("# Rename each suggested category, set its disposition, then pass this file to --rules.\n")
	b.WriteString("# It replaces the rules: the rules in effect when it was written are kept, in order.\n")
	b.WriteString("mode: replace\nrules:\n")
	writeSuggested := func() {
		for _, s := range sugg {
			g := d.Groups[s.Group]
			fmt.Fprintf(&b, "  # %s — %s, e.g. %s\n", oneLine(g.Template), entries(g.Count), oneLine(strconv.Quote(truncateRunes(g.SampleError, 120))))
			fmt.Fprintf(&b, "  - name: %s\n    match: %s\n    disposition: %s\n", yamlString(s.Name), yamlString(s.Pattern), envelope.DispositionInvestigate)
		}
	}
	writeInEffect := func() {
		b.WriteString("  # The rules in effect.\n")
		for _, r := range inEffect {
			fmt.Fprintf(&b, "  - name: %s\n", yamlString(r.Name))
			if r.Match != "" {
				fmt.Fprintf(&b, "    match: %s\n", yamlString(r.Match))
			}
			if r.Origin != "" {
				fmt.Fprintf(&b, "    origin: %s\n", yamlString(r.Origin))
			}
			if len(r.Properties) > 0 {
				b.WriteString("    properties:\n")
				for _, k := range sortedKeys(r.Properties) {
					fmt.Fprintf(&b, "      %s: %s\n", yamlString(k), yamlString(r.Properties[k]))
				}
			}
			fmt.Fprintf(&b, "    disposition: %s\n", r.Disposition)
		}
	}
	if scope == envelope.CategoryUnknown {
		writeInEffect()
		writeSuggested()
	} else {
		writeSuggested()
		writeInEffect()
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("--suggest-rules: %v", err)
	}
	fmt.Fprintf(opts.IO.ErrOut, "dlqctl: wrote %s to %s\n", plural(len(sugg), "suggested rule"), path)
	return nil
}

// yamlString quotes s for YAML: single quotes when it is printable, else
// a double-quoted string with escapes (YAML reads Go's).
func yamlString(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

func truncateRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
