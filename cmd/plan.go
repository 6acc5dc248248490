package cmd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/report"
)

// planFlags are the flags of `redrive plan`, `resolve plan` and the
// one-step forms.
type planFlags struct {
	kind               string
	sel                selectorFlags
	to                 string
	rate               float64
	burst              int
	ramp               string
	max                int
	effects            string
	effectsQuery       string
	settle             time.Duration
	maxFailedRatio     float64
	reason             string
	out                string
	includeQuarantined bool
	unverifiedOK       bool
	by                 string
	allowDispositions  []string
}

func (p *planFlags) register(c *cobra.Command) {
	fs := c.Flags()
	p.sel.register(fs, 0)
	fs.StringVar(&p.reason, "reason", "", "why this is done (required; kept in the plan and the journal)")
	fs.IntVar(&p.max, "max", 0, "stop once the plan holds N entries; left-out entries do not count (0: no cap)")
	fs.Lookup("limit").Usage = "look at only the oldest N entries that match; left-out ones count, so the plan may hold fewer (0: all). To cap the plan itself, use --max"
	fs.StringVar(&p.ramp, "ramp", "10,50,200", "batch sizes; the last one repeats")
	fs.BoolVar(&p.includeQuarantined, "include-quarantined", false, "also take conflict and malformed entries (never without a reason)")
	fs.StringVar(&p.by, "by", "", "who plans (default: the OS user)")
	fs.StringSliceVar(&p.allowDispositions, "allow-disposition", nil, "also take entries of these dispositions (default: only "+redrive.DefaultDisposition(p.kind)+"); recorded in the plan for the approver")
	if p.kind == redrive.KindRedrive {
		fs.StringVar(&p.to, "to", "", "destination topic/stream (default: each envelope's origin); the DLQ itself and its bookkeeping are refused")
		fs.Float64Var(&p.rate, "rate", 50, "messages per second; 0 means unlimited and must be given explicitly")
		fs.IntVar(&p.burst, "burst", 10, "rate limiter burst")
		fs.StringVar(&p.effects, "effects", "", "where the consumer records effects: sqlite:PATH, postgres://…, redis://…?attempts=H&effects=H, exec:CMD, http(s)://…")
		fs.StringVar(&p.effectsQuery, "effects-query", "", "postgres: query with $1 = the batch's event IDs (text[]) returning event_id, attempts, effects, fingerprint")
		fs.DurationVar(&p.settle, "settle", 30*time.Second, "how long to wait after a batch for its events to settle")
		fs.Float64Var(&p.maxFailedRatio, "max-failed-ratio", 0, "largest share of a batch that may be dead-lettered again")
		fs.BoolVar(&p.unverifiedOK, "unverified-ok", false, "without --effects, ramp past the first batch size anyway")
	}
}

// maxBurst is the largest --burst: the limiter's bucket, and so the chunk
// that shares one journal sync.
const maxBurst = 1000

