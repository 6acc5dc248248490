package sqsdlq_test

import (
	"fmt"
	"testing"

	sqsdlq "github.com/dlqctl/dlqctl/backends/sqs"
	"github.com/dlqctl/dlqctl/envelope"
)

// TestScanNeverDeletes: a scan of real dead letters hands over every one,
// in dead-letter order, decoded (origin, attempts, event ID), and leaves
// every message in the DLQ and visible again; a second scan sees the same.
func TestScanNeverDeletes(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	const n = 35
	var evs []event
	for i := range n {
		evs = append(evs, event{id: fmt.Sprintf("E%02d", i), body: fmt.Sprintf(`{"n":%d}`, i)})
	}
	send(t, ctx, p.src, evs...)
	deadLetter(t, ctx, p, n)
	q := open(t, ctx, p)
	for round := range 2 {
		var got []envelope.Envelope
		if err := q.Scan(ctx, "", func(e envelope.Envelope) error { got = append(got, e); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("round %d: scan saw %d, want %d", round, len(got), n)
		}
		for i, e := range got {
			if e.Malformed != "" || e.EventID != evs[i].id || string(e.Payload) != evs[i].body {
				t.Fatalf("round %d: entry %d: event %q payload %q malformed %q; want %s in order sent", round, i, e.EventID, e.Payload, e.Malformed, evs[i].id)
			}
			if e.Origin.Topic != p.srcName || e.Properties[sqsdlq.SQSSourceArnProperty] != p.srcArn {
				t.Fatalf("origin %q / %v, want %s", e.Origin.Topic, e.Properties, p.srcName)
			}
			if e.Attempts != 2 {
				t.Fatalf("attempts %d, want the source's maxReceiveCount 2", e.Attempts)
			}
		}
		visible, inFlight := counts(t, ctx, p.dlq)
		if visible != n || inFlight != 0 {
			t.Fatalf("round %d: after the scan %d visible, %d in flight; want all %d visible", round, visible, inFlight, n)
		}
	}
	n64, err := q.Len(ctx)
	if err != nil || n64 != n {
		t.Fatalf("Len = %d, %v", n64, err)
	}
	// Paging: after the 10th entry comes the 11th.
	var page []string
	err = q.Scan(ctx, "", func(e envelope.Envelope) error { page = append(page, e.ID); return nil })
	if err != nil {
		t.Fatal(err)
	}
	var next []string
	if err := q.Scan(ctx, page[9], func(e envelope.Envelope) error { next = append(next, e.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(next) != n-10 || next[0] != page[10] {
		t.Fatalf("Scan after %s: %d entries starting %v, want %d starting %s", page[9], len(next), next[:1], n-10, page[10])
	}
	e, err := q.Get(ctx, page[20])
	if err != nil || e.ID != page[20] || e.EventID != evs[20].id {
		t.Fatalf("Get(%s) = %s %s, %v", page[20], e.ID, e.EventID, err)
	}
	if v, f := counts(t, ctx, p.dlq); v != n || f != 0 {
		t.Fatalf("after Get %d visible, %d in flight", v, f)
	}
}

// TestScanSpillsHandles: a scan with more messages than its in-memory
// handle bound sees each message once, in order, and releases every one
// (the spilled handles too).
func TestScanSpillsHandles(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	const n = 300
	fillDLQ(t, p, n)
	q := open(t, ctx, p)
	q.SetHandleBound(50)
	got := scanAll(t, ctx, q)
	seen := map[string]bool{}
	for _, e := range got {
		if seen[e.ID] {
			t.Fatalf("%s handed over twice", e.ID)
		}
		seen[e.ID] = true
	}
	if len(seen) != n {
		t.Fatalf("scan saw %d of %d", len(seen), n)
	}
	for i := 1; i < len(got); i++ {
		if got[i].DeadLetteredAt.Before(got[i-1].DeadLetteredAt) {
			t.Fatalf("out of order at %d", i)
		}
	}
	if v, f := counts(t, ctx, p.dlq); v != n || f != 0 {
		t.Fatalf("after the scan %d visible, %d in flight; want %d, 0", v, f, n)
	}
}
