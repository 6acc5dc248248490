package rabbitmq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/rabbitmq/rabbitmqtest"
	"github.com/dlqctl/dlqctl/envelope"
)

// streamIDs are the entries of the stream DLQ dlq, as id=event.
func streamIDs(t *testing.T, srv *rabbitmqtest.Server, dlq string) []string {
	t.Helper()
	var ids []string
	for _, e := range scanAll(t, open(t, srv, dlq, false)) {
		ids = append(ids, e.ID+"="+e.EventID)
	}
	return ids
}

// TestStreamDLQ: a stream DLQ is read by offset. Thirty reads change
// nothing (no delivery counts: ids, order and content stay); its ids are
// offsets, stable as entries before them are removed; a move publishes to
// the origin and records the removal, after which no read shows the entry;
// Get, Len, Scan after a cursor and the tail (the last offset) work.
func TestStreamDLQ(t *testing.T) {
	srv := broker.Get(t)
	base := uniq(t)
	ctx := context.Background()
	streamDLQ(t, srv, base+"-orders", base+"-dlq")
	deadLetterTo(t, srv, base+"-orders", "E1", "E2", "E3", "E4", "E5")
	var first []string
	deadline := time.Now().Add(20 * time.Second)
	for len(first) < 5 && time.Now().Before(deadline) {
		first = streamIDs(t, srv, base+"-dlq")
	}
	if strings.Join(first, ",") != "0=E1,1=E2,2=E3,3=E4,4=E5" {
		t.Fatalf("the stream DLQ reads as %v", first)
	}
	for i := range 30 {
		if got := streamIDs(t, srv, base+"-dlq"); strings.Join(got, ",") != strings.Join(first, ",") {
			t.Fatalf("read %d: %v, want %v", i, got, first)
		}
	}
	q := open(t, srv, base+"-dlq", true)
	es := scanAll(t, q)
	if es[0].Origin.Topic != base+"-orders" || es[0].LastError != "rejected" {
		t.Errorf("entry: %+v", es[0])
	}
	items := []backend.MoveItem{
		{Seq: 1, ID: "1", EventID: "E2", Fingerprint: es[1].Fingerprint, Dest: base + "-orders"},
		{Seq: 2, ID: "3", EventID: "E4", Fingerprint: es[3].Fingerprint, Dest: base + "-orders"},
	}
	if res, err := q.Publish(ctx, items, backend.Markers{RunID: "run-s"}); err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("publish: %v %+v", err, res)
	}
	if rm, err := q.Remove(ctx, items); err != nil || !rm[0].Removed || !rm[1].Removed {
		t.Fatalf("remove: %v %+v", err, rm)
	}
	if got := streamIDs(t, srv, base+"-dlq"); strings.Join(got, ",") != "0=E1,2=E3,4=E5" {
		t.Errorf("after the move the stream DLQ reads as %v", got)
	}
	waitDepth(t, srv, base+"-orders", 2)
	fresh := open(t, srv, base+"-dlq", false)
	if n, err := fresh.Len(ctx); err != nil || n != 3 {
		t.Errorf("Len: %d %v, want 3", n, err)
	}
	if e, err := fresh.Get(ctx, "2"); err != nil || e.EventID != "E3" {
		t.Errorf("Get 2: %+v %v", e, err)
	}
	if _, err := fresh.Get(ctx, "1"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Get of a removed entry: %v", err)
	}
	var after []string
	if err := fresh.Scan(ctx, "0", func(e envelope.Envelope) error { after = append(after, e.ID); return nil }); err != nil || strings.Join(after, ",") != "2,4" {
		t.Errorf("Scan after 0: %v %v", after, err)
	}
	if n, tail, err := fresh.LenTail(ctx); err != nil || n != 3 || tail != "4" {
		t.Errorf("LenTail: %d %q %v", n, tail, err)
	}
	if st := fresh.CheckDLQ(ctx); !st.OK || !strings.Contains(st.Detail, "a stream DLQ") {
		t.Errorf("doctor: %+v", st)
	}
}

