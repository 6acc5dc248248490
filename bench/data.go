package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"
)

// entry is one synthetic DLQ entry, the same for every backend: what a
// consumer would have dead-lettered during an incident.
type entry struct {
	EventID         string
	Fingerprint     string
	Key             string
	OriginStream    string
	OriginGroup     string
	OriginConsumer  string
	Attempts        int
	LastError       string
	ErrorClass      string
	FirstReceivedAt time.Time
	DeadLetteredAt  time.Time
	RecoverBy       time.Time // zero for most entries
	Owner           string
	Tenant          string
	Payload         []byte
}

var (
	origins = []struct{ stream, group, owner string }{
		{"orders", "order-workers", "team-orders"},
		{"payments", "payment-workers", "team-payments"},
		{"shipments", "shipping-workers", "team-logistics"},
		{"invoices", "billing-workers", "team-billing"},
		{"notifications", "notify-workers", "team-comms"},
	}
	currencies = []string{"EUR", "USD", "GBP", "CHF"}
	channels   = []string{"web", "ios", "android", "partner-api"}
	tenants    = []string{"acme", "globex", "initech", "umbrella"}
)

// lastErrors is a weighted mix matching every built-in category (the built-in category rules),
// with a share that matches none, which walks every rule.
var lastErrors = []struct {
	weight     int
	text       string
	errorClass string
}{
	{25, "timeout calling payments: context deadline exceeded", ""},
	{8, "dial tcp 10.0.3.7:5432: connect: connection refused", ""},
	{5, "upstream answered 503 Service Unavailable", ""},
	{4, "rates API: 429 Too Many Requests", ""},
	{8, "json: cannot unmarshal string into Go struct field Order.amount of type int", ""},
	{5, "validation: missing field customerId", ""},
	{5, "panic: runtime error: invalid memory address or nil pointer dereference", ""},
	{3, "runtime error: index out of range [3] with length 3", ""},
	{4, "orders-api: 403 Forbidden: token lacks scope orders:write", ""},
	{9, "customer record not found", ""},
	{5, "unknown order referenced by shipment", ""},
	{9, "business rule violated: amount exceeds the customer's credit limit", ""},
	{5, "upstream hiccup while calling ledger", "transient"},
	{5, "rejected by fraud screening", ""},
}

var lastErrorTotal = func() int {
	t := 0
	for _, e := range lastErrors {
		t += e.weight
	}
	return t
}()

// generator makes entries i = 0..n-1 deterministically, dead-lettered in
// order over the 5 days before base.
type generator struct {
	n    int
	base time.Time
}

func newGenerator(n int, now time.Time) generator {
	return generator{n: n, base: now.UTC().Truncate(time.Second).Add(-5 * 24 * time.Hour)}
}

func (g generator) entry(i int) entry {
	r := rand.New(rand.NewPCG(uint64(i), 0x646c7163746c))
	o := origins[r.IntN(len(origins))]
	span := 5 * 24 * time.Hour
	dl := g.base.Add(time.Duration(int64(span) / int64(max(g.n, 1)) * int64(i))).Truncate(time.Second)
	e := entry{
		EventID:         fmt.Sprintf("evt-%s-%09d", o.stream[:3], i),
		Key:             fmt.Sprintf("order-%07d", r.IntN(5_000_000)),
		OriginStream:    o.stream,
		OriginGroup:     o.group,
		OriginConsumer:  fmt.Sprintf("worker-%d", r.IntN(8)),
		Attempts:        1 + r.IntN(10),
		FirstReceivedAt: dl.Add(-time.Duration(1+r.IntN(600)) * time.Second),
		DeadLetteredAt:  dl,
		Owner:           o.owner,
		Tenant:          tenants[r.IntN(len(tenants))],
	}
	if r.IntN(10) < 3 {
		e.RecoverBy = dl.Add(time.Duration(12+r.IntN(72)) * time.Hour)
	}
	w := r.IntN(lastErrorTotal)
	for _, le := range lastErrors {
		if w < le.weight {
			e.LastError, e.ErrorClass = le.text, le.errorClass
			break
		}
		w -= le.weight
	}
	e.Payload = payload(r, e.Key, dl)
	sum := sha256.Sum256(e.Payload)
	e.Fingerprint = "sha256:" + hex.EncodeToString(sum[:])
	return e
}

// payload is a compact JSON order of about 200 bytes.
func payload(r *rand.Rand, key string, at time.Time) []byte {
	b := fmt.Appendf(nil,
		`{"orderId":%q,"customerId":"cust-%06d","amount":%d,"currency":%q,"items":[{"sku":"SKU-%05d","qty":%d},{"sku":"SKU-%05d","qty":%d}],"createdAt":%q,"channel":%q,"note":"`,
		key, r.IntN(1_000_000), 100+r.IntN(500_000), currencies[r.IntN(len(currencies))],
		r.IntN(100_000), 1+r.IntN(5), r.IntN(100_000), 1+r.IntN(5),
		at.Add(-time.Hour).Format(time.RFC3339), channels[r.IntN(len(channels))])
	const letters = "abcdefghijklmnopqrstuvwxyz "
	for len(b) < 198 {
		b = append(b, letters[r.IntN(len(letters))])
	}
	return append(b, `"}`...)
}

// redisValues is the entry as Redis stream fields (the canonical envelope form, docs/json.md default names).
func (e entry) redisValues() []any {
	v := []any{
		"event_id", e.EventID,
		"fingerprint", e.Fingerprint,
		"payload", e.Payload,
		"content_type", "application/json",
		"key", e.Key,
		"origin_stream", e.OriginStream,
		"origin_group", e.OriginGroup,
		"origin_consumer", e.OriginConsumer,
		"attempts", e.Attempts,
		"last_error", e.LastError,
		"first_received_at", e.FirstReceivedAt.Format(time.RFC3339),
		"dead_lettered_at", e.DeadLetteredAt.Format(time.RFC3339),
		"owner", e.Owner,
		"schema_info", "orders.v3",
		"tenant", e.Tenant,
	}
	if e.ErrorClass != "" {
		v = append(v, "error_class", e.ErrorClass)
	}
	if !e.RecoverBy.IsZero() {
		v = append(v, "recover_by", e.RecoverBy.Format(time.RFC3339))
	}
	return v
}
