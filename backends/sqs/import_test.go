package sqsdlq_test

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// TestImportRoundTrip: an envelope with more fields than SQS's 10
// attributes reads back the same; a binary payload too; an id imported
// already is refused.
func TestImportRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	q := open(t, ctx, p)
	ts := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	full := envelope.Envelope{
		ID: "1732890000000-0", EventID: "E42", PayloadVersion: "3", ContentType: "application/json", Key: "order-123",
		Origin:          envelope.Origin{Backend: "redis", Topic: "orders", Subscription: "workers", Consumer: "w2"},
		FirstReceivedAt: ts, DeadLetteredAt: ts.Add(5 * time.Minute), Attempts: 5, LastError: "timeout", ErrorClass: "transient",
		Owner: "team-payments", RecoverBy: ts.Add(24 * time.Hour), SchemaInfo: "orders.v3", RedriveCount: 1,
		Properties: map[string]string{"tenant": "acme", "region": "eu"},
		Payload:    []byte(`{"orderId":"order-123"}`),
	}
	full.FillFingerprint()
	bin := envelope.Envelope{ID: "bin-1", EventID: "E43", Payload: []byte{0, 1, 2, 0xff}}
	bin.FillFingerprint()
	for _, e := range []envelope.Envelope{full, bin} {
		if _, err := q.Import(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Import(ctx, full); !errors.Is(err, backend.ErrExists) {
		t.Fatalf("second import: %v, want ErrExists", err)
	}
	got := scanAll(t, ctx, q)
	if len(got) != 2 {
		t.Fatalf("scan saw %d", len(got))
	}
	byEvent := map[string]envelope.Envelope{}
	for _, e := range got {
		byEvent[e.EventID] = e
	}
	g := byEvent["E42"]
	if g.Malformed != "" || g.Fingerprint != full.Fingerprint || g.Key != full.Key || g.Origin.Topic != "orders" ||
		g.Origin.Subscription != "workers" || g.Attempts != 5 || g.Owner != full.Owner || !g.RecoverBy.Equal(full.RecoverBy) ||
		!g.DeadLetteredAt.Equal(full.DeadLetteredAt) || g.RedriveCount != 1 || g.SchemaInfo != full.SchemaInfo || string(g.Payload) != string(full.Payload) {
		t.Fatalf("read back %+v\nwant %+v", g, full)
	}
	wantProps := map[string]string{"tenant": "acme", "region": "eu", envelope.ImportedFromProperty: full.ID}
	if !maps.Equal(g.Properties, wantProps) {
		t.Fatalf("properties %v, want %v", g.Properties, wantProps)
	}
	b := byEvent["E43"]
	if b.Malformed != "" || string(b.Payload) != string(bin.Payload) || b.Fingerprint != bin.Fingerprint {
		t.Fatalf("binary payload read back as %q (%s) %s", b.Payload, b.Malformed, b.Fingerprint)
	}
}
