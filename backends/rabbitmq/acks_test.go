package rabbitmq_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/rabbitmq"
)

// TestRemoveAcksTheHeadAtOnce: a chunk whose messages are the head of the
// DLQ is acked with one multiple ack, not one ack per message (which cost
// a fifth of an unthrottled redrive), and only as far as that is exact:
// a message left out of the chunk stays in the DLQ, and those after it
// are acked one by one.
func TestRemoveAcksTheHeadAtOnce(t *testing.T) {
	srv := broker.Get(t)
	base := withDLX(t, srv, false)
	ctx := context.Background()
	var ids []string
	for i := range 30 {
		ids = append(ids, fmt.Sprintf("E%02d", i))
	}
	deadLetter(t, srv, base+"-orders", base+"-dlq", ids...)
	proxy, source := viaProxy(t, srv, srv.URL()+"?queue="+base+"-dlq")
	q, err := rabbitmq.Open(ctx, source, rabbitmq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var items []backend.MoveItem
	for i, e := range scanAll(t, q) {
		if e.EventID == "E20" {
			continue // stays in the DLQ
		}
		items = append(items, backend.MoveItem{Seq: int64(i + 1), ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint, Dest: base + "-orders"})
	}
	if res, err := q.Publish(ctx, items, backend.Markers{RunID: "run-acks"}); err != nil {
		t.Fatal(err)
	} else {
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	before := proxy.Count(60, 80)
	rm, err := q.Remove(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rm {
		if !r.Removed {
			t.Errorf("%s not removed: %v", items[i].EventID, r.Err)
		}
	}
	// E00…E19 in one ack, E21…E29 one by one.
	if acks := proxy.Count(60, 80) - before; acks != 10 {
		t.Errorf("Remove of 29 messages, the 21st of the DLQ left out, sent %d basic.ack frames; want 10 (one for the 20 before it, one for each of the 9 after)", acks)
	}
	waitDepth(t, srv, base+"-dlq", 1)
	var left []string
	for _, e := range scanAll(t, q) {
		left = append(left, e.EventID)
	}
	if len(left) != 1 || left[0] != "E20" {
		t.Errorf("the DLQ holds %v, want [E20]", left)
	}
	if n := depth(t, srv, base+"-orders"); n != 29 {
		t.Errorf("the origin holds %d messages, want 29", n)
	}
}
