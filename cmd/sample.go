package cmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

// sampleOptions is what sample picks and with what: the flags (the seed
// drawn from the clock when --seed is not given), the output settings
// resolved for the invocation, and how it opens the source.
type sampleOptions struct {
	IO     *IOStreams
	Report report.Options
	// OpenSession opens the source in effect with the category rules in
	// effect.
	OpenSession func(context.Context) (*session, error)

	sel         selectorFlags
	perCategory int
	seed        uint64
	redact      []string
}

// newSampleCmd builds sample; runF, when not nil, runs instead of
// runSample.
func newSampleCmd(f *Factory, runF func(context.Context, *sampleOptions) error) *cobra.Command {
	opts := &sampleOptions{}
	c := &cobra.Command{
		Use:   "sample",
		Short: "A few envelopes of each category, personal data redacted",
		Long: `Pick up to --per-category envelopes of each category at random (the same
--seed picks the same ones) and show them with payload fields redacted:
email, phone, name, address, card, ssn, password and token always, plus
--redact. Payloads that are not JSON are hidden whole.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if !c.Flags().Changed("seed") {
				opts.seed = uint64(f.Now().UnixNano())
			}
			opts.IO, opts.Report, opts.OpenSession = f.IO, f.reportOptions(), f.openSession
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runSample(c.Context(), opts)
		},
	}
	opts.sel.register(c.Flags(), 0)
	c.Flags().IntVar(&opts.perCategory, "per-category", 3, "envelopes per category")
	c.Flags().Uint64Var(&opts.seed, "seed", 0, "random seed: the same seed picks the same envelopes (default: random)")
	c.Flags().StringSliceVar(&opts.redact, "redact", nil, "more payload fields to redact: a key (anywhere) or a dotted path from the root")
	return c
}

// SampleItem is one entry of dlqctl.sample/v1.
type SampleItem struct {
	Category    string            `json:"category"`
	Disposition string            `json:"disposition"`
	Envelope    envelope.Envelope `json:"envelope"`
}

// SampleDoc is dlqctl.sample/v1.
type SampleDoc struct {
	Schema      string       `json:"schema"`
	Seed        uint64       `json:"seed"`
	PerCategory int          `json:"per_category"`
	Items       []SampleItem `json:"items"`
}

func runSample(ctx context.Context, opts *sampleOptions) error {
	if opts.perCategory < 1 {
		return usageErrorf("--per-category %d: must be at least 1", opts.perCategory)
	}
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
	items, err := s.walker.Sample(ctx, sel, opts.perCategory, opts.seed)
	if err != nil {
		return err
	}
	red := inspect.NewRedactor(opts.redact)
	doc := SampleDoc{Schema: "dlqctl.sample/v1", Seed: opts.seed, PerCategory: opts.perCategory, Items: []SampleItem{}}
	for _, it := range items {
		doc.Items = append(doc.Items, SampleItem{it.Class.Category, it.Class.Disposition, red.Envelope(it.Envelope)})
	}
	ro, w := opts.Report, opts.IO.Out
	switch ro.Format {
	case report.FormatJSON:
		_, err := emitJSON(w, ro.Format, doc)
		return err
	case report.FormatNDJSON:
		for _, it := range doc.Items {
			line := struct {
				Schema string `json:"schema"`
				SampleItem
			}{"dlqctl.sample-item/v1", it}
			if err := report.WriteNDJSON(w, line); err != nil {
				return err
			}
		}
		return nil
	}
	t := report.Table{Columns: []report.Column{
		{Name: "category", Kind: report.Key}, {Name: "id", Kind: report.Key}, {Name: "event id", Kind: report.Key},
		{Name: "age", Right: true, Optional: true}, {Name: "error", MaxWidth: 48}, {Name: "payload", MaxWidth: 72},
	}}
	for _, it := range doc.Items {
		e := it.Envelope
		msg := e.LastError
		if e.Malformed != "" {
			msg = e.Malformed
		}
		t.Rows = append(t.Rows, []any{it.Category, e.ID, e.EventID, report.AgeSeconds(ageSeconds(e, ro.Now)), msg, string(e.Payload)})
	}
	if err := report.WriteTable(w, t, ro); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "seed %d (repeat with --seed %d)\n", opts.seed, opts.seed)
	return nil
}
