package cmd

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/redrive"
)

// A run's events that the consumer dead-lettered again are in the DLQ
// once more, and only a new plan sends them again. The re-plan that
// dlqctl prints is the run's own plan (its selectors, gates, rate, ramp,
// effects and dispositions) narrowed to those events, widened where they
// came back as something the plan would not take (another category, a
// disposition it did not allow, an error its --error does not match, too
// young for its --older-than), and tried against the DLQ before it is
// printed: a command that would plan nothing is never printed.

// replan is the advice for the events that came back: what changed about
// them (sentences), the notes to read before the command, and the command
// ("" when no plan would take any of them now).
type replan struct {
	said    []string
	notes   []string
	command string
	// unread says why the DLQ could not be read to try a plan (""
	// when it was read); look is then the command that shows the events.
	unread, look string
}

// cameBackNow is one event that came back, as the DLQ holds it now: its
// entries there with their categories (none: it left the DLQ since), and
// the category it had when it was planned.
type cameBackNow struct {
	id      string
	planned string
	items   []inspect.Item
}

// replanner plans again the events that came back in a run: it reads the
// run's DLQ, tries a plan of them, and writes the command that makes it.
type replanner struct {
	lines   commandLines
	started func() time.Time
	// source is the source in effect ("" for none); openAt opens a
	// session on the DLQ at url with this invocation's settings.
	source func() string
	openAt func(ctx context.Context, url string) (*session, error)
	maker  planMaker
}

// replannerFor is the replanner of the invocation f.
func replannerFor(f *Factory) replanner {
	return replanner{lines: commandLines{global: f.Global, backends: f.Backends}, started: f.now,
		source: func() string { return f.source }, openAt: f.openSessionAt, maker: planMakerFor(f)}
}

// planReplan builds the re-plan of the events ids that came back in the
// run st of the plan at planPath, reading the run's DLQ.
func (rp replanner) planReplan(ctx context.Context, st *redrive.State, planPath string, ids []string) replan {
	p := st.Plan
	flags := planFlagsOf(p)
	flags.sel.eventIDs, flags.sel.limit, flags.max = ids, 0, 0
	flags.reason = againReason(p.Reason)
	flags.out = againPlanPath(p.Kind, planPath, func() string { return rp.started().Format("20060102T150405Z") })
	r := replan{notes: rp.lines.secretNotes(p)}
	unread := func(err error) replan {
		r.unread, r.look = err.Error(), rp.lines.listCommand(p, ids)
		return r
	}
	s, closeSession, err := rp.runSession(ctx, p.Source)
	if err != nil {
		return unread(err)
	}
	defer closeSession()
	events, err := lookUpCameBack(ctx, s, p, ids)
	if err != nil {
		return unread(err)
	}
	var found []string
	for _, ev := range events {
		if len(ev.items) == 0 {
			r.said = append(r.said, ev.id+" is no longer in the DLQ: it was moved or removed since.")
			continue
		}
		found = append(found, ev.id)
	}
	if len(found) == 0 {
		return r
	}
	flags.sel.eventIDs = found
	r.said = append(r.said, describeCameBack(p, events)...)
	r.notes = append(r.notes, widen(&flags, p, events, rp.started())...)
	dry := flags
	dry.effects, dry.effectsQuery = "", "" // the selection does not depend on them
	trial, err := rp.maker.makePlan(ctx, s, &dry)
	if err != nil {
		return unread(err)
	}
	taken := map[string]bool{}
	for e := range trial.Entries.All() {
		taken[e.EventID] = true
	}
	why := map[string]string{}
	for _, x := range trial.Excluded {
		if _, ok := why[x.EventID]; !ok {
			why[x.EventID] = x.Why
		}
	}
	var left []string
	for _, id := range found {
		if !taken[id] {
			left = append(left, fmt.Sprintf("%s (%s)", id, firstNonEmpty(why[id], "not selected")))
		}
	}
	if trial.Entries.Len() == 0 {
		what := "any of them as they are"
		if len(found) == 1 {
			what = "it as it is"
		}
		r.said = append(r.said, "No plan would take "+what+" now: "+strings.Join(left, "; ")+".")
		return r
	}
	if len(left) > 0 {
		r.said = append(r.said, "A new plan would leave out "+strings.Join(left, "; ")+".")
	}
	r.command = rp.lines.planCommand(p, &flags)
	return r
}

