package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

// quarantineOptions is what quarantine moves and with what: the flags, the
// output settings resolved for the invocation (whose Now stamps the
// envelopes), and how it opens the source.
type quarantineOptions struct {
	IO     *IOStreams
	Report report.Options
	// OpenSession opens the source in effect with the category rules in
	// effect.
	OpenSession func(context.Context) (*session, error)

	stream        string
	group         string
	minIdle       string
	minDeliveries int64
	reason        string
	category      string
	dryRun        bool
	limit         int
}

// newQuarantineCmd builds quarantine; runF, when not nil, runs instead of
// runQuarantine.
func newQuarantineCmd(f *Factory, runF func(context.Context, *quarantineOptions) error) *cobra.Command {
	o := &quarantineOptions{}
	c := &cobra.Command{
		Use:   "quarantine",
		Short: "Redis: move stuck pending entries of a group into the DLQ stream",
		Long: `Move the pending entries of a consumer group that have been idle at least
--min-idle and delivered at least --min-deliveries times into the DLQ stream
(the source) as envelopes — event ID, fingerprint, origin stream, group and
consumer, attempts, --reason as last_error, --category as error_class — and
XACK them, in one Lua script each. An entry that stopped qualifying since the
pending list was read (acked, claimed, delivered again) is skipped and
counted. Delivery count alone does not make a message poison: choose the
thresholds from pending's histogram, and --dry-run first.`,
		Example: `  dlqctl quarantine --source redis://127.0.0.1:6379/0?stream=orders-dlq \
    --stream orders --group order-workers --min-idle 30m --min-deliveries 5 \
    --reason "stuck: consumer crashed on it repeatedly" --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Report, o.OpenSession = f.IO, f.reportOptions(), f.openSession
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runQuarantine(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.stream, "stream", "", "the stream whose group holds the pending entries (required)")
	c.Flags().StringVar(&o.group, "group", "", "consumer group (required)")
	c.Flags().StringVar(&o.minIdle, "min-idle", "", "only entries idle at least DUR (required, e.g. 30m)")
	c.Flags().Int64Var(&o.minDeliveries, "min-deliveries", 0, "only entries delivered at least N times (required)")
	c.Flags().StringVar(&o.reason, "reason", "", "why: becomes the envelopes' last_error (required)")
	c.Flags().StringVar(&o.category, "category", "", "error_class for the envelopes (a category name)")
	c.Flags().BoolVar(&o.dryRun, "dry-run", false, "list what would move and change nothing")
	c.Flags().IntVar(&o.limit, "limit", 0, "move at most N entries (0: all that qualify)")
	return c
}

// QuarantineDoc is dlqctl.quarantine/v1.
type QuarantineDoc struct {
	Schema string `json:"schema"`
	backend.QuarantineReport
}

func runQuarantine(ctx context.Context, o *quarantineOptions) error {
	if o.stream == "" || o.group == "" || o.minIdle == "" || o.minDeliveries < 1 || o.reason == "" {
		return usageErrorf("quarantine needs --stream, --group, --min-idle, --min-deliveries (≥ 1) and --reason")
	}
	minIdle, err := inspect.ParseDuration(o.minIdle)
	if err != nil {
		return usageErrorf("--min-idle: %v", err)
	}
	if o.limit < 0 {
		return usageErrorf("--limit must be 0 or more")
	}
	s, err := o.OpenSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	if o.category != "" {
		if err := checkCategories("--category", []string{o.category}, s.walker.Classifier); err != nil {
			return err
		}
	}
	rs, ok := s.src.(backend.Quarantiner)
	if !ok {
		return usageErrorf("quarantine: %s cannot take entries from consumer groups (it works on Redis sources; the source is the DLQ stream)", s.src.String())
	}
	rep, err := rs.Quarantine(ctx, backend.QuarantineOptions{
		Stream: o.stream, Group: o.group, MinIdle: minIdle, MinDeliveries: o.minDeliveries,
		Reason: o.reason, Category: o.category, DryRun: o.dryRun, Limit: o.limit, Now: o.Report.Now,
	})
	if err != nil {
		return err
	}
	doc := QuarantineDoc{Schema: "dlqctl.quarantine/v1", QuarantineReport: rep}
	ro, w := o.Report, o.IO.Out
	if done, err := emitJSON(w, ro.Format, doc); done {
		return err
	}
	if o.dryRun {
		fmt.Fprintln(o.IO.ErrOut, "(dry run) nothing was changed")
		t := report.Table{Title: "Would move", Columns: []report.Column{{Name: "id", Kind: report.Key}, {Name: "consumer", Kind: report.Key}, {Name: "idle", Right: true}, {Name: "deliveries", Right: true}}}
		for _, e := range rep.WouldMove {
			t.Rows = append(t.Rows, []any{e.ID, e.Consumer, report.Age(time.Duration(e.IdleSeconds) * time.Second), e.Deliveries})
		}
		return report.WriteTable(w, t, ro)
	}
	t := report.Table{Title: "Moved to " + rep.DLQ, Columns: []report.Column{{Name: "id", Kind: report.Key}, {Name: "dlq id", Kind: report.Key}, {Name: "consumer", Kind: report.Key}, {Name: "idle", Right: true}, {Name: "deliveries", Right: true}}}
	for _, e := range rep.Moved {
		t.Rows = append(t.Rows, []any{e.ID, e.DLQID, e.Consumer, report.Age(time.Duration(e.IdleSeconds) * time.Second), e.Deliveries})
	}
	if err := report.WriteTable(w, t, ro); err != nil {
		return err
	}
	fmt.Fprintln(o.IO.ErrOut, quarantineSummary(rep))
	return nil
}

// quarantineSummary says what happened, naming only what did: how many
// were moved, and why any were not.
func quarantineSummary(rep backend.QuarantineReport) string {
	s := fmt.Sprintf("moved %s into %s", entries(len(rep.Moved)), rep.DLQ)
	if rep.Skipped > 0 {
		s += fmt.Sprintf("; %d not moved: acked, claimed or delivered again since the pending list was read", rep.Skipped)
	}
	if rep.AckedDeleted > 0 {
		s += fmt.Sprintf("; %d only acked: already deleted from %s, there was nothing to move", rep.AckedDeleted, rep.Stream)
	}
	return s
}
