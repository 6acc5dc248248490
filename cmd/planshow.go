package cmd

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/redrive"
	"github.com/dlqctl/dlqctl/report"
	"github.com/dlqctl/dlqctl/trust"
)

// planShowOptions is what plan show reviews and with what: the plan, the
// key flags its approvals are judged with, the output settings, and the
// steps it calls out to.
type planShowOptions struct {
	IO     *IOStreams
	Report report.Options
	// Kind is redrive or resolve; Plan is the plan file.
	Kind string
	Plan string
	// PlanApprovals adds the approvals handed over beside the plan.
	PlanApprovals func(plan *redrive.Plan, path string) error
	// Reviewer writes the approver's view of a plan.
	Reviewer planReviewer

	keys keyFlags
}

// newPlanShowCmd builds `redrive show` or `resolve show`; runF, when not
// nil, runs instead of runPlanShow.
func newPlanShowCmd(f *Factory, kind string, runF func(context.Context, *planShowOptions) error) *cobra.Command {
	o := &planShowOptions{Kind: kind}
	c := &cobra.Command{
		Use:   "show PLAN",
		Short: "What an approver reviews: reason, planner, source, parameters, entries, destinations, exclusions, approvals",
		Long: fmt.Sprintf(`Show a %s plan as an approver reviews it: the reason, who planned it and
when, the source, the parameters, the entries by category and disposition,
what was left out and why, and the approvals so far (each judged as apply
would judge it here, and how many more are needed). It never changes the
plan. -o markdown writes it for a ticket; -o json prints the plan document.
A plan changed after it was made is shown, then refused with exit 5.`, kind),
		Example: fmt.Sprintf(`  dlqctl %[1]s show %[1]s.plan.json
  dlqctl %[1]s show %[1]s.plan.json -o markdown > ticket.md
  dlqctl %[1]s show %[1]s.plan.json --jq '.entries | length'`, kind),
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Report, o.Plan = f.IO, f.reportOptions(), args[0]
			o.PlanApprovals, o.Reviewer = planApprovals, planReviewerFor(f)
			if runF != nil {
				return runF(c.Context(), o)
			}
			return runPlanShow(c.Context(), o)
		},
	}
	o.keys.register(c.Flags())
	return c
}

// runPlanShow shows the plan (the review, or its document in JSON), then
// refuses one changed after it was made.
func runPlanShow(_ context.Context, o *planShowOptions) error {
	kind, path := o.Kind, o.Plan
	if err := wantPlan(path, kind); err != nil {
		return err
	}
	plan, err := redrive.ReadPlan(path)
	if err != nil {
		return withCode(ExitApproval, err)
	}
	if plan.Kind != kind {
		return usageErrorf("%s is a %s plan; use dlqctl %s show %s", path, plan.Kind, plan.Kind, path)
	}
	ro := o.Report
	tampered := plan.Verify()
	if err := o.PlanApprovals(plan, path); err != nil {
		return err
	}
	switch ro.Format {
	case report.FormatJSON, report.FormatNDJSON:
		_, err = emitJSON(o.IO.Out, ro.Format, plan)
	default:
		err = o.Reviewer.write(o.IO.Out, plan, path, o.keys, ro)
	}
	if err != nil {
		return err
	}
	if tampered != nil {
		return withCode(ExitApproval, fmt.Errorf("%s: %w", path, tampered))
	}
	return nil
}

// planReviewer writes the approver's view of a plan (plan show, and
// approve before it approves): the category rules give each category's
// disposition, the approval policy judges the approvals so far.
type planReviewer struct {
	// IO and Report are where and how approve shows the plan before it
	// approves (reviewBeforeApproval).
	IO     *IOStreams
	Report func() report.Options
	// Rules compiles the category rules in effect.
	Rules func() (*envelope.Classifier, error)
	// ApprovalPolicy is the policy approvals are checked against, from the
	// key flags, the environment and the config.
	ApprovalPolicy func(k keyFlags, distinct bool) (redrive.ApprovalPolicy, error)
}

