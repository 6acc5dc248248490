package kafkadlq_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/kafka"
	"github.com/dlqctl/dlqctl/envelope"
)

func scanAll(t *testing.T, ctx context.Context, src backend.Source, after string) []envelope.Envelope {
	t.Helper()
	var out []envelope.Envelope
	if err := src.Scan(ctx, after, func(e envelope.Envelope) error { out = append(out, e); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func ids(es []envelope.Envelope) string {
	var s []string
	for _, e := range es {
		s = append(s, e.ID)
	}
	return strings.Join(s, " ")
}

func TestURLAndRegistration(t *testing.T) {
	reg := backend.NewRegistry(kafkadlq.Registration())
	r, err := reg.Lookup("kafkas://u@h:1?topic=x")
	if err != nil || r.Name != "kafka" {
		t.Fatalf("lookup: %v %v", r.Name, err)
	}
	p, err := r.Parse("kafka://alice:s3cr%40t@h1:9092,h2:9093?topic=orders.DLT&sasl=scram-sha-512")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.Display, "s3cr") || !strings.Contains(p.Display, "alice:xxxxx@h1:9092,h2:9093") || len(p.Secrets) != 1 || p.Secrets[0] != "s3cr@t" {
		t.Fatalf("display %q secrets %q", p.Display, p.Secrets)
	}
	for raw, want := range map[string]string{
		"kafka://h:9092":                             "topic= is required",
		"kafka://h?topic=x":                          "is not host:port",
		"kafka://h:9092?topic=x&nope=1":              `unknown query parameter "nope"`,
		"kafka://h:9092?topic=x&sasl=gssapi":         "want plain, scram-sha-256 or scram-sha-512",
		"kafka://h:9092?topic=x&sasl=plain":          "needs user:password@",
		"kafka://h:9092?topic=x&tls_insecure=true":   "tls_insecure needs kafkas://",
		"kafka://h:9092?topic=a%2Fb":                 "only letters, digits",
		"kafka://u:pw12@h:9092?topic=x&timeout=soon": "timeout=",
	} {
		_, err := r.Parse(raw)
		var ce *backend.ConfigError
		if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a ConfigError with %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "pw12") {
			t.Errorf("%s: error shows the password: %v", raw, err)
		}
	}
}

func TestOpenMissingTopicAndBadPassword(t *testing.T) {
	broker := kafkaServer(t)
	ctx := ctxFor(t)
	// A DLQ topic that does not exist opens, reads as empty and says so
	// (check and stats refuse it unless --allow-missing).
	missing, err := kafkadlq.Open(ctx, "kafka://"+broker.Bootstrap()+"?topic=does-not-exist-"+freshTopic(t, ""), kafkadlq.Options{})
	if err != nil {
		t.Fatalf("open missing topic: %v", err)
	}
	if !strings.HasSuffix(missing.MissingDLQ(), `" does not exist`) || !strings.Contains(missing.Notice(), "does not exist") {
		t.Errorf("missing topic: MissingDLQ %q, Notice %q", missing.MissingDLQ(), missing.Notice())
	}
	if n, err := missing.Len(ctx); err != nil || n != 0 {
		t.Errorf("missing topic: Len %d, %v; want 0", n, err)
	}
	missing.Close()
	_, err = kafkadlq.Open(ctx, "kafka://bob@"+broker.Bootstrap()+"?topic=x", kafkadlq.Options{})
	var ce *backend.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "no password") {
		t.Fatalf("user without password: %v", err)
	}
}

