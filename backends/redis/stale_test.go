package redisstream

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/redrive"
)

// An apply's staleness check on a stream longer than the staleness read's
// page, read in two halves: a plan of what is there is not stale; one of
// whose entries left the DLQ, one never was there and one has another
// fingerprint names exactly those, in plan order.
func TestStaleAcrossPages(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	ctx := context.Background()
	k := key(t, "dlq")
	rdb := shared.Client()
	const n = 3*fingerprintPage + 7 // each half crosses a page
	pipe := rdb.Pipeline()
	for i := range n {
		// One millisecond apart, so that the halves split the stream.
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: k, ID: fmt.Sprintf("%d-0", 1000+i), Values: []string{
			"event_id", fmt.Sprint("E", i), "fingerprint", fmt.Sprintf("sha256:%064x", i), "payload", "{}"}})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	s := openStream(t, shared.URL(0, k), Options{})
	if r, err := s.halves(ctx); err != nil || len(r) != 2 {
		t.Fatalf("halves = %v, %v; want two", r, err)
	}
	var es []redrive.Entry
	for i := range n {
		es = append(es, redrive.Entry{Seq: int64(i + 1), ID: fmt.Sprintf("%d-0", 1000+i), EventID: fmt.Sprint("E", i),
			Fingerprint: fmt.Sprintf("sha256:%064x", i), Category: "transient"})
	}
	fresh := &redrive.Plan{Entries: redrive.NewEntries(es...)}
	if missing, changed, err := redrive.Stale(ctx, s, fresh); err != nil || len(missing)+len(changed) != 0 {
		t.Fatalf("fresh plan: %d missing, %d changed, %v; want neither", len(missing), len(changed), err)
	}

	gone, never, other := 2*fingerprintPage+1, n, fingerprintPage+3
	if err := rdb.XDel(ctx, k, es[gone].ID).Err(); err != nil {
		t.Fatal(err)
	}
	es = append(es, redrive.Entry{Seq: int64(n + 1), ID: fmt.Sprintf("%d-0", 1000+never), EventID: "never", Fingerprint: "sha256:" + fmt.Sprintf("%064x", never), Category: "transient"})
	es[other].Fingerprint = fmt.Sprintf("sha256:%064x", n+99)
	stale := &redrive.Plan{Entries: redrive.NewEntries(es...)}
	missing, changed, err := redrive.Stale(ctx, s, stale)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(es []redrive.Entry) []string {
		var out []string
		for _, e := range es[:min(len(es), 5)] {
			out = append(out, e.ID)
		}
		return out
	}
	if want := []string{es[gone].ID, es[never].ID}; !slices.Equal(ids(missing), want) {
		t.Errorf("missing %v, want %v", ids(missing), want)
	}
	if want := []string{es[other].ID}; !slices.Equal(ids(changed), want) {
		t.Errorf("changed %v, want %v", ids(changed), want)
	}
}
