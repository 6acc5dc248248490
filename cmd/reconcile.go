package cmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/report"
)

// reconcileOptions is what reconcile checks and with what: the flags, the
// source URL in effect (reconcile works without one), the output settings
// resolved for the invocation, and what it calls out to.
type reconcileOptions struct {
	IO     *IOStreams
	Report report.Options
	// Now is the clock the verdicts are taken by.
	Now func() time.Time
	// Source is the source URL in effect, "" when none was given.
	Source string
	// OpenSession opens the source in effect with the category rules in
	// effect.
	OpenSession func(context.Context) (*session, error)
	// OpenProbe opens an effects store.
	OpenProbe func(ctx context.Context, url, query string) (effects.Probe, error)
	// LoadRunPlan reads the run start of a journal and the plan it ran
	// (--plan, else where the journal says).
	LoadRunPlan func(journal, planPath string) (redrive.Record, *redrive.Plan, error)
	// PlanSource makes a plan's own source (as it recorded it) the one
	// OpenSession opens.
	PlanSource func(recorded string)

	journal  string
	eventIDs []string
	effects  string
	query    string
	events   bool
	plan     string
}

// newReconcileCmd builds reconcile; runF, when not nil, runs instead of
// runReconcile.
func newReconcileCmd(f *Factory, runF func(context.Context, *reconcileOptions) error) *cobra.Command {
	o := &reconcileOptions{}
	c := &cobra.Command{
		Use:   "reconcile",
		Short: "Per-event and per-batch verdicts now: delivery attempts against effects",
		Long: `Give the reconciliation verdicts (applied, absorbed-duplicate, re-dead-lettered,
pending, duplicate-effect, conflict) on demand: for every batch of a run's journal
(--journal), or for the events named with --event-id. One effects round trip
per batch. With a source, events found in the DLQ count as re-dead-lettered;
without effects (none given, none in the plan) a source is all there is (a
journal's run's own when none is given), and the events not back in the DLQ
stay unverified. With --journal, each batch's
DLQ column is the sizes the run recorded around it.`,
		Example: `  dlqctl reconcile --journal plan.journal --source redis://127.0.0.1:6379/0?stream=dlq
  dlqctl reconcile --event-id E42 --event-id E43 --effects sqlite:inbox.db`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Report, o.Now, o.Source = f.IO, f.reportOptions(), f.Now, f.source
			o.OpenSession, o.OpenProbe, o.LoadRunPlan = f.openSession, effectsFor(f.Deps).OpenEffects, planFiles{f.Getenv}.loadRunPlan
			o.PlanSource = func(recorded string) { f.source = recorded }
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runReconcile(c.Context(), o)
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

func runReconcile(ctx context.Context, o *reconcileOptions) error {
	if (o.journal == "") == (len(o.eventIDs) == 0) {
		return usageErrorf("give either --journal or --event-id")
	}
	in, err := reconcileInput(o)
	if err != nil {
		return err
	}
	batches, watermarks, recorded, url, query := in.batches, in.watermarks, in.recorded, in.url, in.query
	// Without effects only a source can say anything: which events came
	// back to the DLQ (re-dead-lettered); the others stay unverified. A
	// journal's run names its own.
	if url == "" && o.Source == "" && in.source != "" && o.PlanSource != nil {
		o.PlanSource(in.source)
		o.Source = in.source
	}
	if url == "" && o.Source == "" {
		return usageErrorf("no effects URL and no source: give --effects, or --source to see which events came back to the DLQ")
	}
	c := redrive.Reconciler{Now: o.Now}
	effectsName := ""
	if url != "" {
		probe, err := o.OpenProbe(ctx, url, query)
		if err != nil {
			return err
		}
		defer probe.Close()
		c.Probe, effectsName = probe, probe.String()
	}
	if o.Source != "" {
		s, err := o.OpenSession(ctx)
		if err != nil {
			return err
		}
		defer s.src.Close()
		c.Source = s.src
	}
	doc := ReconcileDoc{Schema: "dlqctl.reconcile/v1", Effects: effectsName, Batches: []redrive.BatchReport{}}
	for i, b := range batches {
		rep := redrive.BatchReport{Index: i + 1, Size: b.Len()}
		if recorded != nil {
			// The DLQ sizes around the batch are the run's: now they
			// would be today's, the same for every batch.
			rep.Size, rep.DLQBefore, rep.DLQAfter = recorded[i].Size, recorded[i].DLQBefore, recorded[i].DLQAfter
		}
		if err := c.Batch(ctx, b, watermarks[i], 0, &rep); err != nil {
			return err
		}
		rep.ApplyGates(0)
		if !o.events {
			rep.Events = nil
		}
		doc.Batches = append(doc.Batches, rep)
	}
	ro := o.Report
	if done, err := emitJSON(o.IO.Out, ro.Format, doc); done {
		return err
	}
	if err := writeBatches(o.IO.Out, redrive.KindRedrive, doc.Batches, ro); err != nil {
		return err
	}
	if !o.events {
		return nil
	}
	return writeBatchEvents(o.IO.Out, doc.Batches, ro)
}

// reconcileSet is what reconcile checks: the moved events by batch, each
// batch's DLQ watermark, the batches as the run recorded them (nil for
// --event-id), and the effects URL and query to ask.
type reconcileSet struct {
	batches    []redrive.Moved
	watermarks []string
	recorded   []redrive.BatchReport
	url, query string
	// source is the journal's run's source ("" for --event-id).
	source string
}

// reconcileInput reads the moved events from the journal (streamed: the
// journal of a large run is never held whole, and its plan supplies the
// effects not given on the command line), or takes the --event-id list as
// one batch.
func reconcileInput(o *reconcileOptions) (reconcileSet, error) {
	in := reconcileSet{url: o.effects, query: o.query}
	if o.journal == "" {
		var es redrive.EntryList
		for _, id := range o.eventIDs {
			es = append(es, redrive.Entry{EventID: id})
		}
		in.batches, in.watermarks = []redrive.Moved{es}, []string{""}
		return in, nil
	}
	_, given, err := o.LoadRunPlan(o.journal, o.plan)
	if err != nil {
		return in, err
	}
	plan, b, w, r, err := redrive.MovedByBatchFile(o.journal, given)
	if err != nil {
		return in, replayError(err)
	}
	in.url = firstNonEmpty(in.url, plan.Params.Effects)
	in.query = firstNonEmpty(in.query, plan.Params.EffectsQuery)
	in.batches, in.watermarks, in.recorded, in.source = b, w, r, plan.Source
	return in, nil
}

// writeBatchEvents is --events: each batch's events with their verdicts.
func writeBatchEvents(w io.Writer, batches []redrive.BatchReport, ro report.Options) error {
	for _, b := range batches {
		fmt.Fprintln(w)
		t := report.Table{Title: fmt.Sprintf("Batch %d", b.Index), Columns: []report.Column{{Name: "event id", Kind: report.Key}, {Name: "attempts", Right: true}, {Name: "effects", Right: true}, {Name: "verdict", Kind: report.Key, Tone: report.VerdictTone}}}
		for _, e := range b.Events {
			t.Rows = append(t.Rows, []any{e.EventID, e.Attempts, e.Effects, e.Verdict})
		}
		if err := report.WriteTable(w, t, ro); err != nil {
			return err
		}
	}
	return nil
}
