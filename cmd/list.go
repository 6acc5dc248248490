package cmd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

// listOptions is what list shows and with what: the flags, the output
// settings resolved for the invocation, and how it opens the source.
type listOptions struct {
	IO     *IOStreams
	Report report.Options
	// OpenSession opens the source in effect with the category rules in
	// effect.
	OpenSession func(context.Context) (*session, error)

	sel   selectorFlags
	after string
}

// newListCmd builds list; runF, when not nil, runs instead of runList.
func newListCmd(f *Factory, runF func(context.Context, *listOptions) error) *cobra.Command {
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
			opts.IO, opts.Report, opts.OpenSession = f.IO, f.reportOptions(), f.openSession
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runList(c.Context(), opts)
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

func runList(ctx context.Context, opts *listOptions) error {
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
	conflicts, err := s.walker.Conflicts(ctx)
	if err != nil {
		return err
	}
	ro, out := opts.Report, opts.IO.Out
	doc := ListDoc{Schema: "dlqctl.list/v1", Items: []ListItem{}}
	// Piped and markdown tables need no column widths: their rows go out
	// as they are read, so `list --limit 0 | …` holds one row, not the DLQ.
	var stream *report.Stream
	var buffered *bufio.Writer
	if ro.RowByRow() {
		buffered = bufio.NewWriter(out)
		if stream, err = report.NewStream(buffered, "", listColumns(nil), ro); err != nil {
			return err
		}
	}
	next, err := s.walker.Walk(ctx, conflicts, sel, opts.after, func(it inspect.Item) error {
		li := newListItem(it, ro.Now)
		switch {
		case ro.Format == report.FormatNDJSON:
			// Streamed, so a large listing never sits in memory.
			return report.WriteNDJSON(out, struct {
				Schema string `json:"schema"`
				ListItem
			}{"dlqctl.list-item/v1", li})
		case stream != nil:
			return stream.Row(listRow(li)...)
		}
		doc.Items = append(doc.Items, li)
		return nil
	})
	if stream != nil {
		// What was read before a failure is still written, as with NDJSON.
		if err == nil {
			err = stream.Close()
		}
		if ferr := buffered.Flush(); err == nil {
			err = ferr
		}
	}
	if err != nil {
		return err
	}
	doc.Next = next
	return finishList(opts.IO, doc, stream != nil, len(sel.Categories) == 1, ro)
}

// finishList writes what follows the rows: the cursor line of NDJSON, the
// JSON document, or the table when rows were not streamed; then, on
// stderr, where the next page starts.
func finishList(ios *IOStreams, doc ListDoc, streamed, oneCategory bool, ro report.Options) error {
	var err error
	next := doc.Next
	switch {
	case ro.Format == report.FormatNDJSON:
		if next != "" {
			// The last line says where the next page starts, as the next
			// field of -o json does.
			err = report.WriteNDJSON(ios.Out, struct {
				Schema string `json:"schema"`
				Next   string `json:"next"`
			}{"dlqctl.cursor/v1", next})
		}
	case ro.Format == report.FormatJSON:
		_, err = emitJSON(ios.Out, ro.Format, doc)
	case !streamed:
		err = writeListTable(ios.Out, doc.Items, oneCategory, ro)
	}
	if err != nil {
		return err
	}
	// Said on stderr in every format: a --jq over one page (`.items|length`)
	// would otherwise read as the whole DLQ.
	if next != "" {
		fmt.Fprintf(ios.ErrOut, "more entries: --after %s (or --limit 0 for all)\n", next)
	}
	return nil
}

// listErrorLines is how many lines an error may take in a terminal table:
// errors of one kind often differ only at their end (missing field
// "currency", "weightGrams"), which a one-line cell would cut away.
const listErrorLines = 4

// listColumns are the columns of list's table; categoryTone colours the
// category on a terminal (nil: plain).
func listColumns(categoryTone func(string) report.Tone) []report.Column {
	return []report.Column{
		{Name: "id", Kind: report.Key}, {Name: "event id", Kind: report.Key}, {Name: "age", Right: true},
		{Name: "attempts", Right: true, Optional: true}, {Name: "category", Kind: report.Key, Tone: categoryTone},
		{Name: "origin", MaxWidth: 24, Optional: true}, {Name: "error", MaxWidth: 100, WrapLines: listErrorLines},
	}
}

func listRow(li ListItem) []any {
	return []any{li.ID, li.EventID, report.AgeSeconds(li.AgeSeconds), li.Attempts, li.Category, li.Origin.Topic, listError(li)}
}

// listError is the error cell: the entry's own last error, and for a
// malformed entry why it is malformed as well, since that reason alone
// says nothing about why the consumer gave up on it. The reason comes
// first: it is why the entry is in the malformed category, and a narrow
// cell keeps the start of its text.
func listError(li ListItem) string {
	switch {
	case li.Malformed == "":
		return li.LastError
	case li.LastError == "":
		return "malformed: " + li.Malformed
	}
	return "(malformed: " + li.Malformed + ") " + li.LastError
}

// writeListTable draws the whole page at once: a terminal table takes its
// column widths from every row. oneCategory: --category names a single
// category, so the category column would repeat it on every row; on a
// terminal it is left out and the error gets the room. (Piped and markdown
// tables keep their columns: scripts read them by position.)
func writeListTable(w io.Writer, items []ListItem, oneCategory bool, ro report.Options) error {
	dispositionOf := map[string]string{}
	for _, li := range items {
		dispositionOf[li.Category] = li.Disposition
	}
	// A category is coloured by what to do with it.
	categoryTone := func(c string) report.Tone { return report.DispositionTone(dispositionOf[c]) }
	t := report.Table{Columns: listColumns(categoryTone)}
	for _, li := range items {
		t.Rows = append(t.Rows, listRow(li))
	}
	if oneCategory {
		const categoryColumn = 4
		t.Columns = append(t.Columns[:categoryColumn:categoryColumn], t.Columns[categoryColumn+1:]...)
		for i, r := range t.Rows {
			t.Rows[i] = append(r[:categoryColumn:categoryColumn], r[categoryColumn+1:]...)
		}
	}
	return report.WriteTable(w, t, ro)
}