// planReviewerFor is the planReviewer of the invocation f: its streams,
// output settings, rules and approval policy.
func planReviewerFor(f *Factory) planReviewer {
	return planReviewer{IO: f.IO, Report: f.reportOptions, Rules: f.classifier, ApprovalPolicy: approvalSettingsFor(f).approvalPolicy}
}

// writePlanReview is the approver's view of a plan: the headline fields,
// then entries by category and disposition, exclusions grouped by why
// (then each one), and the approvals so far.
func (r planReviewer) write(w io.Writer, p *redrive.Plan, path string, keys keyFlags, ro report.Options) error {
	if err := report.WriteFields(w, "Plan", planFields(p, path), ro); err != nil {
		return err
	}
	if err := r.writeEntriesByCategory(w, p, ro); err != nil {
		return err
	}
	if p.Kind == redrive.KindRedrive && p.Entries.Len() > 0 {
		if err := writeDestinations(w, p, ro); err != nil {
			return err
		}
	}
	if err := writeLeftOut(w, p.Excluded, ro); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return r.writeApprovals(w, p, keys, ro)
}

// planFields are the headline fields of a plan review: what it is, who
// made it, whether it is intact and how it will move.
func planFields(p *redrive.Plan, path string) []report.Field {
	integrity := "verified: the content matches the digest"
	if err := p.Verify(); err != nil {
		integrity = "CHANGED after it was made: " + err.Error()
	}
	fields := []report.Field{
		{Key: "plan", Value: path},
		{Key: "kind", Value: p.Kind},
		{Key: "reason", Value: p.Reason},
		{Key: "planned by", Value: p.PlannedBy},
		{Key: "planned at", Value: p.PlannedAt},
		{Key: "source", Value: p.Source},
		{Key: "digest", Value: p.Digest},
		{Key: "integrity", Value: integrity},
		{Key: "entries", Value: p.Entries.Len()},
		{Key: "left out", Value: len(p.Excluded)},
		{Key: "batches", Value: joinInts(p.Params.Ramp) + " (the last repeats)"},
	}
	if p.Params.Max > 0 {
		fields = append(fields, report.Field{Key: "max", Value: p.Params.Max})
	}
	if p.Kind == redrive.KindRedrive {
		rateText := fmt.Sprintf("%g/s, burst %d", p.Params.Rate, p.Params.Burst)
		if p.Params.Rate == 0 {
			rateText = "unlimited"
		}
		fields = append(fields,
			report.Field{Key: "destination", Value: firstNonEmpty(p.Params.To, "each envelope's origin")},
			report.Field{Key: "rate", Value: rateText},
			report.Field{Key: "effects", Value: firstNonEmpty(p.Params.Effects, "none: batches are unverified")},
			report.Field{Key: "settle", Value: time.Duration(p.Params.Settle).String()},
			report.Field{Key: "max failed ratio", Value: p.Params.MaxFailedRatio},
		)
		if p.Params.IncludeQuarantined {
			fields = append(fields, report.Field{Key: "include quarantined", Value: "yes: conflict and malformed entries may be moved"})
		}
		if p.Params.UnverifiedOK {
			fields = append(fields, report.Field{Key: "unverified ok", Value: "yes: ramps without effects"})
		}
	}
	if sel := selectorsText(p.Selectors); sel != "" {
		fields = append(fields, report.Field{Key: "selected by", Value: sel})
	}
	return fields
}

// writeEntriesByCategory counts the plan's entries by category and
// disposition, in the order they first appear.
func (r planReviewer) writeEntriesByCategory(w io.Writer, p *redrive.Plan, ro report.Options) error {
	cl, err := r.Rules()
	if err != nil {
		return err
	}
	type group struct{ category, disposition string }
	counts := map[group]int{}
	var order []group
	for e := range p.Entries.All() {
		d, _ := cl.Disposition(e.Category)
		g := group{e.Category, d}
		if counts[g] == 0 {
			order = append(order, g)
		}
		counts[g]++
	}
	fmt.Fprintln(w)
	t := report.Table{Title: "Entries by category", Columns: []report.Column{
		{Name: "category", Kind: report.Key}, {Name: "disposition", Kind: report.Key, Tone: report.DispositionTone},
		{Name: "entries", Right: true},
	}}
	for _, g := range order {
		t.Rows = append(t.Rows, []any{g.category, g.disposition, counts[g]})
	}
	return report.WriteTable(w, t, ro)
}