// streamDLQ declares origin and has dlq init make dlq, a stream DLQ fed
// by its dead-letter exchange.
func streamDLQ(t *testing.T, srv *rabbitmqtest.Server, origin, dlq string) {
	t.Helper()
	if err := rabbitmqtest.DeclareOrigin(context.Background(), srv.Channel(t), origin, origin+".dlx"); err != nil {
		t.Fatal(err)
	}
	if code, out := run(t, t.TempDir(), "dlq", "init", srv.Source(origin)+"&dlq="+dlq); code != 0 {
		t.Fatalf("dlq init: %d\n%s", code, out)
	}
}

// deadLetterTo publishes a message per id to origin and rejects each one,
// for the broker to dead-letter; it does not wait for a DLQ.
func deadLetterTo(t *testing.T, srv *rabbitmqtest.Server, origin string, ids ...string) {
	t.Helper()
	c, err := srv.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := ch.PublishWithContext(context.Background(), "", origin, true, false, publishing(id)); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := ch.Consume(origin, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range ids {
		select {
		case d := <-ds:
			d.Nack(false, false)
		case <-time.After(30 * time.Second):
			t.Fatal("no delivery from the origin")
		}
	}
}

// TestDLQInitStream: dlq init makes a stream DLQ for an origin queue,
// bound to its dead-letter exchange, read by the source it prints; a
// second run finds it (created false); a dry run creates nothing.
func TestDLQInitStream(t *testing.T) {
	srv := broker.Get(t)
	base := uniq(t)
	ctx := context.Background()
	// An origin with a classic DLQ through a fanout DLX (the usual setup).
	if err := rabbitmqtest.DeclareDLX(ctx, srv.Channel(t), base+"-orders", base+"-dlq", false, 0); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	raw := srv.Source(base + "-orders")
	initDoc := func(args ...string) (int, map[string]any, string) {
		t.Helper()
		code, out := run(t, dir, append([]string{"-o", "json", "dlq", "init", raw}, args...)...)
		var doc map[string]any
		if i := strings.Index(out, "{"); i >= 0 {
			json.Unmarshal([]byte(out[i:strings.LastIndex(out, "}")+1]), &doc)
		}
		return code, doc, out
	}
	code, doc, out := initDoc("--dry-run")
	if code != 0 || doc["created"] != true || doc["dry_run"] != true || doc["stream"] != base+"-orders.dlq-stream" {
		t.Fatalf("dry run: %d %v\n%s", code, doc, out)
	}
	if _, err := srv.Channel(t).QueueDeclarePassive(base+"-orders.dlq-stream", true, false, false, false, nil); err == nil {
		t.Fatal("a dry run declared the stream")
	}
	code, doc, out = initDoc()
	if code != 0 || doc["created"] != true || doc["backend"] != "rabbitmq" {
		t.Fatalf("init: %d %v\n%s", code, doc, out)
	}
	subjects := fmt.Sprint(doc["subjects"])
	if !strings.Contains(subjects, "exchange:"+base+"-dlq.dlx/") {
		t.Errorf("subjects %s, want the dead-letter exchange", subjects)
	}
	if code, doc, out = initDoc(); code != 0 || doc["created"] != false {
		t.Errorf("init again: %d %v\n%s", code, doc, out)
	}
	source, _ := doc["source"].(string)
	if !strings.Contains(source, "queue="+base+"-orders.dlq-stream") || strings.Contains(source, "guest:guest") {
		t.Errorf("source %q", source)
	}
	deadLetter(t, srv, base+"-orders", base+"-dlq", "E1", "E2")
	var got []string
	for deadline := time.Now().Add(20 * time.Second); len(got) < 2 && time.Now().Before(deadline); {
		got = streamIDs(t, srv, base+"-orders.dlq-stream")
	}
	if strings.Join(got, ",") != "0=E1,1=E2" {
		t.Errorf("the stream DLQ holds %v after two dead letters", got)
	}
	// Without the management API, the exchange must be given.
	plain := strings.TrimSuffix(srv.URL(), "/") + "/?queue=" + base + "-orders"
	if code, out := run(t, dir, "dlq", "init", plain); code != 2 || !strings.Contains(out, "dlx=") {
		t.Errorf("init without admin= or dlx=: %d\n%s", code, out)
	}
}
