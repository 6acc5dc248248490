package cmd

import (
	"context"
	"fmt"
	"os"
	"strings"

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

// haltError is what apply and resume say when a gate stopped the run: how
// to go on when entries remain, and, when the gate tripped in the plan's
// last batch, that nothing is left to resume and what to do with the
// events that came back instead. Each command to run is on a line of its
// own, what to know first in "#" lines above it, so that it can be copied
// whole.
func (a runAdvice) haltError(ctx context.Context, st *redrive.State, doc RunDoc, planPath, journal string, hint hintFlags) error {
	hint.pastGate = true
	var b strings.Builder
	fmt.Fprintf(&b, "stopped by the %s gate", st.HaltedBy)
	if doc.HaltReason != "" {
		fmt.Fprintf(&b, ": %s", doc.HaltReason)
	}
	if doc.Remaining > 0 {
		fmt.Fprintf(&b, ".\nNothing further was moved: %s of the plan remain. Once the cause is dealt with, approve the plan again and go on:\n", entries(doc.Remaining))
		b.WriteString(shellLines(a.lines.secretNotes(st.Plan),
			fmt.Sprintf("dlqctl %s approve %s --again", st.Plan.Kind, shellQuote(firstNonEmpty(planPath, "PLAN"))),
			a.lines.resumeCommand(st.Plan.Kind, journal, hint)))
		return withCode(ExitGate, fmt.Errorf("%s", b.String()))
	}
	fmt.Fprintf(&b, ".\nThe gate tripped in the plan's last batch: nothing is left to resume (journal %s).", journal)
	b.WriteString(a.cameBackAdvice(ctx, st, planPath, journal))
	return withCode(ExitGate, fmt.Errorf("%s", b.String()))
}

// resumeLines are the resume command of the run in journal, with what to
// set before it runs.
func (l commandLines) resumeLines(plan *redrive.Plan, journal string, hint hintFlags) string {
	return shellLines(l.secretNotes(plan), l.resumeCommand(plan.Kind, journal, hint))
}

// cameBackAdvice names the events that came back to the DLQ and the
// command that plans them again ("" when none came back). It reads the
// run's DLQ to see how they came back.
func (a runAdvice) cameBackAdvice(ctx context.Context, st *redrive.State, planPath, journal string) string {
	ids := cameBack(st)
	if len(ids) == 0 {
		if st.HaltedBy == redrive.GatePending {
			return "\nThe pending events may still be processed; see where they stand with:\n" +
				shellLines(a.lines.secretNotes(st.Plan), "dlqctl reconcile --journal "+shellQuote(journal))
		}
		return ""
	}
	them := "them"
	if len(ids) == 1 {
		them = "it"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s came back to the DLQ: %s.", plural(len(ids), "event"), strings.Join(ids, ", "))
	r := a.replan(ctx, st, runPlanPath(st, planPath), ids)
	for _, s := range r.said {
		b.WriteString("\n" + s)
	}
	switch {
	case r.command != "":
		fmt.Fprintf(&b, "\nOnce the cause is fixed, plan %s again:\n%s", them, shellLines(r.notes, r.command))
	case r.unread != "":
		// A re-plan not tried against the DLQ could take nothing.
		fmt.Fprintf(&b, "\nThe DLQ could not be read to try a new plan against it (%s). See how %s came back with:\n%s\nThen, once the cause is fixed, plan %s again with the flags of the plan %s.",
			r.unread, them, shellLines(r.notes, r.look), them, firstNonEmpty(runPlanPath(st, planPath), "the run followed"))
	}
	return b.String()
}

// startedAlready is apply's answer when the plan's journal exists: a run
// with nothing left was already applied; any other is resumed.
func (a runAdvice) startedAlready(ctx context.Context, plan *redrive.Plan, planPath string, started *redrive.StartedError, hint hintFlags) error {
	st, err, journal := started.State, started.Err, started.Journal
	if err != nil || !nothingLeft(st) {
		hint.pastGate = err == nil && st.Status == redrive.StatusHalted
		return usageErrorf("journal %s exists: this plan's run has started already; resume it:\n%s", journal, a.lines.resumeLines(plan, journal, hint))
	}
	outcome := "completed"
	if st.Status == redrive.StatusHalted {
		outcome = "moved every entry, then was stopped by the " + st.HaltedBy + " gate in its last batch"
	}
	return usageErrorf("%s was already applied (journal %s): run %s %s; nothing is left to apply.%s", planPath, journal, st.RunID, outcome, a.cameBackAdvice(ctx, st, planPath, journal))
}

// nextAfterApproval is what to run after approving the plan at path: apply
// it, or, when its run has started (the journal next to it exists), resume
// it; a run with nothing left needs nothing.
func (a runAdvice) nextAfterApproval(ctx context.Context, plan *redrive.Plan, path string, keys keyFlags) string {
	journal := redrive.DefaultJournalPath(path)
	if _, err := os.Lstat(journal); err != nil {
		apply := fmt.Sprintf("dlqctl %s apply %s", plan.Kind, shellQuote(path))
		if notes := a.lines.secretNotes(plan); len(notes) > 0 {
			return "next:\n" + shellLines(notes, apply)
		}
		return "next: " + apply
	}
	st, _, err := redrive.ReplayFile(journal, nil, plan)
	if err != nil {
		return fmt.Sprintf("its run has started (journal %s); next:\n%s", journal, a.lines.resumeLines(plan, journal, hintFlags{keys: keys}))
	}
	if nothingLeft(st) {
		return fmt.Sprintf("but nothing is left to apply or resume: run %s moved every entry (journal %s).%s", st.RunID, journal, a.cameBackAdvice(ctx, st, path, journal))
	}
	hint := hintFlags{keys: keys, pastGate: st.Status == redrive.StatusHalted}
	return fmt.Sprintf("its run has started (journal %s); next:\n%s", journal, a.lines.resumeLines(plan, journal, hint))
}
