package cmd

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/time/rate"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/effects"
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

func (f *Factory) identity(flag string) string {
	if flag != "" {
		return flag
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return firstNonEmpty(f.Getenv("USER"), "unknown")
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

func (f *Factory) makePlan(ctx context.Context, s *session, p *planFlags) (*redrive.Plan, error) {
	boundHeap(f.Getenv)
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
			probe, err := f.openProbe(ctx, p.effects, p.effectsQuery)
			if err != nil {
				return nil, err
			}
			params.Effects = probe.String()
			probe.Close()
		}
	}
	req := redrive.PlanRequest{
		Kind: p.kind, Selector: sel, Params: params, Reason: p.reason, PlannedBy: f.identity(p.by),
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
	return redrive.BuildPlan(ctx, s.walker, mover, req, f.now())
}

func (f *Factory) openProbe(ctx context.Context, url, query string) (effects.Probe, error) {
	return effects.Open(ctx, url, effects.Options{Query: query, Password: f.Getenv("DLQCTL_EFFECTS_PASSWORD")})
}

// printPlan shows what a plan will do.
func (f *Factory) printPlan(p *redrive.Plan, path string) error {
	ro := f.reportOptions()
	if done, err := f.emitJSON(p); done {
		return err
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
	if err := report.WriteFields(f.IO.Out, "Plan", fields, ro); err != nil {
		return err
	}
	if len(byCat) > 0 {
		if err := writeCounts(f, "Planned, by category", "category", byCat, ro); err != nil {
			return err
		}
	}
	if p.Kind == redrive.KindRedrive && p.Entries.Len() > 0 {
		if err := writeDestinations(f.IO.Out, p, ro); err != nil {
			return err
		}
	}
	if len(p.Excluded) > 0 {
		if err := writeCounts(f, "Left out, by disposition", "disposition", p.ExcludedByDisposition(), ro); err != nil {
			return err
		}
		section(f)
		return report.WriteTable(f.IO.Out, leftOutTable(p.Excluded), ro)
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

// approvalKey reads the HMAC key from --key-file or DLQCTL_APPROVAL_KEY.
func (f *Factory) approvalKey(keyFile string) ([]byte, error) {
	key, err := f.trustKeys(keyFlags{keyFile: keyFile}).HMACKey()
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return key, nil
}

func newRedriveCmd(f *Factory) *cobra.Command {
	return newMoveCmd(f, redrive.KindRedrive)
}

func newResolveCmd(f *Factory) *cobra.Command {
	return newMoveCmd(f, redrive.KindResolve)
}

// newMoveCmd builds `redrive` or `resolve` with its subcommands: both are
// plan → approve → apply with a journal; resolve has no destination, rate
// or effects, and archives each envelope in the journal before removing it.
func newMoveCmd(f *Factory, kind string) *cobra.Command {
	one := &oneStepOptions{plan: planFlags{kind: kind}}
	short := "Put dead letters back on their origin in reconciled batches: plan, approve, apply (or one step)"
	if kind == redrive.KindResolve {
		short = "End entries that retrying cannot fix, each archived in the journal: plan, approve, apply (or one step)"
	}
	c := &cobra.Command{
		Use:   kind,
		Short: short,
		Long: fmt.Sprintf(`%s in one step for the ungated case: plan, show it, ask for the literal
"yes" on a terminal (or take --yes), and apply. Refused when the config sets
policy.require_approval: use "dlqctl %s plan", "approve" and "apply" then.
--dry-run prints the plan and changes nothing.`, strings.ToUpper(kind[:1])+kind[1:], kind),
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return runOneStep(c.Context(), f, one)
		},
	}
	one.plan.register(c)
	c.Flags().BoolVar(&one.yes, "yes", false, "do not ask; needed when not on a terminal")
	c.Flags().BoolVar(&one.dryRun, "dry-run", false, "print the plan and change nothing")
	c.Flags().StringVar(&one.journal, "journal", "", "journal file (default: next to the plan)")
	c.Flags().StringVar(&one.plan.out, "out", "", "where to keep the plan (default: "+kind+"-TIME.plan.json here)")
	c.AddCommand(newPlanCmd(f, kind), newPlanShowCmd(f, kind), newApproveCmd(f, kind), newApplyCmd(f, kind), newStatusCmd(f, kind), newResumeCmd(f, kind))
	return c
}

func newPlanCmd(f *Factory, kind string) *cobra.Command {
	p := &planFlags{kind: kind}
	c := &cobra.Command{
		Use:   "plan",
		Short: "Write a plan file: the selected entries, the parameters, the reason, and a digest",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if p.out == "" {
				return usageErrorf("--out is required: where to write the plan")
			}
			if err := p.check(); err != nil {
				return err
			}
			s, err := f.openSession(c.Context())
			if err != nil {
				return err
			}
			defer s.src.Close()
			plan, err := f.makePlan(c.Context(), s, p)
			if err != nil {
				return err
			}
			if err := redrive.WritePlan(p.out, plan); err != nil {
				return fmt.Errorf("write plan: %w", err)
			}
			if err := f.printPlan(plan, p.out); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "plan written to %s; next: dlqctl %s approve %s\n", p.out, kind, p.out)
			return nil
		},
	}
	p.register(c)
	c.Flags().StringVar(&p.out, "out", "", "plan file to write (required)")
	return c
}

// readPlanFor reads a plan and refuses a tampered one (exit 5).
func (f *Factory) readPlanFor(path, kind string) (*redrive.Plan, error) {
	boundHeap(f.Getenv)
	if err := wantPlan(path, kind); err != nil {
		return nil, err
	}
	plan, err := redrive.ReadPlan(path)
	if err != nil {
		return nil, withCode(ExitApproval, err)
	}
	if plan.Kind != kind {
		return nil, usageErrorf("%s is a %s plan; use dlqctl %s", path, plan.Kind, plan.Kind)
	}
	if err := plan.Verify(); err != nil {
		return nil, withCode(ExitApproval, fmt.Errorf("%s: %w", path, err))
	}
	return plan, nil
}

type applyOptions struct {
	journal     string
	skipMissing bool
	keys        keyFlags
	effects     string
	distinct    bool
}

func newApplyCmd(f *Factory, kind string) *cobra.Command {
	o := &applyOptions{}
	c := &cobra.Command{
		Use:   "apply PLAN",
		Short: "Run an approved plan in batches, journaled, reconciled after every batch",
		Long: `Run an approved plan. Refused (exit 5) when the plan is unapproved, changed
after it was made, its approval expired or does not verify, or it is stale:
an entry left the DLQ or its fingerprint changed (listed; --skip-missing goes
on without them). Every step is journaled before the next side effect;
Ctrl-C finishes the chunks already journaled (at most two) and exits 130 with the resume command.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runApply(c.Context(), f, kind, args[0], o)
		},
	}
	c.Flags().StringVar(&o.journal, "journal", "", "journal file (default: next to the plan, PLAN.journal)")
	c.Flags().BoolVar(&o.skipMissing, "skip-missing", false, "go on without entries that left the DLQ or changed")
	o.keys.register(c.Flags())
	c.Flags().BoolVar(&o.distinct, "require-distinct-approver", false, "refuse an approval by the planner (also policy.distinct_approver)")
	if kind == redrive.KindRedrive {
		c.Flags().StringVar(&o.effects, "effects", "", "the effects URL with its password, when the plan's has one hidden")
	}
	return c
}

func runApply(ctx context.Context, f *Factory, kind, path string, o *applyOptions) error {
	plan, err := f.readPlanFor(path, kind)
	if err != nil {
		return err
	}
	if err := f.planApprovals(plan, path); err != nil {
		return err
	}
	pol, err := f.approvalPolicy(o.keys, o.distinct)
	if err != nil {
		return err
	}
	approvals, err := plan.CheckApprovals(pol)
	if err != nil {
		return withCode(ExitApproval, fmt.Errorf("%s: not approved: %w", path, err))
	}
	// An HMAC-approved run's journal is chained with the approval key; a
	// signed run's host holds no secret to chain it with (docs/journal.md).
	var key []byte
	if !approvals[0].Signed() {
		if key, err = pol.KeyOf(approvals[0].By); err != nil {
			return withCode(ExitApproval, err)
		}
	}
	journal := firstNonEmpty(o.journal, redrive.DefaultJournalPath(path))
	return f.applyPlan(ctx, plan, path, journal, approvals, key, o.skipMissing, o.effects, hintFlags{keys: o.keys})
}

// applyPlan checks the plan against the DLQ and runs it. key is the
// approval key the journal is chained with (nil: a signed run, or a
// one-step run without one, whose journal is not chained).
func (f *Factory) applyPlan(ctx context.Context, plan *redrive.Plan, planPath, journalPath string, approvals []redrive.Approval, key []byte, skipMissing bool, effectsURL string, hint hintFlags) (err error) {
	runID := redrive.NewRunID(f.now(), randomSuffix())
	unlock, err := f.lockJournal(journalPath, runID)
	if err != nil {
		return err
	}
	defer unlock()
	if err := f.restartNeverStarted(journalPath); err != nil {
		return err
	}
	if _, err := os.Lstat(journalPath); err == nil {
		// The run started: whatever left the DLQ since was most likely
		// moved by it, and only the journal knows. Checked before the plan
		// is compared with the DLQ, which would call it stale.
		return f.startedAlready(plan, planPath, journalPath, hint)
	}
	s, err := f.openSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	if s.src.String() != plan.Source {
		return usageErrorf("the plan was made for %s, but the source is %s", plan.Source, s.src)
	}
	ctx, release, err := f.leaseDLQ(ctx, s.src, runID)
	if err != nil {
		return err
	}
	defer func() { err = f.releaseAfter(err, release) }()
	missing, changed, err := redrive.Stale(ctx, s.src, plan)
	if err != nil {
		return err
	}
	if len(missing) == plan.Entries.Len() && len(missing) > 0 {
		// --skip-missing would go on with nothing.
		return withCode(ExitApproval, fmt.Errorf("plan is stale: none of its %s is in the DLQ any more; was it applied already (with another --journal than %s)? Its journal's run: dlqctl %s status JOURNAL%s", entries(len(missing)), journalPath, plan.Kind, unseenNote(s.src, len(missing))))
	}
	if (len(missing) > 0 || len(changed) > 0) && !skipMissing {
		return withCode(ExitApproval, fmt.Errorf("plan is stale: %s (--skip-missing goes on without them)%s", staleText(missing, changed), unseenNote(s.src, len(missing))))
	}
	eng, closeEng, err := f.engine(ctx, s.src, plan, effectsURL)
	if err != nil {
		return err
	}
	defer closeEng()
	j, err := redrive.CreateJournal(journalPath, f.Now)
	if err != nil {
		return err
	}
	defer j.Close()
	eng.Journal = j
	if len(key) > 0 {
		j.Chain(redrive.JournalKey(key, runID), "")
	}
	st, err := eng.Start(runID, plan, planPath, s.src.String(), f.identity(""), approvals)
	if err != nil {
		return err
	}
	if err := eng.MarkStale(st, missing, changed); err != nil {
		return err
	}
	f.noteWeakMoves(s.src, plan)
	fmt.Fprintf(f.IO.ErrOut, "run %s: %s, journal %s\n", runID, entries(plan.Entries.Len()), journalPath)
	return f.finishRun(ctx, eng, st, journalPath, hint)
}

// restartNeverStarted removes a journal whose run never started (its
// run-start record torn by a crash, before anything moved), so that apply
// starts the run again, as resume advises for it.
func (f *Factory) restartNeverStarted(journalPath string) error {
	never, err := redrive.NeverStarted(journalPath)
	if errors.Is(err, os.ErrNotExist) || (err == nil && !never) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.Remove(journalPath); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "journal %s holds no complete record: a crash tore its run-start before anything was moved; starting the run again\n", journalPath)
	return nil
}

// unseenNote says, when entries are missing and the scan could not see
// some messages (SQS: in flight, held by another reader or by a killed
// scan or move), that those may be the missing ones.
func unseenNote(src backend.Source, missing int) string {
	u, ok := src.(unseenCounter)
	if !ok || missing == 0 || u.Unseen() == 0 {
		return ""
	}
	return fmt.Sprintf("; %d messages were in flight and not seen (another reader, or a killed dlqctl scan or move, holds them): the missing entries may be among them, so retry once their visibility timeout has run out", u.Unseen())
}

func staleText(missing, changed []redrive.Entry) string {
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("%s no longer in the DLQ (%s)", entries(len(missing)), entryIDs(missing)))
	}
	if len(changed) > 0 {
		parts = append(parts, fmt.Sprintf("%s with another fingerprint now (%s)", entries(len(changed)), entryIDs(changed)))
	}
	return strings.Join(parts, "; ")
}

func entryIDs(es []redrive.Entry) string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return firstIDs(ids, 10)
}

// engine builds the redrive engine for plan over src.
func (f *Factory) engine(ctx context.Context, src backend.Source, plan *redrive.Plan, effectsURL string) (*redrive.Engine, func(), error) {
	mover, ok := src.(backend.Mover)
	if !ok {
		return nil, nil, usageErrorf("%s: this backend cannot move entries", src)
	}
	eng := &redrive.Engine{Source: src, Mover: mover, Now: f.Now, Observer: f.runObserver(plan), Crash: f.CrashHook}
	closeFn := func() {}
	if plan.Kind == redrive.KindRedrive {
		if plan.Params.Rate > 0 {
			eng.Limiter = rate.NewLimiter(rate.Limit(plan.Params.Rate), plan.Params.Burst)
		}
		if plan.Params.Effects != "" {
			url := plan.Params.Effects
			if effectsURL != "" {
				url = effectsURL
			}
			probe, err := f.openProbe(ctx, url, plan.Params.EffectsQuery)
			if err != nil {
				return nil, nil, err
			}
			if probe.String() != plan.Params.Effects {
				probe.Close()
				return nil, nil, usageErrorf("--effects %s is not the plan's %s", probe, plan.Params.Effects)
			}
			eng.Probe = probe
			closeFn = func() { probe.Close() }
		}
	}
	return eng, closeFn, nil
}

// finishRun runs the engine and turns the outcome into output and an exit code.
func (f *Factory) finishRun(ctx context.Context, eng *redrive.Engine, st *redrive.State, journalPath string, hint hintFlags) error {
	if v, ok := eng.Observer.(*runView); ok {
		v.begin(st)
		v.watch(eng, time.Duration(st.Plan.Params.Settle))
	}
	runErr := eng.Run(ctx, st)
	hint.pastGate = st.Status == redrive.StatusHalted
	cmdline := f.resumeCommand(st.Plan.Kind, journalPath, hint)
	resume := cmdline + secretsNote(st.Plan)
	doc := f.liveRunDoc(st, journalPath)
	if doc.Resume != "" {
		doc.Resume = cmdline
	}
	if err := f.printRun(doc); err != nil {
		return err
	}
	switch {
	case errors.Is(runErr, redrive.ErrDeadline):
		return withCode(ExitError, fmt.Errorf("--timeout reached; stopped after the step in flight, the journal is consistent. Resume with: %s", resume))
	case errors.Is(runErr, redrive.ErrInterrupted):
		return withCode(ExitInterrupted, fmt.Errorf("interrupted after the step in flight; the journal is consistent. Resume with: %s", resume))
	case runErr != nil:
		return withCode(ExitError, fmt.Errorf("%w\nthe journal is consistent. Resume with: %s", runErr, resume))
	case st.Status == redrive.StatusHalted:
		return f.haltError(st, doc, runPlanPath(st, ""), journalPath, hint)
	case doc.Gone+doc.Skipped+doc.Failed > 0:
		retry := ""
		if doc.Failed > 0 {
			retry = "; try the failed ones again with: " + resume + " --retry-failed"
		}
		return withCode(ExitPartial, fmt.Errorf("moved %d; not moved: %d gone from the DLQ, %d changed, %d failed (see %s)%s", doc.Moved, doc.Gone, doc.Skipped, doc.Failed, journalPath, retry))
	}
	if advice := f.cameBackAdvice(st, journalPath); advice != "" {
		// The gates let them pass (--max-failed-ratio), but they are in
		// the DLQ again.
		fmt.Fprintln(f.IO.ErrOut, "dlqctl: note: "+strings.TrimPrefix(advice, "\n"))
	}
	return nil
}

// noteWeakMoves says where the backend cannot move to a destination as
// strongly as usual (Redis Cluster: DLQ and destination in different hash
// slots take a journaled two-step move instead of one atomic script).
func (f *Factory) noteWeakMoves(src backend.Source, plan *redrive.Plan) {
	n, ok := src.(backend.MoveNoter)
	if !ok {
		return
	}
	seen := map[string]bool{}
	for e := range plan.Entries.All() {
		if e.Dest != "" && !seen[e.Dest] {
			seen[e.Dest] = true
			if note := n.MoveNote(e.Dest); note != "" {
				fmt.Fprintln(f.IO.ErrOut, "dlqctl: note: "+note)
			}
		}
	}
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return fmt.Sprintf("%x", b)
}
