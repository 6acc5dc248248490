package rabbitmq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/rabbitmq"
	"github.com/dlqctl/dlqctl/backends/rabbitmq/rabbitmqtest"
	"github.com/dlqctl/dlqctl/envelope"
)

// broker is the test binary's one broker, started by the first test that
// needs it; tests keep apart by queue name.
var broker = rabbitmqtest.Shared()

func TestMain(m *testing.M) {
	os.Exit(broker.Finish(m.Run(), os.Stderr))
}

func uniq(t *testing.T) string {
	return fmt.Sprintf("t%d-%s", time.Now().UnixNano()%1e9, strings.ReplaceAll(t.Name(), "/", "-"))
}

// deadLetter publishes a message per id to origin and nacks each one
// (requeue=false) from a consumer, so that the broker dead-letters them
// through the DLX; it waits until the DLQ holds them all.
func deadLetter(t *testing.T, srv *rabbitmqtest.Server, origin, dlq string, ids ...string) {
	t.Helper()
	c, err := srv.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() // the consumer must not take what is redriven later
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
	waitDepth(t, srv, dlq, len(ids))
}

// publishing is the message the tests dead-letter for event id.
func publishing(id string) amqp.Publishing {
	return amqp.Publishing{
		MessageId: id, ContentType: "application/json", DeliveryMode: amqp.Persistent,
		Body: []byte(`{"id":"` + id + `"}`), Headers: amqp.Table{"tenant": "acme"},
	}
}

