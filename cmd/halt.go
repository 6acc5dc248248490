package cmd

import (
	"fmt"
	"os"
	"strings"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/redrive"
)

// cameBack is the event IDs that the consumer dead-lettered again during
// the run, in the order their batches reconciled them: they are in the
// DLQ once more, and a new plan is the way to send them again.
func cameBack(st *redrive.State) []string {
	var ids []string
	seen := map[string]bool{}
	for _, id := range st.CameBack {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// runPlanPath is the plan file a run was started from, as its journal
// recorded it ("" from journals of earlier versions).
func runPlanPath(st *redrive.State, given string) string {
	return firstNonEmpty(given, st.Start.PlanPath)
}

// haltError is what apply and resume say when a gate stopped the run:
// how to go on when entries remain, and, when the gate tripped in the
// plan's last batch, that nothing is left to resume and what to do with
// the events that came back instead. Each command to run is on a line of
// its own, so that it can be copied whole.
func (f *Factory) haltError(st *redrive.State, doc RunDoc, planPath, journal string, hint hintFlags) error {
	hint.pastGate = true
	var b strings.Builder
	fmt.Fprintf(&b, "stopped by the %s gate", st.HaltedBy)
	if doc.HaltReason != "" {
		fmt.Fprintf(&b, ": %s", doc.HaltReason)
	}
	if doc.Remaining > 0 {
		fmt.Fprintf(&b, ".\nNothing further was moved: %s of the plan remain. Once the cause is dealt with, approve the plan again and go on:\n", entries(doc.Remaining))
		fmt.Fprintf(&b, "  dlqctl %s approve %s --again\n", st.Plan.Kind, shellQuote(firstNonEmpty(planPath, "PLAN")))
		fmt.Fprintf(&b, "  %s%s", f.resumeCommand(st.Plan.Kind, journal, hint), secretsNote(st.Plan))
		return withCode(ExitGate, fmt.Errorf("%s", b.String()))
	}
	fmt.Fprintf(&b, ".\nThe gate tripped in the plan's last batch: nothing is left to resume (journal %s).", journal)
	b.WriteString(f.cameBackAdvice(st, journal))
	return withCode(ExitGate, fmt.Errorf("%s", b.String()))
}

// cameBackAdvice names the events that came back to the DLQ and the
// command that plans them again ("" when none came back).
func (f *Factory) cameBackAdvice(st *redrive.State, journal string) string {
	ids := cameBack(st)
	if len(ids) == 0 {
		if st.HaltedBy == redrive.GatePending {
			return fmt.Sprintf("\nThe pending events may still be processed; see where they stand with:\n  dlqctl reconcile --journal %s", shellQuote(journal))
		}
		return ""
	}
	them := "them"
	if len(ids) == 1 {
		them = "it"
	}
	return fmt.Sprintf("\n%s came back to the DLQ: %s.\nOnce the cause is fixed, plan %s again:\n  %s",
		plural(len(ids), "event"), strings.Join(ids, ", "), them, f.replanCommand(st, ids))
}

// replanCommand plans the given events again from the run's DLQ, with
// the run's reason.
func (f *Factory) replanCommand(st *redrive.State, ids []string) string {
	parts := []string{"dlqctl"}
	if g := f.Global; g.ConfigPath != "" {
		parts = append(parts, "--config", shellQuote(g.ConfigPath))
	}
	if g := f.Global; g.Profile != "" {
		parts = append(parts, "--profile", shellQuote(g.Profile))
	}
	if !strings.Contains(st.Plan.Source, backend.Redacted) {
		parts = append(parts, "--source", shellQuote(st.Plan.Source))
	}
	parts = append(parts, st.Plan.Kind, "plan")
	if e := st.Plan.Params.Effects; e != "" && !strings.Contains(e, backend.Redacted) {
		parts = append(parts, "--effects", shellQuote(e))
		if q := st.Plan.Params.EffectsQuery; q != "" {
			parts = append(parts, "--effects-query", shellQuote(q))
		}
	}
	for _, id := range ids {
		parts = append(parts, "--event-id", shellQuote(id))
	}
	parts = append(parts, "--reason", shellQuote(st.Plan.Reason+" (came back)"), "--out", st.Plan.Kind+"-again.plan.json")
	return strings.Join(parts, " ")
}

// startedAlready is apply's answer when the plan's journal exists: a run
// with nothing left was already applied; any other is resumed.
func (f *Factory) startedAlready(plan *redrive.Plan, planPath string, started *redrive.StartedError, hint hintFlags) error {
	st, err, journal := started.State, started.Err, started.Journal
	if err != nil || !nothingLeft(st) {
		hint.pastGate = err == nil && st.Status == redrive.StatusHalted
		return usageErrorf("journal %s exists: this plan's run has started already; resume it:\n  %s", journal, f.resumeCommand(plan.Kind, journal, hint))
	}
	outcome := "completed"
	if st.Status == redrive.StatusHalted {
		outcome = "moved every entry, then was stopped by the " + st.HaltedBy + " gate in its last batch"
	}
	return usageErrorf("%s was already applied (journal %s): run %s %s; nothing is left to apply.%s", planPath, journal, st.RunID, outcome, f.cameBackAdvice(st, journal))
}

// nextAfterApproval is what to run after approving the plan at path: apply
// it, or, when its run has started (the journal next to it exists), resume
// it; a run with nothing left needs nothing.
func (f *Factory) nextAfterApproval(plan *redrive.Plan, path string, keys keyFlags) string {
	journal := redrive.DefaultJournalPath(path)
	if _, err := os.Lstat(journal); err != nil {
		return fmt.Sprintf("next: dlqctl %s apply %s", plan.Kind, shellQuote(path))
	}
	st, _, err := redrive.ReplayFile(journal, nil, plan)
	if err != nil {
		return fmt.Sprintf("its run has started (journal %s); next: %s", journal, f.resumeCommand(plan.Kind, journal, hintFlags{keys: keys}))
	}
	if nothingLeft(st) {
		return fmt.Sprintf("but nothing is left to apply or resume: run %s moved every entry (journal %s).%s", st.RunID, journal, f.cameBackAdvice(st, journal))
	}
	hint := hintFlags{keys: keys, pastGate: st.Status == redrive.StatusHalted}
	return fmt.Sprintf("its run has started (journal %s); next:\n  %s", journal, f.resumeCommand(plan.Kind, journal, hint))
}
