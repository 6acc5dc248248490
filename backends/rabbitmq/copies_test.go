package rabbitmq_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestIdenticalCopiesMoveOneByOne: three byte-identical dead letters (a
// producer that retried a publish, an import run twice) get the ids X,
// A redrive that takes them one per batch must move all three:
// no id "gone" because the copies left renumbered (they were X, X-2
// after the first move), no halt because the copies still waiting for
// their batch read as the event coming back, and the DLQ empty at the
// end with the origin holding three copies.
func TestIdenticalCopiesMoveOneByOne(t *testing.T) {
	srv := broker.Get(t)
	base := uniq(t)
	ctx := context.Background()
	ch := srv.Channel(t)
	for _, q := range []string{base + "-orders", base + "-dlq"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	death := amqp.Table{"queue": base + "-orders", "reason": "rejected", "count": int64(1), "exchange": "",
		"routing-keys": []any{base + "-orders"}, "time": time.Unix(1767225600, 0)}
	for range 3 {
		if err := ch.PublishWithContext(ctx, "", base+"-dlq", true, false, amqp.Publishing{
			MessageId: "E1", ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: []byte(`{"order":1}`),
			Headers: amqp.Table{"x-death": []any{death}, "x-first-death-queue": base + "-orders", "x-first-death-reason": "rejected"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitDepth(t, srv, base+"-dlq", 3)
	ids := scanAll(t, open(t, srv, base+"-dlq", false))
	if len(ids) != 3 || ids[1].ID != ids[0].ID+"-2" || ids[2].ID != ids[0].ID+"-3" {
		t.Fatalf("three identical dead letters read as %v", ids)
	}
	dir := t.TempDir()
	source := srv.Source(base + "-dlq")
	planApproved(t, dir, source, "--ramp", "1")
	code, out := run(t, dir, "--source", source, "-o", "json", "redrive", "apply", "p.json")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	var doc struct {
		Status string `json:"status"`
		Moved  int    `json:"moved"`
		Failed int    `json:"failed"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):strings.LastIndex(out, "}")+1]), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Status != "completed" || doc.Moved != 3 || doc.Failed != 0 {
		t.Errorf("apply: status %s, moved %d, failed %d; want completed, 3, 0\n%s", doc.Status, doc.Moved, doc.Failed, out)
	}
	waitDepth(t, srv, base+"-dlq", 0)
	waitDepth(t, srv, base+"-orders", 3)
}