func waitDepth(t *testing.T, srv *rabbitmqtest.Server, queue string, n int) {
	t.Helper()
	ch := srv.Channel(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st.Messages == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s holds %d messages, want %d", queue, st.Messages, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func open(t *testing.T, srv *rabbitmqtest.Server, dlq string, admin bool) *rabbitmq.Queue {
	t.Helper()
	raw := srv.Source(dlq)
	if !admin {
		raw = strings.TrimSuffix(srv.URL(), "/") + "/?queue=" + dlq
	}
	q, err := rabbitmq.Open(context.Background(), raw, rabbitmq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func scanAll(t *testing.T, q *rabbitmq.Queue) []envelope.Envelope {
	t.Helper()
	var out []envelope.Envelope
	if err := q.Scan(context.Background(), "", func(e envelope.Envelope) error { out = append(out, e); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestScanRealDeadLetters(t *testing.T) {
	srv := broker.Get(t)
	base := withDLX(t, srv, false)
	ctx := context.Background()
	deadLetter(t, srv, base+"-orders", base+"-dlq", "E1", "E2", "E3", "E1")
	q := open(t, srv, base+"-dlq", srv.AdminURL() != "")
	first, second := scanAll(t, q), scanAll(t, q)
	if len(first) != 4 || len(second) != 4 {
		t.Fatalf("scans saw %d and %d entries, want 4", len(first), len(second))
	}
	for i, e := range first {
		if e.Malformed != "" || e.Origin.Topic != base+"-orders" || e.LastError != "rejected" || e.Attempts != 1 || e.DeadLetteredAt.IsZero() {
			t.Errorf("entry %d: %+v", i, e)
		}
		if e.ID != second[i].ID || e.EventID != second[i].EventID {
			t.Errorf("entry %d changed between scans: %s/%s vs %s/%s", i, e.ID, e.EventID, second[i].ID, second[i].EventID)
		}
	}
	if got := []string{first[0].EventID, first[1].EventID, first[2].EventID, first[3].EventID}; strings.Join(got, ",") != "E1,E2,E3,E1" {
		t.Errorf("order %v", got)
	}
	if first[0].ID == first[3].ID {
		t.Error("two dead letters of one event share an id")
	}
	waitDepth(t, srv, base+"-dlq", 4)
	// A cursor resumes after its entry.
	var after []string
	if err := q.Scan(ctx, first[1].ID, func(e envelope.Envelope) error { after = append(after, e.EventID); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(after, ",") != "E3,E1" {
		t.Errorf("after cursor: %v", after)
	}
	if e, err := q.Get(ctx, first[2].ID); err != nil || e.EventID != "E3" {
		t.Errorf("Get: %v %+v", err, e)
	}
	if _, err := q.Get(ctx, "nope"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Get nope: %v", err)
	}
}

func TestMoveToOrigin(t *testing.T) {
	srv := broker.Get(t)
	base := withDLX(t, srv, false)
	ctx := context.Background()
	deadLetter(t, srv, base+"-orders", base+"-dlq", "E1", "E2", "E3", "E4")
	q := open(t, srv, base+"-dlq", false)
	before := scanAll(t, q)
	items := []backend.MoveItem{
		{Seq: 1, ID: before[1].ID, EventID: "E2", Fingerprint: before[1].Fingerprint, Dest: q.DefaultDest(before[1].Origin.Topic)},
		{Seq: 2, ID: before[3].ID, EventID: "E4", Fingerprint: before[3].Fingerprint, Dest: base + "-nosuch"},
		{Seq: 3, ID: "gone", EventID: "E9", Fingerprint: "sha256:00", Dest: base + "-orders"},
	}
	res, err := q.Publish(ctx, items, backend.Markers{RunID: "run1"})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].DestID != "E2" {
		t.Errorf("item 1: %+v", res[0])
	}
	if res[1].Err == nil || !strings.Contains(res[1].Err.Error(), "unroutable") {
		t.Errorf("item 2 to a queue that does not exist: %v", res[1].Err)
	}
	if !errors.Is(res[2].Err, backend.ErrNotFound) {
		t.Errorf("item 3: %v", res[2].Err)
	}
	rm, err := q.Remove(ctx, items[:1])
	if err != nil || !rm[0].Removed {
		t.Fatalf("remove: %v %+v", err, rm)
	}
	after := scanAll(t, q)
	if len(after) != 3 || after[0].ID != before[0].ID || after[1].ID != before[2].ID || after[2].ID != before[3].ID {
		t.Fatalf("after the move the DLQ holds %d entries; ids must not move: %v", len(after), after)
	}
	// The origin got E2 with its message_id, persistent, its own headers
	// kept, the broker's x-death moved aside and the markers added.
	ch := srv.Channel(t)
	d, ok, err := ch.Get(base+"-orders", true)
	if err != nil || !ok {
		t.Fatalf("origin: %v %v", ok, err)
	}
	if d.MessageId != "E2" || d.DeliveryMode != amqp.Persistent || d.Headers["tenant"] != "acme" || d.Headers["x-death"] != nil ||
		d.Headers["dlqctl-x-death"] == nil || d.Headers["redrive_count"] != "1" || d.Headers[backend.MarkerRunID] != "run1" {
		t.Errorf("redriven message: %+v headers %v", d, d.Headers)
	}
	// Remove of an entry that is not there.
	rm, err = q.Remove(ctx, items[2:])
	if err != nil || !errors.Is(rm[0].Err, backend.ErrNotFound) {
		t.Errorf("remove gone: %v %+v", err, rm)
	}
}

func TestQuorumDLQStopsBeforeTheLimit(t *testing.T) {
	srv := broker.Get(t)
	if srv.AdminURL() == "" {
		t.Fatal("this test needs the management API (DLQCTL_TEST_AMQP_ADMIN)")
	}
	base := uniq(t)
	ctx := context.Background()
	ch := srv.Channel(t)
	// The DLQ itself is a quorum queue with a delivery limit of 3.
	quorumDLQ(t, srv, ch, base+"-orders", base+"-dlq-plain", base+"-dlq", 3)
	if _, err := rabbitmq.Open(ctx, strings.TrimSuffix(srv.URL(), "/")+"/?queue="+base+"-dlq", rabbitmq.Options{}); err != nil {
		t.Fatal(err)
	}
	noAdmin := open(t, srv, base+"-dlq", false)
	var ce *backend.ConfigError
	if err := noAdmin.Scan(ctx, "", func(envelope.Envelope) error { return nil }); !errors.As(err, &ce) || !strings.Contains(err.Error(), "admin=") {
		t.Errorf("quorum DLQ without admin=: %v", err)
	}
	q := open(t, srv, base+"-dlq", true)
	for i := 0; i < 2; i++ {
		if n := len(scanAll(t, q)); n != 1 {
			t.Fatalf("scan %d saw %d entries", i, n)
		}
	}
	// Two reads leave the message at limit-1 (2): every later read is
	// refused before reading anything, so the message keeps a read in
	// hand for a read that lost the record (see
	// TestQuorumDLQReadsRecordLost), and is never pushed past the limit.
	for i := 0; i < 3; i++ {
		err := q.Scan(ctx, "", func(envelope.Envelope) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "delivery limit is 3") {
			t.Fatalf("scan %d: %v, want a refusal naming the limit", 3+i, err)
		}
	}
	if _, err := open(t, srv, base+"-dlq", true).Len(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	waitDepth(t, srv, base+"-dlq", 1) // nothing dropped
	if d, ok, err := ch.Get(base+"-dlq", false); err != nil || !ok || d.Headers["x-delivery-count"] != int64(2) {
		t.Fatalf("the message after the refusals: %v %v %v", ok, err, d.Headers)
	}
}

// TestQuorumDLQReadsRecordLost: with the record of dlqctl's reads of a
// quorum DLQ gone (dlqctl's queues cleaned up, a definitions reset), a
// read must still drop nothing. dlqctl read the DLQ up to its refusal;
// the record is deleted; one more stats reads with a window of one
// message, sees the head's own x-delivery-count, and stops there: the
// head reaches the limit, nothing passes it. (With unlimited prefetch it
// took all twenty, and closing the channel dropped them all.)
func TestQuorumDLQReadsRecordLost(t *testing.T) {
	srv := broker.Get(t)
	if srv.AdminURL() == "" {
		t.Fatal("this test needs the management API (DLQCTL_TEST_AMQP_ADMIN)")
	}
	base := uniq(t)
	ctx := context.Background()
	ch := srv.Channel(t)
	var ids []string
	for i := range 20 {
		ids = append(ids, fmt.Sprintf("E%02d", i))
	}
	quorumDLQ(t, srv, ch, base+"-orders", base+"-dlq-plain", base+"-dlq", 3, ids...)
	q := open(t, srv, base+"-dlq", true)
	refused := false
	for i := 0; i < 5 && !refused; i++ {
		refused = q.Scan(ctx, "", func(envelope.Envelope) error { return nil }) != nil
	}
	if !refused {
		t.Fatal("five reads of a quorum DLQ with a delivery limit of 3 were never refused")
	}
	if _, err := ch.QueueDelete("dlqctl.reads."+base+"-dlq", false, false, false); err != nil {
		t.Fatal(err)
	}
	err := open(t, srv, base+"-dlq", true).Scan(ctx, "", func(envelope.Envelope) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "delivery limit is 3") {
		t.Fatalf("a read without the record: %v, want it stopped at the limit", err)
	}
	time.Sleep(2 * time.Second) // a quorum queue drops asynchronously
	waitDepth(t, srv, base+"-dlq", 20)
}

// TestQuorumDLQWithNoReadInHand: RabbitMQ 3.10 drops a quorum message at
// its first return when x-delivery-limit is 0 or negative, and every read
// of a queue returns what it saw. Such a DLQ is read by nothing: every
// read is refused before it consumes, saying why and naming dlq init, and
// every message is still there with no delivery counted. (Read as "no
// limit", one scan dropped them all.)
func TestQuorumDLQWithNoReadInHand(t *testing.T) {
	srv := broker.Get(t)
	if srv.AdminURL() == "" {
		t.Fatal("this test needs the management API (DLQCTL_TEST_AMQP_ADMIN)")
	}
	ctx := context.Background()
	for _, limit := range []int{0, -1} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			base := uniq(t)
			ch := srv.Channel(t)
			ids := []string{"E1", "E2", "E3"}
			quorumDLQ(t, srv, ch, base+"-orders", base+"-dlq-plain", base+"-dlq", limit, ids...)
			q := open(t, srv, base+"-dlq", true)
			for _, read := range []func() error{
				func() error { return q.Scan(ctx, "", func(envelope.Envelope) error { return nil }) },
				func() error { _, err := q.Get(ctx, "E1"); return err },
				func() error { return q.ScanFingerprints(ctx, func(string, string) error { return nil }) },
			} {
				if err := read(); err == nil || !strings.Contains(err.Error(), "delivery limit is 0") || !strings.Contains(err.Error(), "dlq init") {
					t.Errorf("a read of a quorum DLQ with x-delivery-limit %d: %v, want a refusal saying why and naming dlq init", limit, err)
				}
			}
			if n, err := q.Len(ctx); err != nil || n != int64(len(ids)) {
				t.Errorf("Len: %d, %v; want %d", n, err, len(ids))
			}
			// Taken with auto-ack, which returns nothing: every message
			// is there, never delivered before.
			var got []string
			for {
				d, ok, err := ch.Get(base+"-dlq", true)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				if n, _ := d.Headers["x-delivery-count"].(int64); n != 0 {
					t.Errorf("%s was delivered %d times before", d.MessageId, n)
				}
				got = append(got, d.MessageId)
			}
			if strings.Join(got, ",") != strings.Join(ids, ",") {
				t.Errorf("the DLQ holds %v after the reads, want %v", got, ids)
			}
		})
	}
}

// quorumDLQ dead-letters messages (ids, E1 when none) from origin through
// a DLX into both classic, a classic DLQ, and quorum, a quorum queue with
// the given delivery limit bound to the same exchange.
func quorumDLQ(t *testing.T, srv *rabbitmqtest.Server, ch *amqp.Channel, origin, classic, quorum string, limit int, ids ...string) {
	t.Helper()
	if err := rabbitmqtest.DeclareDLX(context.Background(), ch, origin, classic, false, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(quorum, true, false, false, false, amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(limit)}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(quorum, "", classic+".dlx", false, nil); err != nil {
		t.Fatal(err)
	}
	if len(ids) == 0 {
		ids = []string{"E1"}
	}
	deadLetter(t, srv, origin, classic, ids...)
	waitDepth(t, srv, quorum, len(ids))
}

// TestMoveDeepInTheDLQ: a move reads from the head in a window that
// widens until it has what it wants; nothing ahead is lost or reordered.
func TestMoveDeepInTheDLQ(t *testing.T) {
	srv := broker.Get(t)
	base := withDLX(t, srv, false)
	ctx := context.Background()
	var ids []string
	for i := range 60 {
		ids = append(ids, fmt.Sprintf("E%02d", i))
	}
	deadLetter(t, srv, base+"-orders", base+"-dlq", ids...)
	q := open(t, srv, base+"-dlq", false)
	before := scanAll(t, q)
	it := backend.MoveItem{Seq: 1, ID: before[50].ID, EventID: "E50", Fingerprint: before[50].Fingerprint, Dest: base + "-orders"}
	res, err := q.Publish(ctx, []backend.MoveItem{it}, backend.Markers{RunID: "r"})
	if err != nil || res[0].Err != nil {
		t.Fatalf("publish: %v %+v", err, res)
	}
	if rm, err := q.Remove(ctx, []backend.MoveItem{it}); err != nil || !rm[0].Removed {
		t.Fatalf("remove: %v %+v", err, rm)
	}
	after := scanAll(t, q)
	if len(after) != 59 {
		t.Fatalf("%d left, want 59", len(after))
	}
	for i, e := range after {
		want := before[i]
		if i >= 50 {
			want = before[i+1]
		}
		if e.ID != want.ID {
			t.Fatalf("entry %d: %s (%s), want %s (%s)", i, e.ID, e.EventID, want.ID, want.EventID)
		}
	}
}

// TestScanFingerprintsMatchesScan: the staleness check's cheap pass gives
// what a full scan gives.
func TestScanFingerprintsMatchesScan(t *testing.T) {
	srv := broker.Get(t)
	base := withDLX(t, srv, false)
	ctx := context.Background()
	deadLetter(t, srv, base+"-orders", base+"-dlq", "E1", "E2")
	ch := srv.Channel(t)
	for _, h := range []amqp.Table{{"fingerprint": "sha256:abc"}, {}} { // carried; and no event ID: malformed
		if err := ch.PublishWithContext(ctx, "", base+"-dlq", false, false, amqp.Publishing{Headers: h, Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	waitDepth(t, srv, base+"-dlq", 4)
	q := open(t, srv, base+"-dlq", false)
	var want, got []string
	for _, e := range scanAll(t, q) {
		want = append(want, e.ID+"="+e.Fingerprint)
	}
	if err := q.ScanFingerprints(ctx, func(id, fp string) error { got = append(got, id+"="+fp); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("ScanFingerprints %v\nScan             %v", got, want)
	}
}

// TestLeaseSurvivesItsConnection: when the lease connection is closed
// under it (here by the management API, as a broker restart would), the
// run takes the queue again and keeps the DLQ; a lease another run took
// meanwhile is reported lost.
func TestLeaseSurvivesItsConnection(t *testing.T) {
	srv := broker.Get(t)
	if srv.AdminURL() == "" {
		t.Fatal("this test needs the management API")
	}
	base := uniq(t)
	ctx := context.Background()
	if _, err := srv.Channel(t).QueueDeclare(base+"-dlq", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	a, b := open(t, srv, base+"-dlq", false), open(t, srv, base+"-dlq", false)
	l, err := a.Lease(ctx, backend.LeaseHolder{RunID: "run-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	closeLeaseConnections(t, srv, "run-a")
	time.Sleep(2 * time.Second)
	select {
	case <-l.Lost():
		t.Fatal("lost after its connection was closed, with nobody else holding it")
	default:
	}
	var be *backend.BusyError
	if _, err := b.Lease(ctx, backend.LeaseHolder{RunID: "run-b"}); !errors.As(err, &be) {
		t.Fatalf("run-b took a lease run-a holds again: %v", err)
	}
}

func closeLeaseConnections(t *testing.T, srv *rabbitmqtest.Server, run string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, srv.AdminURL()+"/api/connections", nil)
		req.SetBasicAuth("guest", "guest")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var conns []struct {
			Name        string `json:"name"`
			ClientProps struct {
				ConnectionName string `json:"connection_name"`
			} `json:"client_properties"`
		}
		json.NewDecoder(resp.Body).Decode(&conns)
		resp.Body.Close()
		closed := 0
		for _, c := range conns {
			if strings.Contains(c.ClientProps.ConnectionName, "lease run "+run) {
				req, _ := http.NewRequest(http.MethodDelete, srv.AdminURL()+"/api/connections/"+url.PathEscape(c.Name), nil)
				req.SetBasicAuth("guest", "guest")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
					closed++
				}
			}
		}
		if closed > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the management API lists no lease connection (its statistics lag)")
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestKeyFrom: --key-from header:NAME makes that header the order key, the
// key header becomes a property, and a message without NAME has no key
// (the DLQ's one FIFO domain); without --key-from the key header is the key.
func TestKeyFrom(t *testing.T) {
	srv := broker.Get(t)
	dlq := uniq(t)
	ctx := context.Background()
	ch := srv.Channel(t)
	if _, err := ch.QueueDeclare(dlq, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for i, h := range []amqp.Table{
		{"tenant": "acme", "key": "k1"},
		{"tenant": "globex"},
		{"key": "k3"},
	} {
		if err := ch.PublishWithContext(ctx, "", dlq, true, false, amqp.Publishing{
			MessageId: fmt.Sprintf("E%d", i+1), Body: []byte(`{}`), Headers: h,
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitDepth(t, srv, dlq, 3)
	reg := backend.NewRegistry()
	reg.Register(rabbitmq.Registration())
	scan := func(keyFrom string) []envelope.Envelope {
		t.Helper()
		src, err := reg.Open(ctx, srv.Source(dlq), backend.OpenOptions{KeyFrom: keyFrom})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		var out []envelope.Envelope
		if err := src.Scan(ctx, "", func(e envelope.Envelope) error { out = append(out, e); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(out) != 3 {
			t.Fatalf("--key-from %q: %d entries, want 3", keyFrom, len(out))
		}
		return out
	}
	keys := func(es []envelope.Envelope) string {
		var k []string
		for _, e := range es {
			k = append(k, e.Key)
		}
		return strings.Join(k, ",")
	}
	if got := keys(scan("")); got != "k1,,k3" {
		t.Errorf("default keys %q, want k1,,k3", got)
	}
	byTenant := scan("header:tenant")
	if got := keys(byTenant); got != "acme,globex," {
		t.Errorf("--key-from header:tenant keys %q, want acme,globex,", got)
	}
	if byTenant[0].Properties["key"] != "k1" || byTenant[0].Properties["tenant"] != "acme" || byTenant[2].Properties["key"] != "k3" {
		t.Errorf("properties: %v / %v", byTenant[0].Properties, byTenant[2].Properties)
	}
	for _, e := range byTenant {
		if e.Malformed != "" {
			t.Errorf("%s malformed: %s", e.EventID, e.Malformed)
		}
	}
	_, err := reg.Open(ctx, srv.Source(dlq), backend.OpenOptions{KeyFrom: "json:tenant"})
	var ce *backend.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "want header:NAME") {
		t.Errorf("--key-from json:tenant: %v, want a configuration error naming header:NAME", err)
	}
	waitDepth(t, srv, dlq, 3)
}

// TestCheckDLQ: doctor's line on the DLQ names its type, its delivery
// limit and how many more reads dlqctl has before it refuses, and whether
// the management API answers.
func TestCheckDLQ(t *testing.T) {
	srv := broker.Get(t)
	if srv.AdminURL() == "" {
		t.Fatal("this test needs the management API (DLQCTL_TEST_AMQP_ADMIN)")
	}
	base := uniq(t)
	ctx := context.Background()
	quorumDLQ(t, srv, srv.Channel(t), base+"-orders", base+"-classic", base+"-quorum", 3)
	check := func(st backend.OriginStatus, ok bool, want ...string) {
		t.Helper()
		if st.OK != ok {
			t.Errorf("ok %v, want %v: %s (fix %q)", st.OK, ok, st.Detail, st.Fix)
		}
		for _, w := range want {
			if !strings.Contains(st.Detail+" fix: "+st.Fix, w) {
				t.Errorf("%q does not say %q (fix %q)", st.Detail, w, st.Fix)
			}
		}
	}
	check(open(t, srv, base+"-classic", true).CheckDLQ(ctx), true, "a classic queue", "no delivery limit", "management API answers")
	check(open(t, srv, base+"-classic", false).CheckDLQ(ctx), true, "a classic queue", "management API not set")
	check(open(t, srv, base+"-quorum", false).CheckDLQ(ctx), false, "a quorum queue", "fix: add admin=")
	q := open(t, srv, base+"-quorum", true)
	check(q.CheckDLQ(ctx), true, "delivery limit 3", "at up to 0", ": 2 more before", "management API answers")
	scanAll(t, q)
	check(open(t, srv, base+"-quorum", true).CheckDLQ(ctx), true, "at up to 1", ": 1 more before")
	scanAll(t, q)
	check(open(t, srv, base+"-quorum", true).CheckDLQ(ctx), false, "at up to 2", ": 0 more before", "raise the limit", "dlqctl dlq init")
	// An admin= that does not answer is this line's failure.
	bad, err := rabbitmq.Open(ctx, strings.TrimSuffix(srv.URL(), "/")+"/?queue="+base+"-classic&admin=http://127.0.0.1:1&timeout=2s", rabbitmq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	check(bad.CheckDLQ(ctx), false, "management API", "fix: check admin=")
	waitDepth(t, srv, base+"-quorum", 1)
}

// withDLX declares, for the test, an origin queue BASE-orders whose
// dead-letter exchange feeds the DLQ BASE-dlq (a quorum queue when quorum
// is set, else classic), BASE unique to the test, and returns BASE.
func withDLX(t *testing.T, srv *rabbitmqtest.Server, quorum bool) string {
	t.Helper()
	base := uniq(t)
	if err := rabbitmqtest.DeclareDLX(context.Background(), srv.Channel(t), base+"-orders", base+"-dlq", quorum, 0); err != nil {
		t.Fatal(err)
	}
	return base
}

// confirmChannel is a channel to srv in confirm mode.
func confirmChannel(t *testing.T, srv *rabbitmqtest.Server) *amqp.Channel {
	t.Helper()
	ch := srv.Channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return ch
}