// runSession is a session on the run's DLQ, recorded as recorded: the
// source in effect when it is that one, else the recorded one (closed by
// the returned func).
func (rp replanner) runSession(ctx context.Context, recorded string) (*session, func(), error) {
	s, err := rp.openAt(ctx, firstNonEmpty(rp.source(), recorded))
	if err != nil {
		return nil, nil, err
	}
	if s.src.String() != recorded {
		// The source in effect (DLQCTL_SOURCE, say) is another DLQ: what
		// came back is not there.
		s.src.Close()
		return nil, nil, fmt.Errorf("the source in effect is %s, not the run's %s", s.src, recorded)
	}
	return s, func() { s.src.Close() }, nil
}

// lookUpCameBack finds the events ids in the DLQ, with the category each
// had in plan p.
func lookUpCameBack(ctx context.Context, s *session, p *redrive.Plan, ids []string) ([]cameBackNow, error) {
	events := make([]cameBackNow, len(ids))
	at := map[string]int{}
	for i, id := range ids {
		events[i].id = id
		at[id] = i
	}
	for e := range p.Entries.All() {
		if i, ok := at[e.EventID]; ok && events[i].planned == "" {
			events[i].planned = e.Category
		}
	}
	conflicts, err := s.walker.Conflicts(ctx)
	if err != nil {
		return nil, err
	}
	_, err = s.walker.Walk(ctx, conflicts, inspect.Selector{EventIDs: ids}, "", func(it inspect.Item) error {
		i := at[it.Envelope.EventID]
		events[i].items = append(events[i].items, it)
		return nil
	})
	return events, err
}

// describeCameBack says, for each kind of return (the category planned,
// the category now), what it means, naming the events.
func describeCameBack(p *redrive.Plan, events []cameBackNow) []string {
	type turn struct{ from, to, disposition string }
	type group struct {
		ids       []string
		lastError string // of the first of them
	}
	var order []turn
	groups := map[turn]*group{}
	for _, ev := range events {
		if len(ev.items) == 0 {
			continue
		}
		it := ev.items[len(ev.items)-1] // the newest: the one that came back
		t := turn{from: ev.planned, to: it.Class.Category, disposition: it.Class.Disposition}
		g := groups[t]
		if g == nil {
			g = &group{lastError: it.Envelope.LastError}
			groups[t] = g
			order = append(order, t)
		}
		g.ids = append(g.ids, ev.id)
	}
	var said []string
	for _, t := range order {
		g := groups[t]
		said = append(said, turnSentence(p, strings.Join(g.ids, ", "), t.from, t.to, t.disposition, g.lastError))
	}
	return said
}

// turnSentence says what it means that events came back in category to
// (disposition d), planned in category from.
func turnSentence(p *redrive.Plan, ids, from, to, d, lastError string) string {
	errNote := ""
	if lastError != "" {
		errNote = fmt.Sprintf(" (%q)", firstRunes(lastError, 120))
	}
	if from == "" || from == to {
		return fmt.Sprintf("%s came back as %s again%s: the consumer still fails it the same way, so the cause is not fixed yet.", ids, to, errNote)
	}
	s := fmt.Sprintf("%s came back as %s (disposition %s), no longer %s: the consumer now fails it another way%s.", ids, to, d, from, errNote)
	allowed := d == redrive.DefaultDisposition(p.Kind) || slices.Contains(p.Params.AllowDispositions, d)
	switch {
	case d == envelope.DispositionQuarantine:
		return s + " An event in conflict is never redriven automatically: find out which payload is right."
	case d == envelope.DispositionResolve && p.Kind == redrive.KindRedrive:
		return s + " Retrying it will not help: a redrive plan leaves it out (dlqctl resolve plan ends it, archived in its journal)."
	case d == envelope.DispositionFixThenRedrive && allowed:
		return s + " Fix that first."
	case d == envelope.DispositionFixThenRedrive:
		return s + " Fix that first: a plan takes it only with --allow-disposition " + d + ", which the command below gives."
	case d != redrive.DefaultDisposition(p.Kind) && allowed:
		return s + " Find out why first."
	case d != redrive.DefaultDisposition(p.Kind):
		return s + " Find out why first: a plan takes it only with --allow-disposition " + d + ", which the command below gives."
	}
	return s
}