// TestScanOrderGetLen: a three-partition DLT read in dead-letter order
// (timestamps merged across partitions, each partition in offset order),
// with malformed records listed, Get and Len, and cursors.
func TestScanOrderGetLen(t *testing.T) {
	ctx := ctxFor(t)
	dlt := freshTopic(t, ".DLT")
	createTopic(t, ctx, dlt, 3, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	produceManual(t, ctx,
		springDeadLetter(dlt, 0, at(1), "orders", 0, 10, "k1", "E1", `{"n":1}`, "timeout calling payments"),
		springDeadLetter(dlt, 1, at(2), "orders", 1, 20, "k2", "E2", `{"n":2}`, "NullPointerException"),
		springDeadLetter(dlt, 0, at(5), "orders", 0, 11, "k1", "E3", `{"n":3}`, "timeout"),
		springDeadLetter(dlt, 2, at(3), "orders", 2, 30, "k3", "E4", `{"n":4}`, "order not found"),
		springDeadLetter(dlt, 1, at(4), "orders", 1, 21, "k2", "E5", `{"n":5}`, "timeout"),
	)
	bad := springDeadLetter(dlt, 2, at(6), "orders", 2, 31, "k3", "E6", `{"n":6}`, "x")
	bad.Headers[3].Value = []byte{1} // a partition header of one byte
	produceManual(t, ctx, bad)

	src := openTopic(t, ctx, dlt, kafkadlq.Options{})
	got := scanAll(t, ctx, src, "")
	if ids(got) != "0:0 1:0 2:0 1:1 0:1 2:1" {
		t.Fatalf("scan order %s", ids(got))
	}
	e := got[0]
	if e.EventID != "E1" || e.Origin.Topic != "orders" || e.Key != "k1" || e.LastError != "timeout calling payments" || !e.DeadLetteredAt.Equal(at(1)) {
		t.Fatalf("first entry %+v", e)
	}
	if !strings.Contains(got[5].Malformed, "4-byte") {
		t.Fatalf("malformed entry: %q", got[5].Malformed)
	}
	if page := scanAll(t, ctx, src, "2:0"); ids(page) != "1:1 0:1 2:1" {
		t.Fatalf("after 2:0: %s", ids(page))
	}
	// A lean scan gives the same entries, in the same order, malformed one
	// included, without properties, payload encodings and raw forms.
	var lean []envelope.Envelope
	if err := src.ScanLean(ctx, "", func(e envelope.Envelope) error { lean = append(lean, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(lean) != len(got) {
		t.Fatalf("lean scan: %d entries, want %d", len(lean), len(got))
	}
	for i, e := range got {
		if e.Properties == nil || e.PayloadEncoding == "" {
			t.Fatalf("whole entry %s has no properties or payload encoding", e.ID)
		}
		e.Properties, e.PayloadEncoding, e.Raw = nil, "", nil
		if !reflect.DeepEqual(lean[i], e) {
			t.Fatalf("lean entry %d:\n%+v\nwant\n%+v", i, lean[i], e)
		}
	}
	one, err := src.Get(ctx, "1:1")
	if err != nil || one.EventID != "E5" {
		t.Fatalf("Get 1:1 = %s, %v", one.EventID, err)
	}
	for _, id := range []string{"1:9", "7:0", "x"} {
		if _, err := src.Get(ctx, id); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("Get %s: %v", id, err)
		}
	}
	if n, err := src.Len(ctx); err != nil || n != 6 {
		t.Fatalf("Len = %d, %v", n, err)
	}
	tail, err := src.Tail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after := scanAll(t, ctx, src, tail); len(after) != 0 {
		t.Fatalf("after tail %s: %s", tail, ids(after))
	}
	// A record dead-lettered later, with an older timestamp, is still
	// after the watermark.
	produceManual(t, ctx, springDeadLetter(dlt, 1, at(0), "orders", 1, 22, "k2", "E7", `{}`, "late"))
	if after := scanAll(t, ctx, src, tail); ids(after) != "1:2" {
		t.Fatalf("after tail %s: %s", tail, ids(after))
	}
	if _, err := src.Get(ctx, "1:2"); err != nil {
		t.Fatal(err)
	}
	// Nothing read committed a consumer offset.
	groups, err := kadm.NewClient(rawClient(t)).ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups() {
		if strings.Contains(g, "dlqctl") {
			t.Fatalf("a read created consumer group %s", g)
		}
	}
}

// TestScanReadsBatchesLargerThanAFetch: a reader fetches at most 512 KiB
// a partition, and Kafka returns a larger batch only as the first of a
// fetch; a record batch of 800,000 incompressible bytes in two of eight
// partitions (so that each reader has partitions beside them) is still
// read whole by a scan, a lean scan and Get, and nothing after it is
// skipped.
func TestScanReadsBatchesLargerThanAFetch(t *testing.T) {
	ctx := ctxFor(t)
	dlt := freshTopic(t, ".DLT")
	createTopic(t, ctx, dlt, 8, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	big := make([]byte, 800_000)
	rand.NewChaCha8([32]byte{5, 6}).Read(big)
	var recs []*kgo.Record
	for i := range 24 {
		p := int32(i % 8)
		value := `{"n":` + strconv.Itoa(i) + `}`
		if i == 10 || i == 15 { // partitions 2 and 7, each in the middle of its three
			value = string(big)
		}
		recs = append(recs, springDeadLetter(dlt, p, base.Add(time.Duration(i)*time.Second), "orders", p, int64(i), "k", "E"+strconv.Itoa(i), value, "timeout"))
	}
	for _, r := range recs {
		produceManual(t, ctx, r) // one batch each
	}
	src := openTopic(t, ctx, dlt, kafkadlq.Options{})
	got := scanAll(t, ctx, src, "")
	var lean int
	if err := src.ScanLean(ctx, "", func(envelope.Envelope) error { lean++; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) || lean != len(recs) {
		t.Fatalf("scan %d entries, lean scan %d, want %d: %s", len(got), lean, len(recs), ids(got))
	}
	for _, e := range got {
		if e.EventID == "E10" || e.EventID == "E15" {
			if len(e.Payload) != len(big) {
				t.Errorf("%s: payload of %d bytes, want %d", e.ID, len(e.Payload), len(big))
			}
			one, err := src.Get(ctx, e.ID)
			if err != nil || len(one.Payload) != len(big) {
				t.Errorf("Get %s: %d bytes, %v", e.ID, len(one.Payload), err)
			}
		}
	}
}

// TestTransactionalDLT: a dead-letter producer that writes in
// transactions (Spring with a KafkaTransactionManager) leaves control
// records and aborted records in the DLT; only committed ones are entries.
func TestTransactionalDLT(t *testing.T) {
	ctx := ctxFor(t)
	dlt := freshTopic(t, ".DLT")
	createTopic(t, ctx, dlt, 1, nil)
	cl := rawClient(t, kgo.TransactionalID("spring-"+dlt), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i, commit := range []bool{true, false, true} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		r := springDeadLetter(dlt, 0, time.Now(), "orders", 0, int64(i), "k", "T"+string(rune('0'+i)), `{}`, "timeout")
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	src := openTopic(t, ctx, dlt, kafkadlq.Options{})
	got := scanAll(t, ctx, src, "")
	if len(got) != 2 || got[0].EventID != "T0" || got[1].EventID != "T2" {
		t.Fatalf("entries %s", ids(got))
	}
}

// TestSASL connects through the broker's SASL_PLAINTEXT listener with each
// mechanism, the password from the URL, from DLQCTL_KAFKA_PASSWORD and
// from the profile; a wrong password fails without showing it.
func TestSASL(t *testing.T) {
	broker := kafkaServer(t)
	ctx := ctxFor(t)
	dlt := freshTopic(t, ".DLT")
	createTopic(t, ctx, dlt, 1, nil)
	produceManual(t, ctx, springDeadLetter(dlt, 0, time.Now(), "orders", 0, 1, "k", "E1", `{}`, "timeout"))
	s := broker.SASL()
	reg := backend.NewRegistry(kafkadlq.Registration())
	for _, mech := range []string{"plain", "scram-sha-256", "scram-sha-512"} {
		t.Run(mech, func(t *testing.T) {
			cases := map[string]struct {
				url    string
				env    map[string]string
				secret string
			}{
				"url":     {url: "kafka://" + s.User + ":" + s.Password + "@" + s.Bootstrap + "?topic=" + dlt + "&sasl=" + mech},
				"env":     {url: "kafka://" + s.User + "@" + s.Bootstrap + "?topic=" + dlt + "&sasl=" + mech, env: map[string]string{"DLQCTL_KAFKA_PASSWORD": s.Password}},
				"profile": {url: "kafka://" + s.User + "@" + s.Bootstrap + "?topic=" + dlt + "&sasl=" + mech, secret: s.Password},
			}
			for name, c := range cases {
				opts := backend.OpenOptions{
					Getenv: func(k string) string { return c.env[k] },
					Secret: func(k string) string {
						if k == "kafka_password" {
							return c.secret
						}
						return ""
					},
				}
				src, err := reg.Open(ctx, c.url, opts)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got := scanAll(t, ctx, src, "")
				if len(got) != 1 || got[0].EventID != "E1" || strings.Contains(src.String(), s.Password) {
					t.Fatalf("%s: %s via %s", name, ids(got), src.String())
				}
				src.Close()
			}
			bad := "kafka://" + s.User + ":wrong-pass-123@" + s.Bootstrap + "?topic=" + dlt + "&sasl=" + mech + "&timeout=5s"
			_, err := reg.Open(ctx, bad, backend.OpenOptions{Getenv: func(string) string { return "" }, Secret: func(string) string { return "" }})
			if err == nil || strings.Contains(err.Error(), "wrong-pass-123") {
				t.Fatalf("wrong password: %v", err)
			}
		})
	}
}
