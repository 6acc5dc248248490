package natsdlq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/nats/natstest"
	"github.com/dlqctl/dlqctl/conformance"
)

// advisoryFixture is an origin stream whose consumer terminated n messages
// (events A01…), and the advisory stream dlq init made for it.
type advisoryFixture struct {
	source, subj string
	origin, adv  jetstream.Stream
}

func newAdvisoryFixture(t *testing.T, srv *natstest.Server, js jetstream.JetStream, n int) advisoryFixture {
	t.Helper()
	ctx := context.Background()
	base := fmt.Sprintf("crash%d", time.Now().UnixNano())
	stream, subj := base+"_ORDERS", base+".orders"
	ost, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subj}})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 3, AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	code, out := conformance.RunCommand(t, t.TempDir(), nil, nil, "dlq", "init", srv.URL()+"?stream="+stream+"&consumer=workers", "-o", "json")
	var doc struct{ Stream, Source string }
	if code != 0 || json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &doc) != nil {
		t.Fatalf("dlq init: exit %d\n%s", code, out)
	}
	for i := 1; i <= n; i++ {
		m := &nats.Msg{Subject: subj, Header: nats.Header{nats.MsgIdHdr: {fmt.Sprintf("A%02d", i)}}, Data: []byte(fmt.Sprintf(`{"order":%d}`, i))}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	adv, err := js.Stream(ctx, doc.Stream)
	if err != nil {
		t.Fatal(err)
	}
	for terminated := 0; terminated < n; {
		batch, err := cons.Fetch(n, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if err := m.TermWithReason("timeout calling payments"); err != nil {
				t.Fatal(err)
			}
			terminated++
		}
	}
	waitUntil(t, "every advisory to be stored", func() bool { return msgs(t, adv) == uint64(n) })
	return advisoryFixture{source: doc.Source, subj: subj, origin: ost, adv: adv}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func msgs(t *testing.T, st jetstream.Stream) uint64 {
	t.Helper()
	in, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return in.State.Msgs
}

// originState reads the origin stream: the event IDs of the originals
// still there, and how many redriven messages each event ID has.
func (fx advisoryFixture) originState(t *testing.T) (originals map[string]uint64, redriven map[string]int) {
	t.Helper()
	ctx := context.Background()
	in, err := fx.origin.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	originals, redriven = map[string]uint64{}, map[string]int{}
	for seq := in.State.FirstSeq; seq <= in.State.LastSeq && in.State.Msgs > 0; seq++ {
		m, err := fx.origin.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted
		}
		if m.Header.Get(backend.MarkerRunID) != "" {
			redriven[m.Header.Get("event_id")]++
		} else {
			originals[m.Header.Get(nats.MsgIdHdr)] = seq
		}
	}
	return originals, redriven
}

// checkOnce: the advisory stream is empty, no original is left, and every
// event was published back exactly once.
func (fx advisoryFixture) checkOnce(t *testing.T, n int) {
	t.Helper()
	if l := msgs(t, fx.adv); l != 0 {
		t.Errorf("%d advisories left", l)
	}
	originals, redriven := fx.originState(t)
	if len(originals) != 0 {
		t.Errorf("originals left in the stream: %v", originals)
	}
	for i := 1; i <= n; i++ {
		if id := fmt.Sprintf("A%02d", i); redriven[id] != 1 {
			t.Errorf("%s published back %d times, want 1", id, redriven[id])
		}
	}
	if len(redriven) != n {
		t.Errorf("redriven events %v, want %d", redriven, n)
	}
}

func planApprove(t *testing.T, dir, source string, flags ...string) {
	t.Helper()
	args := append([]string{"--source", source, "redrive", "plan", "--reason", "advisory crash", "--out", "p.json", "--settle", "0s", "--unverified-ok"}, flags...)
	if code, out := conformance.RunCommand(t, dir, nil, nil, args...); code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	if code, out := conformance.RunCommand(t, dir, nil, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
}

// TestAdvisoryCrashMatrix kills apply (SIGKILL) right after each kind of
// journal step on an advisory-shape DLQ, then resumes: every event is
// published back once, and both the original and the advisory are gone.
// After a kill past a publish, the originals of the published entries
// are deleted by hand before the resume, which is what a kill between the
// two deletes (original, then advisory) leaves: the resume finishes the
// advisory's removal (the original's delete answers 10057).
func TestAdvisoryCrashMatrix(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	const n = 12
	for _, step := range []string{"batch-start:1", "intent:1", "intent:3", "published:1", "published:4", "removed:1", "removed:2", "batch-end:1"} {
		t.Run(step, func(t *testing.T) {
			fx := newAdvisoryFixture(t, srv, js, n)
			dir := t.TempDir()
			planApprove(t, dir, fx.source, "--rate", "100000", "--burst", "4", "--ramp", "3,5")
			code, out := conformance.RunCommand(t, dir, nil, []string{"DLQCTL_TEST_CRASH=" + step}, "--source", fx.source, "redrive", "apply", "p.json")
			if code != 137 {
				t.Fatalf("apply did not crash at %s: exit %d\n%s", step, code, out)
			}
			if strings.HasPrefix(step, "published:") {
				between := 0
				originals, redriven := fx.originState(t)
				for id, seq := range originals {
					if redriven[id] > 0 {
						if err := fx.origin.DeleteMsg(context.Background(), seq); err != nil {
							t.Fatal(err)
						}
						between++
					}
				}
				if between == 0 {
					t.Fatalf("a kill at %s left no published entry whose original is still there", step)
				}
			}
			code, out = conformance.RunCommand(t, dir, nil, nil, "--source", fx.source, "-o", "json", "redrive", "resume", "p.journal")
			if code != 0 {
				t.Fatalf("resume: exit %d\n%s", code, out)
			}
			var run struct {
				Status string `json:"status"`
				Moved  int    `json:"moved"`
			}
			if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):strings.LastIndex(out, "}")+1]), &run); err != nil || run.Status != "completed" || run.Moved != n {
				t.Errorf("after resume: %+v %v; want completed, %d\n%s", run, err, n, out)
			}
			fx.checkOnce(t, n)
		})
	}
}

// TestAdvisoryRestartMidApply kills the server (SIGKILL) while a redrive of
// an advisory-shape DLQ runs: apply exits 1 naming the resume; with the
// server back, no advisory the journal records as removed is back, the
// resume completes, and every event is published back once with original
// and advisory gone.
func TestAdvisoryRestartMidApply(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	const n = 60
	fx := newAdvisoryFixture(t, srv, js, n)
	source := fx.source + "&timeout=1s"
	dir := t.TempDir()
	planApprove(t, dir, source, "--rate", "40", "--burst", "2", "--ramp", "10,20")
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := conformance.RunCommand(t, dir, nil, nil, "--source", source, "redrive", "apply", "p.json")
		done <- result{code, out}
	}()
	journal := dir + "/p.journal"
	var first int64
	waitUntil(t, "the run to journal past its start", func() bool {
		fi, err := os.Stat(journal)
		if err != nil || fi.Size() == 0 {
			return false
		}
		if first == 0 {
			first = fi.Size()
		}
		return fi.Size() > first
	})
	if err := srv.Down(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != 1 || !strings.Contains(r.out, "resume p.journal") {
		t.Fatalf("apply with the server down: exit %d, want 1 with the resume command\n%s", r.code, r.out)
	}
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	removedStayRemoved(t, dir, holds(fx.adv))
	if code, out := conformance.RunCommand(t, dir, nil, nil, "--source", source, "redrive", "resume", "p.journal"); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	fx.checkOnce(t, n)
}
