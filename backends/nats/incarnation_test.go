package natsdlq_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backend"
	natsdlq "github.com/dlqctl/dlqctl/backends/nats"
	"github.com/dlqctl/dlqctl/backends/nats/natstest"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/internal/workertest"
)

// longWindow is a duplicate window as teams that publish with message IDs
// set it: every redrive of these tests happens inside it.
const longWindow = time.Hour

// redrivenCopies returns, in stream order, the redrive_count of every
// message of st that a redrive put there (it carries dlqctl_run_id).
func redrivenCopies(t *testing.T, st jetstream.Stream) []string {
	t.Helper()
	ctx := context.Background()
	in, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := in.State.FirstSeq; in.State.Msgs > 0 && seq <= in.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted
		}
		if m.Header.Get(backend.MarkerRunID) != "" {
			out = append(out, m.Header.Get("event_id")+"#"+m.Header.Get("redrive_count"))
		}
	}
	return out
}

// TestRedriveAfterDLQRecreated: the copy DLQ stream is deleted and made
// again between two redrives of one event, inside the origin's one-hour
// duplicate window. The new stream numbers from 1 again, so the second
// dead-lettering of the event is a copy at the same sequence with the same
// event ID and payload as the first: its redrive must still reach the
// origin (the reference consumer applies it), and its copy leave the DLQ
// only then.
func TestRedriveAfterDLQRecreated(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir()) // the one-step redrive writes its plan and journal here
	_, js := srv.JetStream(t)
	ctx := context.Background()
	base := fmt.Sprintf("inc%d", time.Now().UnixNano())
	dlq, origin, subj := base+"_DLQ", base+"_ORDERS", base+".orders"
	makeDLQ := func() {
		t.Helper()
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dlq, Subjects: natsdlq.CopySubjects(dlq), AllowDirect: true}); err != nil {
			t.Fatal(err)
		}
	}
	makeDLQ()
	ost, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: origin, Subjects: []string{subj}, Duplicates: longWindow})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subj, Header: nats.Header{nats.MsgIdHdr: {"E1"}}, Data: []byte(`{"order":1}`)}); err != nil {
		t.Fatal(err)
	}
	inbox := "sqlite:" + filepath.Join(t.TempDir(), "inbox.db")
	consume := []string{"--source", srv.URL() + "?stream=" + origin + "&consumer=workers", "--dlq", dlq, "--inbox", inbox}
	failing := append(append([]string{}, consume...), "--fail", "E1", "--fail-error", "timeout calling payments", "--until-idle", "2s")
	source := srv.URL() + "?stream=" + dlq
	redrive := func(round int) {
		t.Helper()
		w := workertest.Start(t, failing...)
		if err := w.Wait(); err != nil {
			t.Fatalf("worker: %v\n%s", err, w.Output())
		}
		if n := msgs(t, mustStream(t, js, dlq)); n != 1 {
			t.Fatalf("round %d: the DLQ holds %d copies, want 1", round, n)
		}
		code, out := dlqctl(t, "--source", source, "redrive", "--yes", "--reason", fmt.Sprintf("round %d", round), "--rate", "0", "--unverified-ok")
		if code != 0 {
			t.Fatalf("round %d: redrive: exit %d\n%s", round, code, out)
		}
	}
	redrive(1)
	if got := redrivenCopies(t, ost); fmt.Sprint(got) != "[E1#1]" {
		t.Fatalf("after the first redrive the origin holds %v", got)
	}
	if err := js.DeleteStream(ctx, dlq); err != nil {
		t.Fatal(err)
	}
	makeDLQ()
	redrive(2)
	if got := redrivenCopies(t, ost); fmt.Sprint(got) != "[E1#1 E1#2]" {
		t.Fatalf("after the second redrive the origin holds %v, want both redrives (the second was dropped as a duplicate of the first and its copy deleted: the dead letter is lost)", got)
	}
	if n := msgs(t, mustStream(t, js, dlq)); n != 0 {
		t.Errorf("the DLQ holds %d copies after the second redrive", n)
	}
	w := workertest.Start(t, append(consume, "--until-idle", "2s")...)
	if err := w.Wait(); err != nil {
		t.Fatalf("worker: %v\n%s", err, w.Output())
	}
	if row := workertest.ReadInbox(t, strings.TrimPrefix(inbox, "sqlite:"))["E1"]; row.Effects != 1 {
		t.Errorf("the consumer applied E1 %d times after the second redrive, want 1 (%+v)", row.Effects, row)
	}
}