// writeLeftOut shows the excluded entries grouped by why, then each one;
// nothing when none was left out.
func writeLeftOut(w io.Writer, excluded []redrive.Excluded, ro report.Options) error {
	if len(excluded) == 0 {
		return nil
	}
	whys := map[string]int{}
	var whyOrder []string
	for _, x := range excluded {
		k := whyKind(x.Why)
		if whys[k] == 0 {
			whyOrder = append(whyOrder, k)
		}
		whys[k]++
	}
	fmt.Fprintln(w)
	t := report.Table{Title: "Left out, by why", Columns: []report.Column{{Name: "why"}, {Name: "entries", Right: true}}}
	for _, k := range whyOrder {
		t.Rows = append(t.Rows, []any{k, whys[k]})
	}
	if err := report.WriteTable(w, t, ro); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return report.WriteTable(w, leftOutTable(excluded), ro)
}

// writeApprovals lists the plan's approvals with whether each holds under
// the trust policy, then how many more are needed.
func (r planReviewer) writeApprovals(w io.Writer, p *redrive.Plan, keys keyFlags, ro report.Options) error {
	if len(p.Approvals) == 0 {
		return report.WriteLine(w, report.ToneWarn, "Approvals: none yet", ro)
	}
	t := report.Table{Title: "Approvals", Columns: []report.Column{
		{Name: "by", Kind: report.Key}, {Name: "key", Kind: report.Key}, {Name: "at"}, {Name: "expires"},
		{Name: "state", Kind: report.Key, Tone: approvalTone, MaxWidth: 120},
	}}
	verdicts, needed, perr := r.judgeApprovals(p, keys)
	for _, v := range verdicts {
		a := v.Approval
		key := a.Key
		if !a.Signed() {
			key = "hmac"
		}
		state := verdictState(v)
		if perr != nil {
			state = "not checked: " + perr.Error()
		}
		t.Rows = append(t.Rows, []any{a.By, key, a.At.Time, a.ExpiresAt.Time, state})
	}
	if err := report.WriteTable(w, t, ro); err != nil {
		return err
	}
	if perr != nil {
		return nil
	}
	tone, line := report.ToneGood, "Approvals: enough, 0 more needed"
	if needed > 0 {
		tone, line = report.ToneWarn, fmt.Sprintf("Approvals: %d more needed (by distinct approvers)", needed)
	}
	return report.WriteLine(w, tone, line, ro)
}

// judgeApprovals checks a plan's approvals as apply would now, on this
// host's allowed_signers and keys, for the review.
func (r planReviewer) judgeApprovals(p *redrive.Plan, keys keyFlags) ([]redrive.Verdict, int, error) {
	pol, err := r.ApprovalPolicy(keys, false)
	if err != nil {
		return nil, 0, err
	}
	v, needed := p.Judge(pol)
	return v, needed, nil
}

// writeDestinations lists where the plan's entries go, with counts, most
// first: a dead letter names its own origin, so the approver sees every
// place a redrive will write to, not only --to.
func writeDestinations(w io.Writer, p *redrive.Plan, ro report.Options) error {
	counts := map[string]int{}
	for e := range p.Entries.All() {
		counts[e.Dest]++
	}
	dests := make([]string, 0, len(counts))
	for d := range counts {
		dests = append(dests, d)
	}
	sort.Slice(dests, func(i, j int) bool {
		if counts[dests[i]] != counts[dests[j]] {
			return counts[dests[i]] > counts[dests[j]]
		}
		return dests[i] < dests[j]
	})
	fmt.Fprintln(w)
	t := report.Table{Title: "Destinations", Columns: []report.Column{{Name: "destination", Kind: report.Key}, {Name: "entries", Right: true}}}
	for _, d := range dests {
		t.Rows = append(t.Rows, []any{firstNonEmpty(d, "(none)"), counts[d]})
	}
	return report.WriteTable(w, t, ro)
}

