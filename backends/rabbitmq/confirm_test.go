package rabbitmq_test

import (
	"context"
	"fmt"
	"net/url"
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
	base := uniq(t)
	ctx := context.Background()
	if err := rabbitmqtest.DeclareDLX(ctx, srv.Channel(t), base+"-orders", base+"-dlq", false, 0); err != nil {
		t.Fatal(err)
	}
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
