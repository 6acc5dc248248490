package cmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

// pendingOptions is what pending inspects and with what: the flags, the
// source URL in effect, the output settings resolved for the invocation,
// and how it opens a source.
type pendingOptions struct {
	IO     *IOStreams
	Report report.Options
	// Source is the source URL in effect (--source, DLQCTL_SOURCE or the
	// profile).
	Source string
	// OpenSource opens the source URL given, with the settings in effect.
	OpenSource func(ctx context.Context, source string) (backend.Source, error)
	// Lookup finds the backend that serves a source URL (the registry's).
	Lookup func(source string) (backend.Registration, error)

	stream  string
	group   string
	minIdle string
	limit   int
}

// newPendingCmd builds pending; runF, when not nil, runs instead of
// runPending.
func newPendingCmd(f *Factory, runF func(context.Context, *pendingOptions) error) *cobra.Command {
	opts := &pendingOptions{}
	c := &cobra.Command{
		Use:   "pending",
		Short: "Redis: a consumer group's pending entries, per consumer, idle times and delivery counts",
		Long: `For a Redis stream and consumer group: pending count, lag and entries
read, per consumer pending and idle, the oldest idle entry, a histogram of
delivery counts, and the entries idle longer than --min-idle (candidates for
XAUTOCLAIM or quarantine). The source names the Redis server; --stream names
the stream, which need not be the DLQ.`,
		Example: `  dlqctl pending --source redis://127.0.0.1:6379/0 --stream orders --group order-workers --min-idle 5m`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			opts.IO, opts.Report, opts.Source = f.IO, f.reportOptions(), f.source
			opts.OpenSource = func(ctx context.Context, source string) (backend.Source, error) {
				f.source = source
				return f.openSource(ctx)
			}
			opts.Lookup = f.Backends.Lookup
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runPending(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.stream, "stream", "", "stream key (required)")
	c.Flags().StringVar(&opts.group, "group", "", "consumer group (required)")
	c.Flags().StringVar(&opts.minIdle, "min-idle", "", "list pending entries idle longer than DUR (e.g. 5m)")
	c.Flags().IntVar(&opts.limit, "limit", 10000, "read at most N pending entries for the histogram and idle list")
	return c
}

// PendingDoc is dlqctl.pending/v1.
type PendingDoc struct {
	Schema string `json:"schema"`
	backend.PendingReport
}

func runPending(ctx context.Context, opts *pendingOptions) error {
	if opts.stream == "" || opts.group == "" {
		return usageErrorf("pending needs --stream and --group")
	}
	minIdle, err := inspect.ParseDuration(opts.minIdle)
	if err != nil {
		return usageErrorf("--min-idle: %v", err)
	}
	if opts.limit < 1 {
		return usageErrorf("--limit %d: must be at least 1", opts.limit)
	}
	source := opts.Source
	// Refused before anything is opened: the backend must read its
	// origins through consumer groups.
	reg, err := opts.Lookup(source)
	if err != nil {
		return err
	}
	if !reg.Capabilities.Pending {
		return usageErrorf("pending works on sources whose backend reads through consumer groups (Redis: --source redis://HOST:PORT/DB); %s has none", reg.Title)
	}
	if reg.GroupsSource != nil {
		source = reg.GroupsSource(source, opts.stream)
	}
	src, err := opts.OpenSource(ctx, source)
	if err != nil {
		return err
	}
	defer src.Close()
	rs, ok := src.(backend.GroupInspector)
	if !ok {
		return usageErrorf("pending: %s has no consumer groups to inspect (it works on Redis sources)", src.String())
	}
	rep, err := rs.Pending(ctx, opts.stream, opts.group, minIdle, opts.limit)
	if err != nil {
		return err
	}
	doc := PendingDoc{Schema: "dlqctl.pending/v1", PendingReport: rep}
	ro, w := opts.Report, opts.IO.Out
	if done, err := emitJSON(w, ro.Format, doc); done {
		return err
	}
	return writePending(w, rep, minIdle, opts.minIdle, ro)
}

// writePending is pending as text: the group's counts, its consumers, the
// delivery-count histogram, and the entries idle over minIdle (given as
// minIdleFlag) when asked.
func writePending(w io.Writer, rep backend.PendingReport, minIdle time.Duration, minIdleFlag string, ro report.Options) error {
	lag := "unknown"
	if rep.Lag != nil {
		lag = fmt.Sprint(*rep.Lag)
	}
	err := report.WriteFields(w, fmt.Sprintf("Stream %s, group %s", rep.Stream, rep.Group), []report.Field{
		{Key: "pending", Value: rep.Pending},
		{Key: "lag", Value: lag},
		{Key: "entries read", Value: entriesRead(rep.EntriesRead)},
		{Key: "oldest idle", Value: report.Age(time.Duration(rep.OldestIdleSeconds) * time.Second)},
	}, ro)
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	t := report.Table{Title: "Consumers", Columns: []report.Column{{Name: "consumer", Kind: report.Key}, {Name: "pending", Right: true}, {Name: "idle", Right: true}}}
	for _, c := range rep.Consumers {
		t.Rows = append(t.Rows, []any{c.Name, c.Pending, report.Age(time.Duration(c.IdleSeconds) * time.Second)})
	}
	if err := report.WriteTable(w, t, ro); err != nil {
		return err
	}
	fmt.Fprintln(w)
	var bars []report.Bar
	for _, k := range []string{"1", "2", "3-5", "6-10", "11+"} {
		bars = append(bars, report.Bar{Label: k + " deliveries", Count: int64(rep.DeliveryHistogram[k])})
	}
	if err := report.WriteHistogram(w, "Delivery counts", bars, ro); err != nil {
		return err
	}
	if minIdle > 0 {
		fmt.Fprintln(w)
		t := report.Table{Title: "Idle over " + minIdleFlag, Columns: []report.Column{{Name: "id", Kind: report.Key}, {Name: "consumer", Kind: report.Key}, {Name: "idle", Right: true}, {Name: "deliveries", Right: true}}}
		for _, e := range rep.OverMinIdle {
			t.Rows = append(t.Rows, []any{e.ID, e.Consumer, report.Age(time.Duration(e.IdleSeconds) * time.Second), e.Deliveries})
		}
		return report.WriteTable(w, t, ro)
	}
	return nil
}

// entriesRead shows the group's entries-read counter, which Redis leaves
// unset before 7.0 or before the group reads.
func entriesRead(n *int64) any {
	if n == nil {
		return report.Unknown{}
	}
	return *n
}