// verdictState is an approval's state as the reviews show it: "valid",
// why it is not, or why it does not count.
func verdictState(v redrive.Verdict) string {
	switch {
	case v.Problem != "":
		return v.Problem
	case v.Uncounted != "":
		return "not counted: " + v.Uncounted
	}
	return "valid"
}

func approvalTone(s string) report.Tone {
	switch {
	case s == "valid":
		return report.ToneGood
	case strings.HasPrefix(s, "not counted"):
		return report.ToneWarn
	}
	return report.ToneBad
}

// whyKind groups exclusion reasons by their first clause ("held back",
// "no destination", "disposition …"), which the detail after ":" varies.
func whyKind(why string) string {
	k, _, _ := strings.Cut(why, ":")
	return k
}

func selectorsText(s redrive.Selectors) string {
	var parts []string
	add := func(flag string, vals ...string) {
		for _, v := range vals {
			if v != "" {
				parts = append(parts, flag+" "+v)
			}
		}
	}
	add("--category", s.Categories...)
	add("--origin", s.Origins...)
	add("--error", s.Error)
	add("--event-id", s.EventIDs...)
	add("--owner", s.Owners...)
	add("--older-than", s.OlderThan)
	add("--newer-than", s.NewerThan)
	if s.Overdue {
		parts = append(parts, "--overdue")
	}
	if s.MinAttempt > 0 {
		parts = append(parts, fmt.Sprintf("--min-attempts %d", s.MinAttempt))
	}
	if s.Limit > 0 {
		parts = append(parts, fmt.Sprintf("--limit %d", s.Limit))
	}
	return strings.Join(parts, " ")
}

// checkApprovalKey refuses a missing, short or patterned HMAC key with how
// to make one.
func checkApprovalKey(key []byte) error {
	if err := trust.CheckKey(key); err != nil {
		return usageErrorf("%w", err)
	}
	return nil
}

// reviewBeforeApproval shows the approver what they sign (on stdout, in
// the human formats) and refuses a second approval by the same person
// while their first is in force: one person approving twice is still one
// approval. An expired one, or one that does not verify with this key, is
// renewed; --again records a fresh one anyway (going on past a gate needs
// an approval given after the halt). inForce says whether an earlier
// approval is this approver's own and in force.
func (r planReviewer) reviewBeforeApproval(p *redrive.Plan, path, by string, keys keyFlags, inForce func(redrive.Approval) bool, again bool) error {
	for _, a := range p.Approvals {
		if a.By == by && !again && inForce(a) {
			return withCode(ExitApproval, fmt.Errorf("%s already approved %s at %s, in force until %s; a second approval by the same approver adds nothing (another approver: --by NAME; a fresh one after a halt: --again)",
				by, path, a.At.UTC().Format(time.RFC3339), a.ExpiresAt.UTC().Format(time.RFC3339)))
		}
	}
	ro := r.Report()
	if ro.Format.IsJSON() {
		return nil
	}
	if err := r.write(r.IO.Out, p, path, keys, ro); err != nil {
		return err
	}
	fmt.Fprintln(r.IO.Out)
	return nil
}

// leftOutTable lists a plan's left-out entries. The older entry that holds
// one back is the entry to act on next, so it has a column of its own that
// is never cut (inside the why it would be the first thing cut at 80
// columns).
func leftOutTable(excluded []redrive.Excluded) report.Table {
	t := report.Table{Title: "Left out", Columns: []report.Column{
		{Name: "id", Kind: report.Key}, {Name: "event id", Kind: report.Key}, {Name: "why", MaxWidth: 90},
	}}
	heldBy := false
	for _, x := range excluded {
		heldBy = heldBy || x.HeldBy != ""
	}
	if heldBy {
		// Last, so that piped readers of the first three columns keep them.
		t.Columns = append(t.Columns, report.Column{Name: "held by", Kind: report.Key})
	}
	for _, x := range excluded {
		row := []any{x.ID, x.EventID, x.Why}
		if heldBy {
			row = append(row, x.HeldBy)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}
