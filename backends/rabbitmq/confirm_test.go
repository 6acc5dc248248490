package rabbitmq_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/rabbitmq"
	"github.com/dlqctl/dlqctl/backends/rabbitmq/rabbitmqtest"
)

// TestConfirmsPendingWhenTheConnectionDrops: the connection drops after
// the broker got a chunk's publishes and before their confirms reached
// dlqctl. Publish returns within a bound (it spun at 100 % CPU on the
// closed returns channel), and with an error: every item's outcome is
// unknown, never a broker refusal that a --retry-failed would publish
// again without an ambiguous record.
func TestConfirmsPendingWhenTheConnectionDrops(t *testing.T) {
	srv := broker.Get(t)
	base := withDLX(t, srv, false)
	ctx := context.Background()
	var ids []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("E%02d", i))
	}
	deadLetter(t, srv, base+"-orders", base+"-dlq", ids...)
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := rabbitmqtest.NewProxy(t, u.Host)
	q, err := rabbitmq.Open(ctx, proxy.Via(srv.URL())+"?queue="+base+"-dlq&heartbeat=2s", rabbitmq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var items []backend.MoveItem
	for i, e := range scanAll(t, q) {
		items = append(items, backend.MoveItem{Seq: int64(i + 1), ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint, Dest: base + "-orders"})
	}
	// A first chunk goes through whole (and sets up the removal record).
	if res, err := q.Publish(ctx, items[:1], backend.Markers{RunID: "run-cut"}); err != nil || res[0].Err != nil {
		t.Fatalf("first chunk: %v %+v", err, res)
	}
	if rm, err := q.Remove(ctx, items[:1]); err != nil || !rm[0].Removed {
		t.Fatalf("first chunk: remove: %v %+v", err, rm)
	}
	items = items[1:]
	proxy.CutOnPublish()
	type outcome struct {
		res []backend.MoveResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := q.Publish(ctx, items, backend.Markers{RunID: "run-cut"})
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		if o.err == nil {
			failed := 0
			for _, r := range o.res {
				if r.Err != nil {
					failed++
				}
			}
			t.Fatalf("Publish with the connection cut under pending confirms returned no error: %d of %d items failed one by one (as refusals), none unknown", failed, len(o.res))
		}
		t.Logf("Publish: %v", o.err)
	case <-time.After(30 * time.Second):
		t.Fatal("Publish did not return within 30 s of the connection dropping")
	}
	select {
	case <-proxy.Cut():
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy never saw a publish to cut")
	}
}

// TestLostConnectionResumesExactlyOnce: an apply whose connection drops
// while the broker holds the chunk's publishes and their confirms are on
// the way exits within a bound, says how to resume, and records no entry
// as failed; the resume finds the published messages on the origin by
// the run's markers and removes them from the DLQ instead of sending them
// again, so the origin ends with each event exactly once.
func TestLostConnectionResumesExactlyOnce(t *testing.T) {
	srv := broker.Get(t)
	base := withDLX(t, srv, false)
	var ids []string
	for i := range 30 {
		ids = append(ids, fmt.Sprintf("E%02d", i))
	}
	deadLetter(t, srv, base+"-orders", base+"-dlq", ids...)
	dir := t.TempDir()
	proxy, source := viaProxy(t, srv, srv.Source(base+"-dlq"))
	planApproved(t, dir, source)
	proxy.CutOnPublishTo(base + "-orders")
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := run(t, dir, "--source", source, "redrive", "apply", "p.json")
		done <- result{code, out}
	}()
	select {
	case r := <-done:
		if r.code == 0 || !strings.Contains(r.out, "Resume with") {
			t.Fatalf("apply with its connection cut: exit %d, want a failure that says how to resume\n%s", r.code, r.out)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("apply did not end within 60 s of its connection dropping")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "p.journal"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"type":"failed"`) {
		t.Errorf("the journal records entries as failed after a lost connection; their outcome is unknown")
	}
	if code, out := run(t, dir, "--source", source, "redrive", "resume", "p.journal"); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	waitDepth(t, srv, base+"-dlq", 0)
	got := drainCounts(t, srv, base+"-orders")
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("%s is on the origin %d times, want once", id, got[id])
		}
	}
	if len(got) != len(ids) {
		t.Errorf("the origin holds %d distinct events, want %d", len(got), len(ids))
	}
}
