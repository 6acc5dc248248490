package natsdlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

func TestScanInStreamOrder(t *testing.T) {
	url, dlq, origin, js := fresh(t)
	ctx := context.Background()
	var seqs []uint64
	for i := range 5 {
		m := &nats.Msg{Subject: origin + ".created", Header: nats.Header{nats.MsgIdHdr: {fmt.Sprintf("E%d", i)}}, Data: []byte(fmt.Sprintf(`{"n":%d}`, i))}
		seqs = append(seqs, deadLetter(t, js, dlq, m, "timeout", 1))
	}
	st, _ := js.Stream(ctx, dlq)
	if err := st.DeleteMsg(ctx, seqs[2]); err != nil {
		t.Fatal(err)
	}
	s := open(t, url)
	var got []string
	if err := s.Scan(ctx, "", func(e envelope.Envelope) error {
		if e.Malformed != "" {
			t.Errorf("%s malformed: %s", e.ID, e.Malformed)
		}
		got = append(got, e.ID+":"+e.EventID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]string{"1:E0", "2:E1", "4:E3", "5:E4"})
	if fmt.Sprint(got) != want {
		t.Errorf("scan %v, want %v", got, want)
	}
	got = nil
	if err := s.Scan(ctx, "2", func(e envelope.Envelope) error { got = append(got, e.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[4 5]" {
		t.Errorf("scan after 2: %v", got)
	}
	got = nil
	if err := s.Scan(ctx, "5", func(e envelope.Envelope) error { got = append(got, e.ID); return nil }); err != nil || got != nil {
		t.Errorf("scan after the last: %v %v", got, err)
	}
	if n, err := s.Len(ctx); err != nil || n != 4 {
		t.Errorf("len %d %v", n, err)
	}
	if tail, err := s.Tail(ctx); err != nil || tail != "5" {
		t.Errorf("tail %q %v", tail, err)
	}
	e, err := s.Get(ctx, "4")
	if err != nil || e.EventID != "E3" || e.Origin.Topic != origin+".created" {
		t.Errorf("get: %+v %v", e, err)
	}
	if _, ok := e.Properties["Nats-Sequence"]; ok {
		t.Errorf("a direct get's server headers became properties: %v", e.Properties)
	}
	if _, err := s.Get(ctx, "3"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("get of a deleted sequence: %v", err)
	}
}

func TestMissingStreamReadsEmpty(t *testing.T) {
	srv := server(t)
	s := open(t, srv.URL()+"?stream=NOPE_NOT_THERE")
	if got := s.MissingDLQ(); !strings.HasSuffix(got, `: the stream "NOPE_NOT_THERE" does not exist`) || s.Notice() == "" {
		t.Errorf("a missing stream is not reported: MissingDLQ %q, Notice %q", got, s.Notice())
	}
	if n, err := s.Len(context.Background()); n != 0 || err != nil {
		t.Errorf("len %d %v", n, err)
	}
	if err := s.Scan(context.Background(), "", func(envelope.Envelope) error { t.Error("entry"); return nil }); err != nil {
		t.Error(err)
	}
}

// TestMoveDuplicateWindow pins both edges of the redrive's Nats-Msg-Id on
// a real server, inside the origin stream's 2-minute duplicate window: a
// redrive of a message whose original publish carried Nats-Msg-Id is
// stored (it never collides with the original), and a resend of the same
// move is dropped as a duplicate.
func TestMoveDuplicateWindow(t *testing.T) {
	url, dlq, origin, js := fresh(t)
	ctx := context.Background()
	orig := &nats.Msg{Subject: origin + ".created", Header: nats.Header{nats.MsgIdHdr: {"E1"}, "tenant": {"acme"}}, Data: []byte(`{"order":1}`)}
	if _, err := js.PublishMsg(ctx, orig); err != nil {
		t.Fatal(err)
	}
	// The producer's own resend inside the window is dropped: the window is live.
	if ack, err := js.PublishMsg(ctx, orig); err != nil || !ack.Duplicate {
		t.Fatalf("resend of the original: %+v %v", ack, err)
	}
	// The consumer's copy carries a publish expectation of its own (on the
	// DLQ stream), which must not travel back to the origin.
	withExpect := &nats.Msg{Subject: orig.Subject, Header: nats.Header{nats.MsgIdHdr: {"E1"}, "tenant": {"acme"}, "Nats-Expected-Stream": {dlq}}, Data: orig.Data}
	seq := deadLetter(t, js, dlq, withExpect, "timeout", 1)
	s := open(t, url)
	e, err := s.Get(ctx, strconv.FormatUint(seq, 10))
	if err != nil {
		t.Fatal(err)
	}
	item := backend.MoveItem{Seq: 1, ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint, Dest: origin + ".created"}
	mk := backend.Markers{RunID: "run-1"}
	res, err := s.Publish(ctx, []backend.MoveItem{item}, mk)
	if err != nil || res[0].Err != nil {
		t.Fatalf("publish: %v %+v", err, res)
	}
	ost, _ := js.Stream(ctx, origin)
	in, _ := ost.Info(ctx)
	if in.State.Msgs != 2 {
		t.Fatalf("origin holds %d messages after the redrive, want 2 (the redrive collided with the original publish)", in.State.Msgs)
	}
	got, err := ost.GetMsg(ctx, in.State.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.Get("event_id") != "E1" || got.Header.Get("tenant") != "acme" || string(got.Data) != `{"order":1}` ||
		got.Header.Get("redrive_count") != "1" || got.Header.Get(backend.MarkerRunID) != "run-1" {
		t.Errorf("redriven message: %v %s", got.Header, got.Data)
	}
	if got.Header.Get("Nats-Expected-Stream") != "" {
		t.Error("the redrive carries a stale Nats-Expected-Stream header")
	}
	// The same move again (a resume after a crash before the journal
	// caught up): dropped, and DestID names the stored message.
	again, err := s.Publish(ctx, []backend.MoveItem{item}, backend.Markers{RunID: "run-2"})
	if err != nil || again[0].Err != nil || again[0].DestID != res[0].DestID {
		t.Fatalf("resend: %v %+v (first %+v)", err, again, res)
	}
	if in, _ := ost.Info(ctx); in.State.Msgs != 2 {
		t.Errorf("origin holds %d messages after the resend, want 2", in.State.Msgs)
	}
	rm, err := s.Remove(ctx, []backend.MoveItem{item})
	if err != nil || !rm[0].Removed {
		t.Fatalf("remove: %v %+v", err, rm)
	}
	rm, err = s.Remove(ctx, []backend.MoveItem{item})
	if err != nil || !errors.Is(rm[0].Err, backend.ErrNotFound) {
		t.Fatalf("remove again (10057): %v %+v", err, rm)
	}
	res, err = s.Publish(ctx, []backend.MoveItem{item}, mk)
	if err != nil || !errors.Is(res[0].Err, backend.ErrNotFound) {
		t.Errorf("publish of a removed copy: %v %+v", err, res)
	}
}

func TestMoveRefusals(t *testing.T) {
	url, dlq, origin, js := fresh(t)
	ctx := context.Background()
	m := &nats.Msg{Subject: origin + ".a", Header: nats.Header{"event_id": {"E1"}}, Data: []byte("x")}
	seq := strconv.FormatUint(deadLetter(t, js, dlq, m, "timeout", 1), 10)
	s := open(t, url)
	e, _ := s.Get(ctx, seq)
	res, err := s.Publish(ctx, []backend.MoveItem{
		{Seq: 1, ID: seq, EventID: "E1", Fingerprint: "sha256:00", Dest: origin + ".a"},
		{Seq: 2, ID: seq, EventID: "E1", Fingerprint: e.Fingerprint, Dest: "nobody.listens"},
		{Seq: 3, ID: seq, EventID: "E1", Fingerprint: e.Fingerprint, Dest: "nobody.listens"},
	}, backend.Markers{RunID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, backend.ErrChanged) || res[1].Err == nil || res[2].Err == nil {
		t.Errorf("results %+v", res)
	}
}

func TestImportRoundTrip(t *testing.T) {
	url, _, _, _ := fresh(t)
	ctx := context.Background()
	s := open(t, url)
	e := envelope.Envelope{ID: "x-1", EventID: "E9", Payload: []byte(`{"a":1}`), Origin: envelope.Origin{Topic: "orders.a"},
		LastError: "boom", Attempts: 2, Key: "k", Properties: map[string]string{"tenant": "acme"}}
	id, err := s.Import(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, e); !errors.Is(err, backend.ErrExists) {
		t.Errorf("second import: %v", err)
	}
	got, err := s.Get(ctx, id)
	if err != nil || got.EventID != "E9" || got.Origin.Topic != "orders.a" || got.Properties["tenant"] != "acme" || got.Attempts != 2 {
		t.Errorf("read back %+v %v", got, err)
	}
	bad := e
	bad.ID, bad.Properties = "x-2", map[string]string{"a b": "c"}
	if _, err := s.Import(ctx, bad); err == nil {
		t.Error("a property that cannot be a header was imported")
	}
	_ = jetstream.ErrMsgNotFound
}

func TestCheckOrigin(t *testing.T) {
	url, _, origin, _ := fresh(t)
	s := open(t, url)
	if st := s.CheckOrigin(context.Background(), origin+".created", nil); !st.OK {
		t.Errorf("bound subject: %+v", st)
	}
	if st := s.CheckOrigin(context.Background(), "nobody.listens", nil); st.OK || st.Fix == "" {
		t.Errorf("unbound subject: %+v", st)
	}
}

func TestExtras(t *testing.T) {
	url, dlq, origin, js := fresh(t)
	deadLetter(t, js, dlq, &nats.Msg{Subject: origin + ".a", Header: nats.Header{"event_id": {"E1"}}, Data: []byte("x")}, "timeout", 1)
	x, err := open(t, url).Extras(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if j := x.JSON.(NATSExtras); j.Messages != 1 || j.LastSeq != 1 || j.Stream != dlq {
		t.Errorf("extras %+v", j)
	}
	if s, c, ok := capturedConsumer(AdvisorySubjects("ORDERS", "workers")); !ok || s != "ORDERS" || c != "workers" {
		t.Errorf("captured %q %q %v", s, c, ok)
	}
}

// TestImportPropertiesDoNotBecomeFields: a property named like an envelope
// field that the envelope leaves empty is not written as that field's
// header, which would read back as the field.
func TestImportPropertiesDoNotBecomeFields(t *testing.T) {
	url, _, _, _ := fresh(t)
	ctx := context.Background()
	s := open(t, url)
	e := envelope.Envelope{ID: "p-1", EventID: "E1", Payload: []byte("x"), Origin: envelope.Origin{Topic: "orders.a"},
		Properties: map[string]string{"reason": "an alias of last_error", "owner": "a field's own name", "tenant": "acme"}}
	id, err := s.Import(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastError != "" || got.Owner != "" {
		t.Errorf("properties read back as fields: last_error %q, owner %q", got.LastError, got.Owner)
	}
	if got.Properties["reason"] != "an alias of last_error" || got.Properties["tenant"] != "acme" {
		t.Errorf("properties %v, want reason and tenant kept", got.Properties)
	}
}
