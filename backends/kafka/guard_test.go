package kafkadlq_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/kafka"
)

// TestGuardDestination: a dead letter planted with its original topic set
// to the DLT's state topic (or the DLT, or an internal topic) is never
// written there, whether the plan routes it by its headers or names the
// destination itself.
func TestGuardDestination(t *testing.T) {
	ctx := ctxFor(t)
	origin, dlt, src, _ := seedRedrive(t, ctx)
	state := dlt + ".dlqctl-state"
	// The state topic exists (made on first write).
	if _, err := src.Publish(ctx, nil, backend.Markers{RunID: "run-setup"}); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-30 * time.Second).Truncate(time.Millisecond)
	produceManual(t, ctx,
		springDeadLetter(dlt, 0, base, state, 0, 1, "dlqctl-lease", "P1", `{"op":"take","run_id":"evil"}`, "planted"),
		springDeadLetter(dlt, 1, base.Add(time.Millisecond), "__consumer_offsets", 0, 1, "k", "P2", `{}`, "planted"),
	)
	fresh := openTopic(t, ctx, dlt, kafkadlq.Options{})
	all := scanAll(t, ctx, fresh, "")
	var planted []string
	for _, e := range all {
		if strings.HasPrefix(e.EventID, "P") {
			planted = append(planted, e.ID)
		}
	}
	if len(planted) != 2 {
		t.Fatalf("planted entries: %v", ids(all))
	}
	for _, dest := range []string{state, dlt, "__consumer_offsets", "__transaction_state", "other.DLT.dlqctl-state"} {
		if err := fresh.GuardDestination(ctx, dest); err == nil {
			t.Errorf("GuardDestination(%q) = nil", dest)
		}
	}
	if err := fresh.GuardDestination(ctx, origin); err != nil {
		t.Fatalf("GuardDestination(origin) = %v", err)
	}
	before := len(readCommitted(t, ctx, state))
	var items []backend.MoveItem
	for _, e := range all {
		if strings.HasPrefix(e.EventID, "P") {
			// By its headers (Dest empty), and named by a hand-made plan.
			items = append(items, backend.MoveItem{Seq: int64(len(items) + 1), ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint})
			items = append(items, backend.MoveItem{Seq: int64(len(items) + 1), ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint, Dest: state})
		}
	}
	res, err := fresh.Publish(ctx, items, backend.Markers{RunID: "run-guard"})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err == nil || r.Removed || !strings.Contains(r.Err.Error(), items[i].ID) || !strings.Contains(r.Err.Error(), "refused") {
			t.Fatalf("item %d (%s → %q): %+v", i, items[i].ID, items[i].Dest, r)
		}
	}
	// Nothing reached the state topic; the planted entries stay in the DLQ.
	recs := readCommitted(t, ctx, state)
	for _, r := range recs[before:] {
		t.Fatalf("state topic got %q = %s", r.Key, r.Value)
	}
	if left := scanAll(t, ctx, openTopic(t, ctx, dlt, kafkadlq.Options{}), ""); len(left) != len(all) {
		t.Fatalf("left %d of %d", len(left), len(all))
	}
}
