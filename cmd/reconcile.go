package cmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/report"
)

type reconcileOptions struct {
	journal  string
	eventIDs []string
	effects  string
	query    string
	events   bool
	plan     string
}

func newReconcileCmd(f *Factory) *cobra.Command {
	o := &reconcileOptions{}
	c := &cobra.Command{
		Use:   "reconcile",
		Short: "Per-event and per-batch verdicts now: delivery attempts against effects",
		Long: `Give the reconciliation verdicts (applied, absorbed-duplicate, re-dead-lettered,
pending, duplicate-effect, conflict) on demand: for every batch of a run's journal
(--journal), or for the events named with --event-id. One effects round trip
per batch. With a source, events found in the DLQ count as re-dead-lettered.`,
		Example: `  dlqctl reconcile --journal plan.journal --source redis://127.0.0.1:6379/0?stream=dlq
  dlqctl reconcile --event-id E42 --event-id E43 --effects sqlite:inbox.db`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return runReconcile(c.Context(), f, o)
		},
	}
	c.Flags().StringVar(&o.journal, "journal", "", "a redrive journal: reconcile each of its batches")
	c.Flags().StringArrayVar(&o.eventIDs, "event-id", nil, "an event ID to reconcile (repeatable)")
	c.Flags().StringVar(&o.effects, "effects", "", "effects URL (default: the journal's plan's)")
	c.Flags().StringVar(&o.query, "effects-query", "", "postgres: query returning event_id, attempts, effects, fingerprint for $1")
	c.Flags().BoolVar(&o.events, "events", false, "list every event's verdict, not only the counts")
	c.Flags().StringVar(&o.plan, "plan", "", "with --journal: the run's plan file (default: the path the journal recorded, then the file of that name next to the journal)")
	return c
}

// ReconcileDoc is dlqctl.reconcile/v1.
type ReconcileDoc struct {
	Schema  string                `json:"schema"`
	Effects string                `json:"effects"`
	Batches []redrive.BatchReport `json:"batches"`
}

func runReconcile(ctx context.Context, f *Factory, o *reconcileOptions) error {
	if (o.journal == "") == (len(o.eventIDs) == 0) {
		return usageErrorf("give either --journal or --event-id")
	}
	var batches []redrive.Moved
	var watermarks []string
	url, query := o.effects, o.query
	if o.journal != "" {
		// Streamed: the journal of a large run is never held whole.
		_, given, err := f.loadRunPlan(o.journal, o.plan)
		if err != nil {
			return err
		}
		plan, b, w, err := redrive.MovedByBatchFile(o.journal, given)
		if err != nil {
			return replayError(err)
		}
		url = firstNonEmpty(url, plan.Params.Effects)
		query = firstNonEmpty(query, plan.Params.EffectsQuery)
		batches, watermarks = b, w
	} else {
		var es redrive.EntryList
		for _, id := range o.eventIDs {
			es = append(es, redrive.Entry{EventID: id})
		}
		batches, watermarks = []redrive.Moved{es}, []string{""}
	}
	if url == "" {
		return usageErrorf("no effects URL: give --effects")
	}
	probe, err := f.openProbe(ctx, url, query)
	if err != nil {
		return err
	}
	defer probe.Close()
	c := redrive.Reconciler{Probe: probe, Now: f.Now}
	if f.source != "" {
		s, err := f.openSession(ctx)
		if err != nil {
			return err
		}
		defer s.src.Close()
		c.Source = s.src
	}
	doc := ReconcileDoc{Schema: "dlqctl.reconcile/v1", Effects: probe.String(), Batches: []redrive.BatchReport{}}
	for i, b := range batches {
		rep := redrive.BatchReport{Index: i + 1, Size: b.Len()}
		if err := c.Batch(ctx, b, watermarks[i], 0, &rep); err != nil {
			return err
		}
		rep.ApplyGates(0)
		if !o.events {
			rep.Events = nil
		}
		doc.Batches = append(doc.Batches, rep)
	}
	ro := f.reportOptions()
	if done, err := f.emitJSON(doc); done {
		return err
	}
	if err := writeBatches(f.IO.Out, doc.Batches, ro); err != nil {
		return err
	}
	for _, b := range doc.Batches {
		if o.events {
			fmt.Fprintln(f.IO.Out)
			t := report.Table{Title: fmt.Sprintf("Batch %d", b.Index), Columns: []report.Column{{Name: "event id", Kind: report.Key}, {Name: "attempts", Right: true}, {Name: "effects", Right: true}, {Name: "verdict", Kind: report.Key, Tone: report.VerdictTone}}}
			for _, e := range b.Events {
				t.Rows = append(t.Rows, []any{e.EventID, e.Attempts, e.Effects, e.Verdict})
			}
			if err := report.WriteTable(f.IO.Out, t, ro); err != nil {
				return err
			}
		}
	}
	return nil
}
