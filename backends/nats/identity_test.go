package natsdlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backend"
)

// planItem reads the entry at seq as a plan would name it.
func planItem(t *testing.T, s *Stream, seq uint64, dest string) backend.MoveItem {
	t.Helper()
	e, err := s.Get(context.Background(), strconv.FormatUint(seq, 10))
	if err != nil {
		t.Fatal(err)
	}
	if e.Malformed != "" {
		t.Fatalf("entry %d malformed: %s", seq, e.Malformed)
	}
	return backend.MoveItem{Seq: 1, ID: e.ID, EventID: e.EventID, Fingerprint: e.Fingerprint, Dest: dest}
}

// TestDuplicateOfAnotherMessageKeepsCopy: the origin acks the redrive as a
// duplicate of a message that is not this entry's redrive (a producer that
// wrote dlqctl's ID): the copy must stay, and the item fail saying so.
func TestDuplicateOfAnotherMessageKeepsCopy(t *testing.T) {
	url, dlq, origin, js := fresh(t)
	ctx := context.Background()
	dest := origin + ".created"
	seq := deadLetter(t, js, dlq, &nats.Msg{Subject: dest, Header: nats.Header{"event_id": {"E1"}}, Data: []byte(`{"order":1}`)}, "timeout", 1)
	s := open(t, url)
	item := planItem(t, s, seq, dest)
	m, err := s.get(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	id := RedriveMsgID(dlq, seq, m.Time, item.EventID, item.Fingerprint, dest)
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: dest, Header: nats.Header{nats.MsgIdHdr: {id}, backend.MarkerRedrivenFrom: {"77"}}, Data: []byte("other")}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Publish(ctx, []backend.MoveItem{item}, backend.Markers{RunID: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || res[0].DestID != "" || !strings.Contains(res[0].Err.Error(), "not the redrive of this entry") {
		t.Fatalf("publish acked as a duplicate of another message: %+v, want a failure that keeps the copy", res[0])
	}
	if _, err := s.get(ctx, seq); err != nil {
		t.Errorf("the copy is gone: %v", err)
	}
}

// TestRemoveAfterDLQRecreated: a run published an entry and stopped before
// removing it; the DLQ stream was deleted and made again, and another dead
// letter took the planned sequence. The resume's removal must leave it: the
// planned copy went with the old stream.
func TestRemoveAfterDLQRecreated(t *testing.T) {
	url, dlq, origin, js := fresh(t)
	ctx := context.Background()
	dest := origin + ".created"
	seq := deadLetter(t, js, dlq, &nats.Msg{Subject: dest, Header: nats.Header{"event_id": {"E1"}}, Data: []byte(`{"order":1}`)}, "timeout", 1)
	item := planItem(t, open(t, url), seq, dest)
	if res, err := open(t, url).Publish(ctx, []backend.MoveItem{item}, backend.Markers{RunID: "run-1"}); err != nil || res[0].Err != nil {
		t.Fatalf("publish: %v %+v", err, res)
	}
	if err := js.DeleteStream(ctx, dlq); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dlq, Subjects: CopySubjects(dlq), AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	other := deadLetter(t, js, dlq, &nats.Msg{Subject: dest, Header: nats.Header{"event_id": {"E2"}}, Data: []byte(`{"order":2}`)}, "timeout", 1)
	if other != seq {
		t.Fatalf("the new dead letter is at %d, want the planned sequence %d", other, seq)
	}
	resumed := open(t, url) // a new process: it published nothing
	res, err := resumed.Remove(ctx, []backend.MoveItem{item})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, backend.ErrNotFound) || res[0].Removed {
		t.Errorf("remove: %+v, want the planned entry gone (ErrNotFound)", res[0])
	}
	if e, err := resumed.Get(ctx, strconv.FormatUint(seq, 10)); err != nil || e.EventID != "E2" {
		t.Errorf("the other dead letter: %+v %v, want it still there", e, err)
	}
}

// advisoryJSON is a MSG_TERMINATED advisory as the server writes it.
func advisoryJSON(stream string, seq uint64, at time.Time) []byte {
	return []byte(fmt.Sprintf(`{"type":"io.nats.jetstream.advisory.v1.terminated","id":"x","timestamp":%q,"stream":%q,"consumer":"workers","stream_seq":%d,"deliveries":1,"reason":"boom"}`,
		at.UTC().Format(time.RFC3339Nano), stream, seq))
}

// synthetic is an origin stream and a stream of hand-written advisories
// about its messages: the advisory shape reads any stream, whatever its
// subjects.
type synthetic struct {
	js                      jetstream.JetStream
	origin                  jetstream.Stream
	subj, adv, advSubj, url string
}

func newSynthetic(t *testing.T) *synthetic {
	t.Helper()
	srv := server(t)
	_, js := srv.JetStream(t)
	base := fmt.Sprintf("syn%d", time.Now().UnixNano())
	sy := &synthetic{js: js, subj: base + ".orders", adv: base + "_ADV", advSubj: base + ".adv"}
	sy.url = srv.URL() + "?stream=" + sy.adv + "&advisories=1"
	var err error
	if sy.origin, err = js.CreateStream(context.Background(), jetstream.StreamConfig{Name: base + "_ORDERS", Subjects: []string{sy.subj}}); err != nil {
		t.Fatal(err)
	}
	sy.makeAdv(t)
	return sy
}

// makeAdv (re)creates the advisory stream.
func (sy *synthetic) makeAdv(t *testing.T) jetstream.Stream {
	t.Helper()
	st, err := sy.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: sy.adv, Subjects: []string{sy.advSubj}, AllowDirect: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// publish publishes an original with the event ID id.
func (sy *synthetic) publish(t *testing.T, id string) {
	t.Helper()
	if _, err := sy.js.PublishMsg(context.Background(), &nats.Msg{Subject: sy.subj, Header: nats.Header{nats.MsgIdHdr: {id}}, Data: []byte(`{"order":"` + id + `"}`)}); err != nil {
		t.Fatal(err)
	}
}

// advise writes an advisory about the original at seq.
func (sy *synthetic) advise(t *testing.T, seq uint64) {
	t.Helper()
	if _, err := sy.js.Publish(context.Background(), sy.advSubj, advisoryJSON(sy.origin.CachedInfo().Config.Name, seq, time.Now())); err != nil {
		t.Fatal(err)
	}
}

// TestAdvisoryRemoveAfterAdvisoryStreamRecreated: as above in advisory
// shape. A run published an advisory's message and stopped before removing
// it; the advisory stream was made again, and its first advisory is now
// about another message. The resume must delete neither that advisory nor
// the message it is about.
func TestAdvisoryRemoveAfterAdvisoryStreamRecreated(t *testing.T) {
	ctx := context.Background()
	sy := newSynthetic(t)
	sy.publish(t, "E1")
	sy.publish(t, "E2")
	sy.advise(t, 1)
	item := planItem(t, open(t, sy.url), 1, sy.subj)
	if res, err := open(t, sy.url).Publish(ctx, []backend.MoveItem{item}, backend.Markers{RunID: "run-1"}); err != nil || res[0].Err != nil {
		t.Fatalf("publish: %v %+v", err, res)
	}
	if err := sy.js.DeleteStream(ctx, sy.adv); err != nil {
		t.Fatal(err)
	}
	sy.makeAdv(t)
	sy.advise(t, 2)
	resumed := open(t, sy.url)
	res, err := resumed.Remove(ctx, []backend.MoveItem{item})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, backend.ErrNotFound) || res[0].Removed {
		t.Errorf("remove: %+v, want the planned entry gone (ErrNotFound)", res[0])
	}
	if e, err := resumed.Get(ctx, "1"); err != nil || e.EventID != "E2" {
		t.Errorf("the other advisory: %+v %v, want it still there", e, err)
	}
	if _, err := sy.origin.GetMsg(ctx, 2); err != nil {
		t.Errorf("the other advisory's message was deleted: %v", err)
	}
}

// TestSameMessageInAnotherProcess: two advisories about one message, the
// first published by one process (which stopped before removing it), the
// second by another that knows nothing of it: the origin's duplicate ack
// names the first entry's redrive, so the second advisory is removed and
// nothing is stored twice; the first entry's own resend stays a resend.
func TestSameMessageInAnotherProcess(t *testing.T) {
	ctx := context.Background()
	sy := newSynthetic(t)
	sy.publish(t, "E1")
	sy.advise(t, 1)
	sy.advise(t, 1)
	first, second := planItem(t, open(t, sy.url), 1, sy.subj), planItem(t, open(t, sy.url), 2, sy.subj)
	a, err := open(t, sy.url).Publish(ctx, []backend.MoveItem{first}, backend.Markers{RunID: "run-1"})
	if err != nil || a[0].Err != nil {
		t.Fatalf("first: %v %+v", err, a)
	}
	b := open(t, sy.url)
	res, err := b.Publish(ctx, []backend.MoveItem{second, first}, backend.Markers{RunID: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, backend.ErrSameMessage) || !strings.Contains(res[0].Err.Error(), "which the entry 1 moved") {
		t.Errorf("second advisory: %+v, want ErrSameMessage naming the entry 1", res[0])
	}
	if res[1].Err != nil || res[1].DestID != a[0].DestID {
		t.Errorf("the first entry's resend: %+v, want the message stored first (%s)", res[1], a[0].DestID)
	}
	if _, err := b.Get(ctx, "2"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("the second advisory is still in its stream: %v", err)
	}
	if rm, err := b.Remove(ctx, []backend.MoveItem{first}); err != nil || !rm[0].Removed {
		t.Fatalf("remove the first: %v %+v", err, rm)
	}
	in, err := sy.origin.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if in.State.Msgs != 1 {
		t.Errorf("the origin holds %d messages, want the one redrive", in.State.Msgs)
	}
}