func mustStream(t *testing.T, js jetstream.JetStream, name string) jetstream.Stream {
	t.Helper()
	st, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// termFixture is an origin stream with a one-hour duplicate window, a
// durable consumer that terminates what it is given, and the advisory
// stream dlq init made for it.
type termFixture struct {
	srv             *natstest.Server
	js              jetstream.JetStream
	stream, subj    string
	source, advName string
	origin          jetstream.Stream
	cons            jetstream.Consumer
}

func newTermFixture(t *testing.T, srv *natstest.Server, js jetstream.JetStream) *termFixture {
	t.Helper()
	ctx := context.Background()
	base := fmt.Sprintf("tf%d", time.Now().UnixNano())
	fx := &termFixture{srv: srv, js: js, stream: base + "_ORDERS", subj: base + ".orders"}
	var err error
	if fx.origin, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: fx.stream, Subjects: []string{fx.subj}, Duplicates: longWindow}); err != nil {
		t.Fatal(err)
	}
	fx.consumer(t, "workers")
	fx.initAdvisories(t)
	return fx
}

// consumer (re)creates the durable consumer name, delivering from the
// stream's first message.
func (fx *termFixture) consumer(t *testing.T, name string) jetstream.Consumer {
	t.Helper()
	c, err := fx.js.CreateOrUpdateConsumer(context.Background(), fx.stream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 3, AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fx.cons = c
	return c
}

func (fx *termFixture) initAdvisories(t *testing.T) {
	t.Helper()
	code, out := dlqctl(t, "dlq", "init", fx.srv.URL()+"?stream="+fx.stream+"&consumer=workers", "-o", "json")
	if code != 0 {
		t.Fatalf("dlq init: exit %d\n%s", code, out)
	}
	fx.advName = natsdlq.AdvisoryStream(fx.stream, "workers")
	fx.source = fx.srv.URL() + "?stream=" + fx.advName + "&advisories=1"
}

// term fetches n messages from c and terminates each; it returns their
// event IDs.
func (fx *termFixture) term(t *testing.T, c jetstream.Consumer, n int) []string {
	t.Helper()
	var ids []string
	for deadline := time.Now().Add(20 * time.Second); len(ids) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("terminated %v, want %d", ids, n)
		}
		batch, err := c.Fetch(n-len(ids), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if err := m.TermWithReason("timeout calling payments"); err != nil {
				t.Fatal(err)
			}
			id := m.Headers().Get("event_id")
			if id == "" {
				id = m.Headers().Get(nats.MsgIdHdr)
			}
			ids = append(ids, id)
		}
	}
	return ids
}

func (fx *termFixture) advisories(t *testing.T, want uint64) jetstream.Stream {
	t.Helper()
	adv := mustStream(t, fx.js, fx.advName)
	waitUntil(t, fmt.Sprintf("%d advisories", want), func() bool { return msgs(t, adv) == want })
	return adv
}

// TestAdvisoryRedriveAfterAdvisoryStreamRecreated: the advisory stream is
// deleted and made again (dlq init) between two redrives of one event,
// inside the origin's one-hour duplicate window. Its sequences start at 1
// again, so the second advisory has the first one's sequence: the second
// redrive must still reach the origin, where the consumer gets it.
func TestAdvisoryRedriveAfterAdvisoryStreamRecreated(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	ctx := context.Background()
	fx := newTermFixture(t, srv, js)
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: fx.subj, Header: nats.Header{nats.MsgIdHdr: {"E1"}}, Data: []byte(`{"order":1}`)}); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		if got := fx.term(t, fx.cons, 1); got[0] != "E1" {
			t.Fatalf("round %d: the consumer got %v", round, got)
		}
		fx.advisories(t, 1)
		t.Chdir(t.TempDir()) // each redrive's plan and journal in a folder of its own
		code, out := dlqctl(t, "--source", fx.source, "redrive", "--yes", "--reason", fmt.Sprintf("round %d", round), "--rate", "0",
			"--unverified-ok", "--allow-disposition", "investigate,fix-then-redrive")
		if code != 0 {
			t.Fatalf("round %d: redrive: exit %d\n%s", round, code, out)
		}
		if got, want := fmt.Sprint(redrivenCopies(t, fx.origin)), "[E1#"+fmt.Sprint(round)+"]"; got != want {
			t.Fatalf("round %d: the origin holds the redrives %v, want %s (the redrive was dropped as a duplicate and the original deleted: the dead letter is lost)", round, got, want)
		}
		if round == 1 {
			if err := js.DeleteStream(ctx, fx.advName); err != nil {
				t.Fatal(err)
			}
			fx.initAdvisories(t)
		}
	}
	batch, err := fx.cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		n++
		if m.Headers().Get("event_id") != "E1" || m.Headers().Get("redrive_count") != "2" {
			t.Errorf("the consumer got %v", m.Headers())
		}
		_ = m.Ack()
	}
	if n != 1 {
		t.Errorf("the consumer got %d messages after the second redrive, want 1", n)
	}
}

