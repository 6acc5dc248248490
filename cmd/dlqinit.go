package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/report"
)

// dlqInitOptions is what dlq init creates and with what: the URL (the
// argument, else the source in effect), the backends that may create a
// DLQ, and what they may read of the invocation.
type dlqInitOptions struct {
	IO     *IOStreams
	Report report.Options
	URL    string
	// Backends is the registry the URL is looked up in; Open is what a
	// backend may read from this invocation.
	Backends *backend.Registry
	Open     backend.OpenOptions

	dryRun bool
}

// newDLQCmd builds dlq and its init; runF, when not nil, runs instead of
// runDLQInit.
func newDLQCmd(f *Factory, runF func(context.Context, *dlqInitOptions) error) *cobra.Command {
	c := &cobra.Command{
		Use:   "dlq",
		Short: "Create what holds dead letters where the broker keeps none",
		Example: `  dlqctl dlq init 'nats://127.0.0.1:4222?stream=ORDERS&consumer=order-workers'
  dlqctl dlq init 'amqp://user@127.0.0.1:5672/?queue=orders&admin=http://127.0.0.1:15672'`,
		Args: cobra.NoArgs,
	}
	o := &dlqInitOptions{}
	initCmd := &cobra.Command{
		Use:   "init [URL]",
		Short: "Create a DLQ for a broker without one, or without one that reads safely",
		Long: `Create what a backend needs to hold dead letters where the broker keeps
none, or none that can be read safely. For NATS JetStream: a stream that
captures the server's MAX_DELIVERIES and MSG_TERMINATED advisories for one
stream's consumer, so that every message the consumer gave up on becomes a
DLQ entry; the URL (or --source) names the stream and the consumer. For
RabbitMQ: a stream DLQ bound to an origin queue's dead-letter exchange, read
by offset at no cost (queue= names the origin; dlq=, dlx= and
dlx_routing_key= are described in docs/rabbitmq.md). For a Kafka share
group: the group's dead-letter topic (group= names the group; topic=,
default dlq.GROUP, is made with errors.deadletterqueue.group.enable=true,
and copy=true makes the broker copy each record into its dead letter;
docs/kafka.md). Idempotent: what
exists already is reported with created=false. --dry-run says what it would
create.`,
		Example: `  dlqctl dlq init 'nats://127.0.0.1:4222?stream=ORDERS&consumer=order-workers' --dry-run
  dlqctl dlq init 'nats://127.0.0.1:4222?stream=ORDERS&consumer=order-workers' -o json
  dlqctl dlq init 'amqp://user@127.0.0.1:5672/?queue=orders&admin=http://127.0.0.1:15672'
  dlqctl dlq init 'kafka://127.0.0.1:9092?group=order-workers'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.URL = f.source
			if len(args) == 1 {
				o.URL = args[0]
			}
			o.IO, o.Report, o.Backends, o.Open = f.IO, f.reportOptions(), f.Backends, f.openOptions()
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runDLQInit(c.Context(), o)
		},
	}
	initCmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "say what would be created and change nothing")
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

// runDLQInit has the URL's backend create its DLQ (or say what it would
// create) and reports it.
func runDLQInit(ctx context.Context, o *dlqInitOptions) error {
	raw, dryRun := o.URL, o.dryRun
	if raw == "" {
		return usageErrorf("dlq init needs a URL (as an argument or --source)")
	}
	reg, err := o.Backends.Lookup(raw)
	if err != nil {
		return err
	}
	if reg.InitDLQ == nil {
		return usageErrorf("dlq init: %s keeps its own dead letters; there is nothing to create", reg.Name)
	}
	if _, err := reg.Parse(raw); err != nil {
		return err
	}
	res, err := reg.InitDLQ(ctx, raw, o.Open, dryRun)
	if err != nil {
		return err
	}
	doc := DLQInitDoc{Schema: "dlqctl.dlqinit/v1", Backend: reg.Name, DLQInit: res, DryRun: dryRun}
	if done, err := emitJSON(o.IO.Out, o.Report.Format, doc); done {
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
	if err := report.WriteTable(o.IO.Out, t, o.Report); err != nil {
		return err
	}
	if dryRun {
		fmt.Fprintln(o.IO.ErrOut, "(dry run) nothing was changed")
	}
	fmt.Fprintf(o.IO.ErrOut, "read it with --source '%s'\n", res.Source)
	return nil
}