// widen makes the re-plan's flags take the events as they came back: the
// categories, dispositions, origins and owners they have now join the
// plan's; a disposition the plan did not allow is allowed where a redrive
// can be right for it; a selector that no longer takes one of them (its
// error, its age, its attempts) is left out. It returns a note for each
// change, for the approver to see.
func widen(flags *planFlags, p *redrive.Plan, events []cameBackNow, now time.Time) []string {
	var notes []string
	s := &flags.sel
	joinSet := func(list *[]string, v string) {
		if len(*list) > 0 && !slices.Contains(*list, v) {
			*list = append(*list, v)
		}
	}
	drop := func(flag string, keep bool, field *string) {
		if !keep && *field != "" {
			notes = append(notes, fmt.Sprintf("the plan's %s %s is left out: it no longer takes every event that came back", flag, *field))
			*field = ""
		}
	}
	for _, ev := range events {
		for _, it := range ev.items {
			e, c := it.Envelope, it.Class
			joinSet(&s.categories, c.Category)
			joinSet(&s.dispositions, c.Disposition)
			joinSet(&s.origins, e.Origin.Topic)
			joinSet(&s.owners, e.Owner)
			if allowable(p.Kind, c.Disposition) && !slices.Contains(flags.allowDispositions, c.Disposition) {
				flags.allowDispositions = append(flags.allowDispositions, c.Disposition)
				notes = append(notes, fmt.Sprintf("--allow-disposition %s takes what came back as %s; the approver sees it", c.Disposition, c.Category))
			}
			if s.errorRegex != "" {
				re, err := regexp.Compile(s.errorRegex)
				drop("--error", err == nil && re.MatchString(e.LastError), &s.errorRegex)
			}
			older, _ := inspect.ParseDuration(s.olderThan)
			drop("--older-than", inspect.Selector{OlderThan: older}.Match(e, c, now), &s.olderThan)
			newer, _ := inspect.ParseDuration(s.newerThan)
			drop("--newer-than", inspect.Selector{NewerThan: newer}.Match(e, c, now), &s.newerThan)
			if s.overdue && !inspect.IsOverdue(e, now) {
				notes = append(notes, "the plan's --overdue is left out: it no longer takes every event that came back")
				s.overdue = false
			}
			if s.minAttempts > 0 && e.Attempts < s.minAttempts {
				notes = append(notes, fmt.Sprintf("the plan's --min-attempts %d is left out: it no longer takes every event that came back", s.minAttempts))
				s.minAttempts = 0
			}
		}
	}
	return notes
}

// allowable says whether a re-plan of kind may take entries of
// disposition d by allowing it: not the kind's own (taken anyway), never
// a conflict, and never, for a redrive, what only resolving ends.
func allowable(kind, d string) bool {
	switch {
	case d == redrive.DefaultDisposition(kind), d == envelope.DispositionQuarantine:
		return false
	case kind == redrive.KindRedrive && d == envelope.DispositionResolve:
		return false
	}
	return true
}

// planFlagsOf are the flags that make plan p again (the reason and --out
// are the caller's).
func planFlagsOf(p *redrive.Plan) planFlags {
	s, q := p.Selectors, p.Params
	return planFlags{
		kind: p.Kind,
		sel: selectorFlags{
			categories: slices.Clone(s.Categories), dispositions: slices.Clone(s.Dispositions), origins: slices.Clone(s.Origins),
			errorRegex: s.Error, eventIDs: slices.Clone(s.EventIDs), owners: slices.Clone(s.Owners), overdue: s.Overdue,
			olderThan: s.OlderThan, newerThan: s.NewerThan, minAttempts: s.MinAttempt, limit: s.Limit,
		},
		to: q.To, rate: q.Rate, burst: q.Burst, ramp: joinInts(q.Ramp), max: q.Max, effects: q.Effects, effectsQuery: q.EffectsQuery,
		settle: time.Duration(q.Settle), maxFailedRatio: q.MaxFailedRatio, reason: p.Reason, includeQuarantined: q.IncludeQuarantined,
		unverifiedOK: q.UnverifiedOK, allowDispositions: slices.Clone(q.AllowDispositions),
	}
}

