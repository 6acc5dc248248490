package redrive

import (
	"sort"

	"github.com/dlqctl/dlqctl/effects"
)

// Verdicts (the reconciliation contract, docs/consumer-contract.md).
const (
	VerdictApplied           = "applied"
	VerdictAbsorbedDuplicate = "absorbed-duplicate"
	VerdictReDeadLettered    = "re-dead-lettered"
	VerdictPending           = "pending"
	VerdictDuplicateEffect   = "duplicate-effect"
	VerdictConflict          = "conflict"
	VerdictUnverified        = "unverified"
)

// Gates that stop a run.
const (
	GatePass             = "pass"
	GateDuplicateEffect  = "duplicate-effect"
	GateConflict         = "conflict"
	GatePending          = "pending"
	GateReDeadLettered   = "re-dead-lettered"
	GateUnverifiedNoRamp = "unverified"
)

// Judge gives one event its verdict. rec is what the consumer recorded
// (found false: nothing), back says the event is in the DLQ again.
// Conflicts and duplicate effects outrank everything: they are damage.
func Judge(fingerprint string, rec effects.Record, found, back bool) string {
	switch {
	case found && rec.Fingerprint != "" && fingerprint != "" && !sameFingerprint(rec.Fingerprint, fingerprint):
		return VerdictConflict
	case found && rec.Effects > 1:
		return VerdictDuplicateEffect
	case back:
		return VerdictReDeadLettered
	case found && rec.Effects == 1 && rec.Attempts > 1:
		return VerdictAbsorbedDuplicate
	case found && rec.Effects == 1:
		return VerdictApplied
	}
	return VerdictPending
}

func sameFingerprint(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		ca, cb := a[i], b[i]
		if 'A' <= ca && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if 'A' <= cb && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if ca != cb {
			return false
		}
	}
	return true
}

// BatchReport is printed after each batch and kept in the journal
// (dlqctl.run/v1 batches[]).
type BatchReport struct {
	Index        int            `json:"index"`
	Size         int            `json:"size"`
	Moved        int            `json:"moved"`
	Attempts     int64          `json:"attempts"`
	Effects      int64          `json:"effects"`
	UniqueEvents int            `json:"unique_events"`
	Verdicts     map[string]int `json:"verdicts"`
	DLQBefore    int64          `json:"dlq_before"`
	DLQAfter     int64          `json:"dlq_after"`
	Gate         string         `json:"gate"`
	GateReason   string         `json:"gate_reason,omitempty"`
	// Events lists each event's verdict, for reconcile and the journal.
	Events []EventVerdict `json:"events,omitempty"`
}

// EventVerdict is one event's numbers and verdict.
type EventVerdict struct {
	EventID  string `json:"event_id"`
	Attempts int64  `json:"attempts"`
	Effects  int64  `json:"effects"`
	Verdict  string `json:"verdict"`
}

// notableEvents is the events whose verdict is neither applied nor
// unverified, the ones a batch-end record lists one by one.
func notableEvents(evs []EventVerdict) []EventVerdict {
	var out []EventVerdict
	for _, ev := range evs {
		if ev.Verdict != VerdictApplied && ev.Verdict != VerdictUnverified {
			out = append(out, ev)
		}
	}
	return out
}

// ApplyGates decides whether the batch passed (the reconciliation contract, docs/consumer-contract.md table).
func (b *BatchReport) ApplyGates(maxFailedRatio float64) {
	b.Gate, b.GateReason = GatePass, ""
	v := b.Verdicts
	switch {
	case v[VerdictConflict] > 0:
		b.Gate, b.GateReason = GateConflict, plural(v[VerdictConflict], "event")+" recorded with another fingerprint by the consumer"
	case v[VerdictDuplicateEffect] > 0:
		b.Gate, b.GateReason = GateDuplicateEffect, plural(v[VerdictDuplicateEffect], "event")+" produced more than one effect"
	case v[VerdictPending] > 0:
		b.Gate, b.GateReason = GatePending, plural(v[VerdictPending], "event")+" still without an effect when --settle ran out"
	case b.UniqueEvents > 0 && float64(v[VerdictReDeadLettered])/float64(b.UniqueEvents) > maxFailedRatio:
		b.Gate, b.GateReason = GateReDeadLettered, plural(v[VerdictReDeadLettered], "event")+" dead-lettered again, above --max-failed-ratio"
	}
}

// Passed says whether the next batch may start.
func (b *BatchReport) Passed() bool { return b.Gate == GatePass }

// tally fills the counts from the per-event verdicts.
func (b *BatchReport) tally() {
	b.Verdicts = map[string]int{}
	b.Attempts, b.Effects = 0, 0
	for _, e := range b.Events {
		b.Verdicts[e.Verdict]++
		b.Attempts += e.Attempts
		b.Effects += e.Effects
	}
	b.UniqueEvents = len(b.Events)
	sort.Slice(b.Events, func(i, j int) bool { return b.Events[i].EventID < b.Events[j].EventID })
}
