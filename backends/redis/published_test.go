package redisstream

import (
	"context"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// CheckPublished finds a moved entry by its recorded ID or by the run's
// markers, says absent when the stream kept everything since, and unknown
// once it was trimmed past what is looked for.
func TestCheckPublished(t *testing.T) {
	ctx := context.Background()
	rdb := shared.Client()
	dlq, orders := key(t, "dlq"), key(t, "orders")
	fp := envelope.ComputeFingerprint([]byte(`{"n":1}`))
	a := xadd(t, rdb, dlq, "event_id", "E1", "fingerprint", fp, "payload", `{"n":1}`, "origin_stream", orders)
	b := xadd(t, rdb, dlq, "event_id", "E2", "fingerprint", fp, "payload", `{"n":1}`, "origin_stream", orders)
	s := openStream(t, shared.URL(0, dlq), Options{})
	since := time.Now()
	moved := backend.MoveItem{Seq: 1, ID: a, EventID: "E1", Fingerprint: fp, Dest: orders}
	res, err := s.Publish(ctx, []backend.MoveItem{moved}, testMarkers)
	if err != nil || res[0].Err != nil {
		t.Fatalf("publish: %+v %v", res, err)
	}
	notMoved := backend.MoveItem{Seq: 2, ID: b, EventID: "E2", Fingerprint: fp, Dest: orders}
	queries := []backend.PublishedQuery{
		{Item: moved, DestID: res[0].DestID, Since: since},
		{Item: moved, Since: since},
		{Item: notMoved, Since: since},
		{Item: notMoved, DestID: "1-1", Since: since},
	}
	got, err := s.CheckPublished(ctx, queries, testMarkers)
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.Presence{backend.PresenceFound, backend.PresenceFound, backend.PresenceAbsent, backend.PresenceAbsent}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("query %d: %v, want %v", i, got[i], want[i])
		}
	}
	other, err := s.CheckPublished(ctx, queries[:1], backend.Markers{RunID: "another-run"})
	if err != nil || other[0] != backend.PresenceAbsent {
		t.Errorf("another run's markers: %v %v", other, err)
	}
	// Trimmed: the destination can no longer tell.
	if err := rdb.XTrimMaxLen(ctx, orders, 0).Err(); err != nil {
		t.Fatal(err)
	}
	got, err = s.CheckPublished(ctx, queries[:3], testMarkers)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range got {
		if p != backend.PresenceUnknown {
			t.Errorf("after XTRIM, query %d: %v, want unknown", i, p)
		}
	}
}