// listCommand is the command line that lists the events ids in plan p's
// DLQ.
func (l commandLines) listCommand(p *redrive.Plan, ids []string) string {
	parts := append(l.globalArgs(p.Source), "list")
	for _, id := range ids {
		parts = append(parts, "--event-id", shellQuote(id))
	}
	return strings.Join(parts, " ")
}

// globalArgs are "dlqctl" and the global flags of a printed command on
// the source recorded as source: this invocation's config, profile and
// rules (which decide categories), and the source.
func (l commandLines) globalArgs(source string) []string {
	parts := []string{"dlqctl"}
	g := l.global
	for _, gf := range [][2]string{{"--config", g.ConfigPath}, {"--profile", g.Profile}, {"--rules", g.Rules}, {"--event-id-from", g.EventIDFrom}, {"--key-from", g.KeyFrom}} {
		if gf[1] != "" {
			parts = append(parts, gf[0], shellQuote(gf[1]))
		}
	}
	if src := l.sourceArg(source); src != "" {
		parts = append(parts, "--source", shellQuote(src))
	}
	return parts
}

// planCommand is the command line that makes the plan of flags on plan
// p's source, with the global flags of this invocation that shape it.
func (l commandLines) planCommand(p *redrive.Plan, flags *planFlags) string {
	parts := append(l.globalArgs(p.Source), p.Kind, "plan")
	parts = append(parts, flags.args()...)
	return strings.Join(parts, " ")
}

// args are the flags as a command line gives them: every selector and
// parameter that is set, the rate, ramp and gates always (what the
// approver reviews), the reason and --out last.
func (p *planFlags) args() []string {
	var a []string
	each := func(flag string, vals []string) {
		for _, v := range vals {
			a = append(a, flag, shellQuote(v))
		}
	}
	one := func(flag, v string) {
		if v != "" {
			a = append(a, flag, shellQuote(v))
		}
	}
	s := p.sel
	each("--category", s.categories)
	each("--disposition", s.dispositions)
	each("--origin", s.origins)
	one("--error", s.errorRegex)
	each("--owner", s.owners)
	if s.overdue {
		a = append(a, "--overdue")
	}
	one("--older-than", s.olderThan)
	one("--newer-than", s.newerThan)
	if s.minAttempts > 0 {
		a = append(a, "--min-attempts", strconv.Itoa(s.minAttempts))
	}
	if s.limit > 0 {
		a = append(a, "--limit", strconv.Itoa(s.limit))
	}
	each("--event-id", s.eventIDs)
	if p.max > 0 {
		a = append(a, "--max", strconv.Itoa(p.max))
	}
	if len(p.allowDispositions) > 0 {
		a = append(a, "--allow-disposition", strings.Join(p.allowDispositions, ","))
	}
	if p.includeQuarantined {
		a = append(a, "--include-quarantined")
	}
	a = append(a, "--ramp", p.ramp)
	if p.kind == redrive.KindRedrive {
		one("--to", p.to)
		a = append(a, "--rate", strconv.FormatFloat(p.rate, 'g', -1, 64), "--burst", strconv.Itoa(p.burst))
		one("--effects", effectsArg(p.effects))
		one("--effects-query", p.effectsQuery)
		a = append(a, "--settle", p.settle.String(), "--max-failed-ratio", strconv.FormatFloat(p.maxFailedRatio, 'g', -1, 64))
		if p.unverifiedOK {
			a = append(a, "--unverified-ok")
		}
	}
	return append(a, "--reason", shellQuote(p.reason), "--out", shellQuote(p.out))
}

// againReason is the reason of a re-plan: the plan's, marked once.
func againReason(reason string) string {
	const mark = " (came back)"
	if strings.HasSuffix(reason, mark) {
		return reason
	}
	return reason + mark
}

// firstRunes is s cut to n runes, with "…" when it was longer.
func firstRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