// TestAdvisoryOriginRecreated: an advisory outlives its origin stream,
// which is deleted and made again; a new message takes the sequence the
// advisory names. The entry must not resolve to it (a redrive would
// publish, and delete, a message nobody dead-lettered): it is malformed,
// saying why.
func TestAdvisoryOriginRecreated(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	ctx := context.Background()
	fx := newTermFixture(t, srv, js)
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: fx.subj, Header: nats.Header{nats.MsgIdHdr: {"OLD"}}, Data: []byte(`{"order":1}`)}); err != nil {
		t.Fatal(err)
	}
	fx.term(t, fx.cons, 1)
	fx.advisories(t, 1)
	if err := js.DeleteStream(ctx, fx.stream); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // a new incarnation is made later than the advisory
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: fx.stream, Subjects: []string{fx.subj}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: fx.subj, Header: nats.Header{nats.MsgIdHdr: {"NEW"}}, Data: []byte(`{"order":2}`)}); err != nil {
		t.Fatal(err)
	}
	src, got := scanAll(t, fx.source)
	if len(got) != 1 || got[0].Malformed == "" || got[0].EventID == "NEW" || !strings.Contains(got[0].Malformed, "re-created") {
		t.Fatalf("entries %+v, want one malformed: its stream was re-created", got)
	}
	if e, err := src.Get(ctx, got[0].ID); err != nil || e.EventID == "NEW" {
		t.Errorf("get: %+v %v", e, err)
	}
}

// scanAll opens source and reads every entry; the source is closed when
// the test ends.
func scanAll(t *testing.T, source string) (*natsdlq.Stream, []envelope.Envelope) {
	t.Helper()
	ctx := context.Background()
	src, err := natsdlq.Open(ctx, source, natsdlq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	var got []envelope.Envelope
	if err := src.Scan(ctx, "", func(e envelope.Envelope) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	return src, got
}

// TestWorkerCopyAfterOriginRecreated: the reference worker's copy ID names
// the original's stream and sequence; an origin stream deleted and made
// again numbers from 1 again, so the next failure of a message at the same
// sequence must still be a new copy in the DLQ stream (inside its
// duplicate window), not dropped as a duplicate of the first while the
// worker acks the original.
func TestWorkerCopyAfterOriginRecreated(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	ctx := context.Background()
	base := fmt.Sprintf("wrk%d", time.Now().UnixNano())
	dlq, origin, subj := base+"_DLQ", base+"_ORDERS", base+".orders"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dlq, Subjects: natsdlq.CopySubjects(dlq), AllowDirect: true, Duplicates: longWindow}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"E1", "E2"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: origin, Subjects: []string{subj}}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subj, Header: nats.Header{nats.MsgIdHdr: {id}}, Data: []byte(`{"order":1}`)}); err != nil {
			t.Fatal(err)
		}
		w := workertest.Start(t, "--source", srv.URL()+"?stream="+origin+"&consumer=workers", "--dlq", dlq,
			"--inbox", "sqlite:"+filepath.Join(t.TempDir(), "inbox.db"), "--fail", id, "--until-idle", "2s")
		if err := w.Wait(); err != nil {
			t.Fatalf("worker: %v\n%s", err, w.Output())
		}
		if id == "E1" {
			if err := js.DeleteStream(ctx, origin); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := msgs(t, mustStream(t, js, dlq)); n != 2 {
		t.Errorf("the DLQ holds %d copies, want 2 (the second dead-lettering was dropped as a duplicate of the first)", n)
	}
}