func parseRamp(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, usageErrorf("--ramp %q: want batch sizes ≥ 1 separated by commas, e.g. 10,50,200", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// identityFrom says who runs this command, with getenv behind the
// user database: the --by flag when given (identity(flag)).
func identityFrom(getenv func(string) string) func(flag string) string {
	return func(flag string) string {
		if flag != "" {
			return flag
		}
		if u, err := user.Current(); err == nil && u.Username != "" {
			return u.Username
		}
		return firstNonEmpty(getenv("USER"), "unknown")
	}
}

// makePlan builds a plan from the flags against the open source.
// check validates the plan flags that need no source, so that a mistake
// is reported before anything connects.
func (p *planFlags) check() error {
	if strings.TrimSpace(p.reason) == "" {
		return usageErrorf("--reason is required: say why (it goes into the plan and the journal)")
	}
	if _, err := p.sel.selector(); err != nil {
		return err
	}
	if _, err := parseRamp(p.ramp); err != nil {
		return err
	}
	if p.max < 0 {
		return usageErrorf("--max %d: must be 0 or more", p.max)
	}
	if err := checkDispositions("--allow-disposition", p.allowDispositions); err != nil {
		return err
	}
	if p.kind != redrive.KindRedrive {
		return nil
	}
	if math.IsNaN(p.rate) || math.IsInf(p.rate, 0) || p.rate < 0 {
		return usageErrorf("--rate %g: want a number of messages per second ≥ 0 (0: unlimited)", p.rate)
	}
	if p.burst < 1 || p.burst > maxBurst {
		// A burst that large would let the limiter pass whole batches
		// at once: the rate would no longer hold.
		return usageErrorf("--burst %d: want 1 to %d", p.burst, maxBurst)
	}
	if p.maxFailedRatio < 0 || p.maxFailedRatio > 1 {
		return usageErrorf("--max-failed-ratio %g: must be between 0 and 1", p.maxFailedRatio)
	}
	if p.settle < 0 {
		return usageErrorf("--settle must not be negative")
	}
	return nil
}

// planMaker builds plans from the plan flags: the environment (the
// soft memory limit, who plans), when the invocation started, and the
// effects stores a --effects URL is checked with.
type planMaker struct {
	getenv  func(string) string
	started func() time.Time
	effects effectsOpener
}

// planMakerFor is the planMaker of the invocation f.
func planMakerFor(f *Factory) planMaker {
	return planMaker{getenv: f.Getenv, started: f.now, effects: effectsFor(f.Deps)}
}

// makePlan builds a plan from the flags against the open source.
func (m planMaker) makePlan(ctx context.Context, s *session, p *planFlags) (*redrive.Plan, error) {
	boundHeap(m.getenv)
	if err := p.check(); err != nil {
		return nil, err
	}
	sel, _ := p.sel.selector() // checked
	ramp, _ := parseRamp(p.ramp)
	if err := checkCategories("--category", sel.Categories, s.walker.Classifier); err != nil {
		return nil, err
	}
	mover, ok := s.src.(backend.Mover)
	if !ok {
		return nil, usageErrorf("%s: this backend cannot move entries", s.src)
	}
	params := redrive.Params{Ramp: ramp, Max: p.max, IncludeQuarantined: p.includeQuarantined, AllowDispositions: p.allowDispositions}
	if p.kind == redrive.KindRedrive {
		params.To, params.Rate, params.Burst = p.to, p.rate, p.burst
		params.Settle, params.MaxFailedRatio, params.UnverifiedOK = redrive.Duration(p.settle), p.maxFailedRatio, p.unverifiedOK
		params.EffectsQuery = p.effectsQuery
		if p.effects != "" {
			probe, err := m.effects.OpenEffects(ctx, p.effects, p.effectsQuery)
			if err != nil {
				return nil, err
			}
			params.Effects = probe.String()
			probe.Close()
		}
	}
	req := redrive.PlanRequest{
		Kind: p.kind, Selector: sel, Params: params, Reason: p.reason, PlannedBy: identityFrom(m.getenv)(p.by),
		Source: s.src.String(), IncludeQuarantined: p.includeQuarantined,
		Selectors: redrive.Selectors{
			Categories: sel.Categories, Dispositions: sel.Dispositions, Origins: sel.Origins, Error: p.sel.errorRegex, EventIDs: sel.EventIDs,
			Owners: sel.Owners, Overdue: sel.Overdue, OlderThan: p.sel.olderThan, NewerThan: p.sel.newerThan,
			MinAttempt: sel.MinAttempts, Limit: sel.Limit,
		},
	}
	if p.to != "" {
		// A --to the backend refuses would leave every entry out: say so
		// at once instead of writing a plan that moves nothing.
		if err := backend.NewGuards(s.src).Check(ctx, p.to); err != nil {
			if errors.Is(err, backend.ErrRefusedDestination) {
				return nil, usageErrorf("--to: %v", err)
			}
			return nil, err
		}
	}
	return redrive.BuildPlan(ctx, s.walker, mover, req, m.started())
}

// printPlan shows what a plan will do.
func (r planReviewer) printPlan(p *redrive.Plan, path string) error {
	ro := r.Report()
	if done, err := emitJSON(r.IO.Out, ro.Format, p); done {
		return err
	}
	// The rules in effect order the categories, nil when they do not
	// compile (the command has reported that already).
	rulesInEffect := func() *envelope.Classifier {
		cl, _ := r.Rules()
		return cl
	}
	byCat := map[string]int{}
	for e := range p.Entries.All() {
		byCat[e.Category]++
	}
	fields := []report.Field{
		{Key: "plan", Value: path},
		{Key: "kind", Value: p.Kind},
		{Key: "digest", Value: p.Digest},
		{Key: "source", Value: p.Source},
		{Key: "reason", Value: p.Reason},
		{Key: "planned by", Value: p.PlannedBy},
		{Key: "entries", Value: p.Entries.Len()},
		{Key: "excluded", Value: len(p.Excluded)},
		{Key: "dispositions", Value: strings.Join(append([]string{redrive.DefaultDisposition(p.Kind)}, p.Params.AllowDispositions...), ", ")},
		{Key: "batches", Value: joinInts(p.Params.Ramp) + " (the last repeats)"},
	}
	if p.Kind == redrive.KindRedrive {
		rateText := fmt.Sprintf("%g/s, burst %d", p.Params.Rate, p.Params.Burst)
		if p.Params.Rate == 0 {
			rateText = "unlimited"
		}
		effectsText := firstNonEmpty(p.Params.Effects, "none: batches are unverified")
		fields = append(fields,
			report.Field{Key: "destination", Value: firstNonEmpty(p.Params.To, "each envelope's origin")},
			report.Field{Key: "rate", Value: rateText},
			report.Field{Key: "effects", Value: effectsText},
			report.Field{Key: "settle", Value: time.Duration(p.Params.Settle).String()},
			report.Field{Key: "max failed ratio", Value: p.Params.MaxFailedRatio},
		)
	}
	if err := report.WriteFields(r.IO.Out, "Plan", fields, ro); err != nil {
		return err
	}
	if len(byCat) > 0 {
		if err := writeCounts(r.IO.Out, rulesInEffect(), "Planned, by category", "category", byCat, ro); err != nil {
			return err
		}
	}
	if p.Kind == redrive.KindRedrive && p.Entries.Len() > 0 {
		if err := writeDestinations(r.IO.Out, p, ro); err != nil {
			return err
		}
	}
	if len(p.Excluded) > 0 {
		if err := writeCounts(r.IO.Out, rulesInEffect(), "Left out, by disposition", "disposition", p.ExcludedByDisposition(), ro); err != nil {
			return err
		}
		fmt.Fprintln(r.IO.Out)
		return report.WriteTable(r.IO.Out, leftOutTable(p.Excluded), ro)
	}
	return nil
}

func joinInts(ns []int) string {
	var parts []string
	for _, n := range ns {
		parts = append(parts, strconv.Itoa(n))
	}
	return strings.Join(parts, ",")
}

// planOptions is what `redrive plan` and `resolve plan` write and with
// what: the plan flags, the streams, and the steps they call out to
// (opening the source, making the plan from it, printing it).
type planOptions struct {
	IO *IOStreams
	// OpenSession opens the source in effect with the category rules in
	// effect.
	OpenSession func(context.Context) (*session, error)
	// MakePlan builds the plan from the flags against the open source.
	MakePlan func(context.Context, *session, *planFlags) (*redrive.Plan, error)
	// PrintPlan shows what the plan written to path will do.
	PrintPlan func(p *redrive.Plan, path string) error

	flags planFlags
}

// newPlanCmd builds `redrive plan` or `resolve plan`; runF, when not nil,
// runs instead of runPlan.
func newPlanCmd(f *Factory, kind string, runF func(context.Context, *planOptions) error) *cobra.Command {
	o := &planOptions{flags: planFlags{kind: kind}}
	p := &o.flags
	c := &cobra.Command{
		Use:   "plan",
		Short: "Write a plan file: the selected entries, the parameters, the reason, and a digest",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.OpenSession, o.MakePlan, o.PrintPlan = f.IO, f.openSession, planMakerFor(f).makePlan, planReviewerFor(f).printPlan
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runPlan(c.Context(), o)
		},
	}
	p.register(c)
	c.Flags().StringVar(&p.out, "out", "", "plan file to write (required; never over a plan whose run has a journal beside it)")
	return c
}

// runPlan checks the flags that need no source, then makes the plan, writes
// it to --out and shows it.
func runPlan(ctx context.Context, o *planOptions) error {
	p := &o.flags
	if p.out == "" {
		return usageErrorf("--out is required: where to write the plan")
	}
	if err := p.check(); err != nil {
		return err
	}
	if err := checkPlanOut(p.out); err != nil {
		return err
	}
	s, err := o.OpenSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	plan, err := o.MakePlan(ctx, s, p)
	if err != nil {
		return err
	}
	if u, ok := s.src.(backend.UnseenCounter); ok && u.Unseen() > 0 {
		fmt.Fprintf(o.IO.ErrOut, "dlqctl: warning: %d messages in the DLQ were in flight and not seen by the scan, so this plan cannot hold them: plan again once they are visible (dlqctl stats says not_seen)\n", u.Unseen())
	}
	if plan.Entries.Len() == 0 {
		// Nothing to approve or apply: say so, and why, instead of a
		// plan that would "complete" having moved nothing.
		if err := o.PrintPlan(plan, notWritten); err != nil {
			return err
		}
		fmt.Fprintf(o.IO.ErrOut, "nothing to plan: the selection takes no entry%s; no plan written\n", leftOutNote(plan))
		return nil
	}
	if err := redrive.WritePlan(p.out, plan); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	if err := o.PrintPlan(plan, p.out); err != nil {
		return err
	}
	fmt.Fprintf(o.IO.ErrOut, "plan written to %s; next: dlqctl %s approve %s\n", p.out, p.kind, shellQuote(p.out))
	return nil
}

// notWritten stands for the plan file of a plan that takes nothing.
const notWritten = "(not written: it takes no entry)"

// leftOutNote says how many selected entries a plan left out, and where
// it shows why (the plan's own tables).
func leftOutNote(plan *redrive.Plan) string {
	if len(plan.Excluded) == 0 {
		return " (nothing matched the selectors)"
	}
	return fmt.Sprintf(" (%s left out, by disposition above)", entries(len(plan.Excluded)))
}
