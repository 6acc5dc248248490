package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

type listOptions struct {
	sel   selectorFlags
	after string
}

func newListCmd(f *Factory) *cobra.Command {
	opts := &listOptions{}
	c := &cobra.Command{
		Use:   "list",
		Short: "List DLQ envelopes, newest last",
		Long: `List DLQ envelopes in dead-letter order (newest last) with their category.

By default at most 50 are shown; --limit 0 shows all, and --after CURSOR
continues from the "next" cursor of a previous page.`,
		Example: `  dlqctl list --source dir:testdata/incident --category transient
  dlqctl list --older-than 1h --min-attempts 5 -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return runList(c.Context(), f, opts)
		},
	}
	opts.sel.register(c.Flags(), 50)
	c.Flags().StringVar(&opts.after, "after", "", "continue after this cursor (an entry id; the \"next\" of a previous page)")
	return c
}

// ListItem is one entry of dlqctl.list/v1 (docs/json.md).
type ListItem struct {
	ID             string          `json:"id"`
	EventID        string          `json:"event_id"`
	Fingerprint    string          `json:"fingerprint"`
	Category       string          `json:"category"`
	Disposition    string          `json:"disposition"`
	Attempts       int             `json:"attempts"`
	Origin         envelope.Origin `json:"origin"`
	LastError      string          `json:"last_error"`
	DeadLetteredAt *time.Time      `json:"dead_lettered_at"`
	AgeSeconds     *int64          `json:"age_seconds"`
	Key            string          `json:"key,omitempty"`
	Owner          string          `json:"owner,omitempty"`
	Malformed      string          `json:"malformed,omitempty"`
}

// ListDoc is dlqctl.list/v1.
type ListDoc struct {
	Schema string     `json:"schema"`
	Items  []ListItem `json:"items"`
	Next   string     `json:"next"`
}

func newListItem(it inspect.Item, now time.Time) ListItem {
	e := it.Envelope
	li := ListItem{
		ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint, Category: it.Class.Category,
		Disposition: it.Class.Disposition, Attempts: e.Attempts, Origin: e.Origin,
		LastError: e.LastError, AgeSeconds: ageSeconds(e, now),
		Key: e.Key, Owner: e.Owner, Malformed: e.Malformed,
	}
	if !e.DeadLetteredAt.IsZero() {
		t := e.DeadLetteredAt.UTC()
		li.DeadLetteredAt = &t
	}
	return li
}

func runList(ctx context.Context, f *Factory, opts *listOptions) error {
	sel, err := opts.sel.selector()
	if err != nil {
		return err
	}
	s, err := f.openSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	if err := checkCategories(sel.Categories, s.walker.Classifier.Disposition); err != nil {
		return err
	}
	conflicts, err := s.walker.Conflicts(ctx)
	if err != nil {
		return err
	}
	ro := f.reportOptions()
	doc := ListDoc{Schema: "dlqctl.list/v1", Items: []ListItem{}}
	next, err := s.walker.Walk(ctx, conflicts, sel, opts.after, func(it inspect.Item) error {
		li := newListItem(it, ro.Now)
		if ro.Format == report.FormatNDJSON {
			// Streamed, so a large listing never sits in memory.
			return report.WriteNDJSON(f.IO.Out, struct {
				Schema string `json:"schema"`
				ListItem
			}{"dlqctl.list-item/v1", li})
		}
		doc.Items = append(doc.Items, li)
		return nil
	})
	if err != nil {
		return err
	}
	doc.Next = next
	switch ro.Format {
	case report.FormatNDJSON:
		if next == "" {
			return nil
		}
		// The last line says where the next page starts, as the next field
		// of -o json does.
		return report.WriteNDJSON(f.IO.Out, struct {
			Schema string `json:"schema"`
			Next   string `json:"next"`
		}{"dlqctl.cursor/v1", next})
	case report.FormatJSON:
		_, err := f.emitJSON(doc)
		return err
	}
	dispositionOf := map[string]string{}
	for _, li := range doc.Items {
		dispositionOf[li.Category] = li.Disposition
	}
	// A category is coloured by what to do with it.
	categoryTone := func(c string) report.Tone { return report.DispositionTone(dispositionOf[c]) }
	t := report.Table{Columns: []report.Column{
		{Name: "id", Kind: report.Key}, {Name: "event id", Kind: report.Key}, {Name: "age", Right: true},
		{Name: "attempts", Right: true, Optional: true}, {Name: "category", Kind: report.Key, Tone: categoryTone},
		{Name: "origin", MaxWidth: 24, Optional: true}, {Name: "error", MaxWidth: 60},
	}}
	for _, li := range doc.Items {
		msg := li.LastError
		if li.Malformed != "" {
			msg = li.Malformed
		}
		age := report.AgeSeconds(li.AgeSeconds)
		t.Rows = append(t.Rows, []any{li.ID, li.EventID, age,
			li.Attempts, li.Category, li.Origin.Topic, msg})
	}
	if err := report.WriteTable(f.IO.Out, t, ro); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(f.IO.ErrOut, "more entries: --after %s (or --limit 0 for all)\n", next)
	}
	return nil
}
