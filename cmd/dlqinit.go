package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/report"
)

func newDLQCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:     "dlq",
		Short:   "Create what holds dead letters where the broker keeps none",
		Example: `  dlqctl dlq init 'nats://127.0.0.1:4222?stream=ORDERS&consumer=order-workers'`,
		Args:    cobra.NoArgs,
	}
	var dryRun bool
	initCmd := &cobra.Command{
		Use:   "init [URL]",
		Short: "Create a DLQ for a broker without one (NATS JetStream: an advisory stream for a consumer)",
		Long: `Create what a backend needs to hold dead letters where the broker keeps
none. For NATS JetStream: a stream that captures the server's MAX_DELIVERIES
and MSG_TERMINATED advisories for one stream's consumer, so that every
message the consumer gave up on becomes a DLQ entry. The URL (or --source)
names the stream and the consumer. Idempotent: what exists already is
reported with created=false. --dry-run says what it would create.`,
		Example: `  dlqctl dlq init 'nats://127.0.0.1:4222?stream=ORDERS&consumer=order-workers' --dry-run
  dlqctl dlq init 'nats://127.0.0.1:4222?stream=ORDERS&consumer=order-workers' -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			raw := f.source
			if len(args) == 1 {
				raw = args[0]
			}
			return runDLQInit(c.Context(), f, raw, dryRun)
		},
	}
	initCmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be created and change nothing")
	c.AddCommand(initCmd)
	return c
}

// DLQInitDoc is dlqctl.dlqinit/v1.
type DLQInitDoc struct {
	Schema  string `json:"schema"`
	Backend string `json:"backend"`
	backend.DLQInit
	DryRun bool `json:"dry_run"`
}

func runDLQInit(ctx context.Context, f *Factory, raw string, dryRun bool) error {
	if raw == "" {
		return usageErrorf("dlq init needs a URL (as an argument or --source)")
	}
	reg, err := f.backends().Lookup(raw)
	if err != nil {
		return err
	}
	if reg.InitDLQ == nil {
		return usageErrorf("dlq init: %s keeps its own dead letters; there is nothing to create", reg.Name)
	}
	if _, err := reg.Parse(raw); err != nil {
		return err
	}
	res, err := reg.InitDLQ(ctx, raw, f.openOptions(), dryRun)
	if err != nil {
		return err
	}
	doc := DLQInitDoc{Schema: "dlqctl.dlqinit/v1", Backend: reg.Name, DLQInit: res, DryRun: dryRun}
	if done, err := f.emitJSON(doc); done {
		return err
	}
	state := "exists already"
	switch {
	case dryRun && res.Created:
		state = "would be created"
	case res.Created:
		state = "created"
	}
	t := report.Table{Title: "DLQ", Columns: []report.Column{{Name: "stream", Kind: report.Key}, {Name: "subjects"}, {Name: "state"}}}
	t.Rows = append(t.Rows, []any{res.Stream, strings.Join(res.Subjects, " "), state})
	if err := report.WriteTable(f.IO.Out, t, f.reportOptions()); err != nil {
		return err
	}
	if dryRun {
		fmt.Fprintln(f.IO.ErrOut, "(dry run) nothing was changed")
	}
	fmt.Fprintf(f.IO.ErrOut, "read it with --source '%s'\n", res.Source)
	return nil
}
