package natsdlq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natsdlq "github.com/dlqctl/dlqctl/backends/nats"
	"github.com/dlqctl/dlqctl/backends/nats/natstest"
	"github.com/dlqctl/dlqctl/conformance"
)

// readOnlyRounds is how many times each read-only command runs.
const readOnlyRounds = 30

// readOnly runs every read-only command on source readOnlyRounds times;
// id is an entry for show.
func readOnly(t *testing.T, source, id string) {
	t.Helper()
	cmds := [][]string{
		{"stats", "-o", "json"},
		{"list", "-o", "json"},
		{"show", id, "-o", "json"},
		{"sample", "--per-category", "5"},
		{"check", "--max-total", "1000"},
		{"categorize", "--discover"},
	}
	for round := range readOnlyRounds {
		for _, c := range cmds {
			if code, out := dlqctl(t, append([]string{"--source", source}, c...)...); code != 0 {
				t.Fatalf("round %d: %s: exit %d\n%s", round, c[0], code, out)
			}
		}
	}
}

// brokerState is what a read must leave as it was: every stream's state
// and every consumer's, by name.
func brokerState(t *testing.T, js jetstream.JetStream) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	streams := js.ListStreams(ctx)
	for in := range streams.Info() {
		st := in.State
		out["stream "+in.Config.Name] = fmt.Sprintf("msgs %d bytes %d seq %d-%d deleted %d consumers %d", st.Msgs, st.Bytes, st.FirstSeq, st.LastSeq, st.NumDeleted, st.Consumers)
		stream, err := js.Stream(ctx, in.Config.Name)
		if err != nil {
			t.Fatal(err)
		}
		cons := stream.ListConsumers(ctx)
		for ci := range cons.Info() {
			out["consumer "+in.Config.Name+"/"+ci.Name] = fmt.Sprintf("delivered %d/%d ack floor %d/%d ack pending %d redelivered %d pending %d",
				ci.Delivered.Consumer, ci.Delivered.Stream, ci.AckFloor.Consumer, ci.AckFloor.Stream, ci.NumAckPending, ci.NumRedelivered, ci.NumPending)
		}
		if err := cons.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := streams.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameState(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: was %q, now %q", k, v, after[k])
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s is new: %q", k, v)
		}
	}
}

// TestReadOnlyCommandsChangeNothing: thirty rounds of stats, list, show,
// sample, check and categorize --discover leave every stream and consumer
// as they were: counts, sequences, consumers (a scan's ephemeral consumer
// included), and in advisory shape the origin consumer's delivery state
// and each original's delivery count, read afterwards by delivering it.
func TestReadOnlyCommandsChangeNothing(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	ctx := context.Background()

	t.Run("copies", func(t *testing.T) {
		base := fmt.Sprintf("ro%d", time.Now().UnixNano())
		dlq := base + "_DLQ"
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dlq, Subjects: natsdlq.CopySubjects(dlq), AllowDirect: true}); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 5; i++ {
			h := nats.Header{"event_id": {fmt.Sprintf("E%d", i)}, natsdlq.HeaderOriginalSubject: {base + ".orders"}, "last_error": {fmt.Sprintf("timeout after %d ms", i*100)}}
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "dlq." + dlq + ".x", Header: h, Data: []byte(fmt.Sprintf(`{"order":%d}`, i))}); err != nil {
				t.Fatal(err)
			}
		}
		before := brokerState(t, js)
		readOnly(t, srv.URL()+"?stream="+dlq, "3")
		sameState(t, before, brokerState(t, js))
	})

	t.Run("advisories", func(t *testing.T) {
		fx := newTermFixture(t, srv, js)
		for i := 1; i <= 3; i++ {
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: fx.subj, Header: nats.Header{nats.MsgIdHdr: {fmt.Sprintf("E%d", i)}}, Data: []byte(fmt.Sprintf(`{"order":%d}`, i))}); err != nil {
				t.Fatal(err)
			}
		}
		// E1 is terminated (an entry); E2 is delivered and naked once;
		// E3 is not delivered yet.
		batch, err := fx.cons.Fetch(2, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if m.Headers().Get(nats.MsgIdHdr) == "E1" {
				_ = m.TermWithReason("schema invalid")
			} else {
				_ = m.Nak()
			}
		}
		fx.advisories(t, 1)
		before := brokerState(t, js)
		readOnly(t, fx.source, "1")
		sameState(t, before, brokerState(t, js))
		delivered := map[string]uint64{}
		for deadline := time.Now().Add(10 * time.Second); len(delivered) < 2 && time.Now().Before(deadline); {
			batch, err := fx.cons.Fetch(2, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for m := range batch.Messages() {
				md, _ := m.Metadata()
				delivered[m.Headers().Get(nats.MsgIdHdr)] = md.NumDelivered
				_ = m.Ack()
			}
		}
		if fmt.Sprint(delivered) != "map[E2:2 E3:1]" {
			t.Errorf("delivery counts after the reads: %v, want E2 delivered a second time and E3 a first", delivered)
		}
		if _, err := fx.origin.GetMsg(ctx, 1); err != nil {
			t.Errorf("the terminated original: %v", err)
		}
		if !strings.HasPrefix(fx.source, srv.URL()) {
			t.Fatal(fx.source)
		}
	})
}

// copyFixture is a copy DLQ stream holding n dead letters (events C001…)
// of the origin stream's subject.
type copyFixture struct {
	source, subj string
	dlq, origin  jetstream.Stream
}

func newCopyFixture(t *testing.T, srv *natstest.Server, js jetstream.JetStream, n int) copyFixture {
	t.Helper()
	ctx := context.Background()
	base := fmt.Sprintf("cf%d", time.Now().UnixNano())
	name, subj := base+"_DLQ", base+".orders"
	dlq, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: natsdlq.CopySubjects(name), AllowDirect: true})
	if err != nil {
		t.Fatal(err)
	}
	origin, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: base + "_ORDERS", Subjects: []string{subj}, Duplicates: longWindow})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		h := nats.Header{"event_id": {fmt.Sprintf("C%03d", i)}, natsdlq.HeaderOriginalSubject: {subj}, "last_error": {"timeout calling payments"},
			nats.MsgIdHdr: {fmt.Sprintf("dead:%s:%d", base, i)}}
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "dlq." + name + "." + subj, Header: h, Data: []byte(fmt.Sprintf(`{"order":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	return copyFixture{source: srv.URL() + "?stream=" + name, subj: subj, dlq: dlq, origin: origin}
}

// checkOnce: the DLQ is empty and every event C001…Cn is on the origin
// once.
func (fx copyFixture) checkOnce(t *testing.T, n int) {
	t.Helper()
	if l := msgs(t, fx.dlq); l != 0 {
		t.Errorf("%d copies left in the DLQ", l)
	}
	count := map[string]int{}
	for _, r := range redrivenCopies(t, fx.origin) {
		id, _, _ := strings.Cut(r, "#")
		count[id]++
	}
	for i := 1; i <= n; i++ {
		if id := fmt.Sprintf("C%03d", i); count[id] != 1 {
			t.Errorf("%s is on the origin %d times, want 1", id, count[id])
		}
	}
	if len(count) != n {
		t.Errorf("%d events on the origin, want %d", len(count), n)
	}
}

// removedStayRemoved: every entry the journal in dir records as removed
// is not in the DLQ (getter: whether the DLQ holds the entry id).
func removedStayRemoved(t *testing.T, dir string, inDLQ func(id string) bool) int {
	t.Helper()
	removed := 0
	for id, st := range journalSteps(t, dir) {
		if st.typ != "removed" {
			continue
		}
		removed++
		if inDLQ(id) {
			t.Errorf("entry %s (%s) is back in the DLQ after the broker restart, though the journal records it removed", id, st.eventID)
		}
	}
	return removed
}

func holds(st jetstream.Stream) func(string) bool {
	return func(id string) bool {
		var seq uint64
		fmt.Sscan(id, &seq)
		_, err := st.GetMsg(context.Background(), seq)
		return err == nil
	}
}

// TestBrokerKilledAfterRun: nats-server is SIGKILLed right after a
// redrive completed (default sync interval, default persist mode): when it
// is back, nothing the run removed is in the DLQ, every event is on the
// origin once, stats says 0 and a new plan takes nothing.
func TestBrokerKilledAfterRun(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	const n = 100
	check := func(t *testing.T, dir, source string) {
		t.Helper()
		code, out := conformance.RunCommand(t, dir, nil, nil, "--source", source, "stats", "-o", "json")
		if code != 0 || !strings.Contains(out, `"total": 0`) {
			t.Errorf("stats after the restart: exit %d\n%s", code, out)
		}
		code, out = conformance.RunCommand(t, dir, nil, nil, "--source", source, "redrive", "plan", "--reason", "again", "--out", "again.json",
			"--allow-disposition", "investigate,fix-then-redrive", "-o", "json")
		if code != 0 || !strings.Contains(out, `"entries": []`) {
			t.Errorf("a new plan after the restart: exit %d\n%s", code, out)
		}
	}
	kill := func(t *testing.T) {
		t.Helper()
		if err := srv.Down(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Up(); err != nil {
			t.Fatal(err)
		}
	}
	for _, shape := range []struct {
		name string
		make func(t *testing.T) (source string, dlq jetstream.Stream, checkOnce func(*testing.T, int))
	}{
		{"copies", func(t *testing.T) (string, jetstream.Stream, func(*testing.T, int)) {
			fx := newCopyFixture(t, srv, js, n)
			return fx.source, fx.dlq, fx.checkOnce
		}},
		{"advisories", func(t *testing.T) (string, jetstream.Stream, func(*testing.T, int)) {
			fx := newAdvisoryFixture(t, srv, js, n)
			return fx.source, fx.adv, fx.checkOnce
		}},
	} {
		t.Run(shape.name, func(t *testing.T) {
			source, dlq, checkOnce := shape.make(t)
			dir := t.TempDir()
			if moved, status := applyAll(t, dir, source); status != "completed" || moved != n {
				t.Fatalf("apply: %s, %d moved", status, moved)
			}
			kill(t)
			if removed := removedStayRemoved(t, dir, holds(dlq)); removed != n {
				t.Errorf("the journal records %d removed, want %d", removed, n)
			}
			checkOnce(t, n)
			check(t, dir, source)
		})
	}
}

// runResult is how a dlqctl process ended.
type runResult struct {
	code int
	out  string
}

// startApply applies the plan p.json in dir in the background.
func startApply(t *testing.T, dir, source string) <-chan runResult {
	done := make(chan runResult, 1)
	go func() {
		code, out := conformance.RunCommand(t, dir, nil, nil, "--source", source, "redrive", "apply", "p.json")
		done <- runResult{code, out}
	}()
	return done
}

// waitRemoved waits until the journal in dir records k entries removed.
func waitRemoved(t *testing.T, dir string, k int) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("the run to remove %d entries", k), func() bool {
		removed := 0
		for _, st := range journalStepsIfAny(t, dir) {
			if st.typ == "removed" {
				removed++
			}
		}
		return removed >= k
	})
}

// TestBrokerKilledMidRun: nats-server is SIGKILLed while a redrive of a
// copy DLQ runs: apply exits 1 naming the resume; when the server is back,
// every entry the journal records as removed is still gone from the DLQ,
// and the resume ends with every event on the origin once.
func TestBrokerKilledMidRun(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	const n = 60
	fx := newCopyFixture(t, srv, js, n)
	source := fx.source + "&timeout=1s"
	dir := t.TempDir()
	planApprove(t, dir, source, "--rate", "40", "--burst", "2", "--ramp", "10,20")
	done := startApply(t, dir, source)
	waitRemoved(t, dir, 5)
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
	if removed := removedStayRemoved(t, dir, holds(fx.dlq)); removed == 0 || removed == n {
		t.Errorf("the journal records %d removed before the kill, want some", removed)
	}
	if code, out := conformance.RunCommand(t, dir, nil, nil, "--source", source, "redrive", "resume", "p.journal"); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	fx.checkOnce(t, n)
}

// doctorChecks runs doctor on source and returns its checks by name.
func doctorChecks(t *testing.T, source string) map[string]struct {
	OK          bool
	Detail, Fix string
} {
	t.Helper()
	_, out := dlqctl(t, "--source", source, "doctor", "-o", "json")
	var d struct {
		Checks []struct {
			Name, Detail, Fix string
			OK                bool
		}
	}
	if err := json.NewDecoder(strings.NewReader(out[strings.Index(out, "{"):])).Decode(&d); err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	checks := map[string]struct {
		OK          bool
		Detail, Fix string
	}{}
	for _, c := range d.Checks {
		checks[c.Name] = struct {
			OK          bool
			Detail, Fix string
		}{c.OK, c.Detail, c.Fix}
	}
	return checks
}

// TestAsyncPersistDLQRefused: a DLQ stream with persist_mode async
// acknowledges a delete before it writes it, so a crash of the server
// brings back what a run removed: redrive refuses it (exit 2, saying why
// and what to do) and moves nothing; doctor fails on it, stats warns, and
// an origin stream in that mode passes doctor with what a crash can lose
// said. A default DLQ stream passes.
func TestAsyncPersistDLQRefused(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())
	_, js := srv.JetStream(t)
	ctx := context.Background()
	base := fmt.Sprintf("async%d", time.Now().UnixNano())
	dlq, subj := base+"_DLQ", base+".orders"
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dlq, Subjects: natsdlq.CopySubjects(dlq), AllowDirect: true, PersistMode: jetstream.AsyncPersistMode})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: base + "_ORDERS", Subjects: []string{subj}, PersistMode: jetstream.AsyncPersistMode}); err != nil {
		t.Fatal(err)
	}
	h := nats.Header{"event_id": {"E1"}, natsdlq.HeaderOriginalSubject: {subj}, "last_error": {"timeout"}}
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "dlq." + dlq + ".x", Header: h, Data: []byte(`{"order":1}`)}); err != nil {
		t.Fatal(err)
	}
	source := srv.URL() + "?stream=" + dlq
	code, out := dlqctl(t, "--source", source, "redrive", "--yes", "--reason", "async", "--rate", "0", "--unverified-ok")
	if code != 2 || !strings.Contains(out, "persist_mode async") || !strings.Contains(out, "moves nothing out of it") {
		t.Errorf("redrive from an async DLQ stream: exit %d, want 2 saying why\n%s", code, out)
	}
	if n := msgs(t, st); n != 1 {
		t.Errorf("%d copies left, want the 1 refused", n)
	}
	checks := doctorChecks(t, source)
	if c := checks["DLQ stream "+dlq]; c.OK || !strings.Contains(c.Detail, "brings deleted messages back") || !strings.Contains(c.Fix, "import --init") {
		t.Errorf("doctor on the DLQ stream: %+v", c)
	}
	if c := checks["origin "+subj]; !c.OK || !strings.Contains(c.Detail, "can lose a redrive") {
		t.Errorf("doctor on the origin: %+v (all: %v)", c, checks)
	}
	if code, out := dlqctl(t, "--source", source, "stats", "-o", "json"); code != 0 || !strings.Contains(out, "persist_mode async") {
		t.Errorf("stats: exit %d\n%s", code, out)
	}
	fx := newCopyFixture(t, srv, js, 1)
	if c := doctorChecks(t, fx.source)["DLQ stream "+fx.dlq.CachedInfo().Config.Name]; !c.OK {
		t.Errorf("doctor on a default DLQ stream: %+v", c)
	}
}

// journalRemovedOrPublished lists the entries whose publish the journal
// knows.
func journalRemovedOrPublished(t *testing.T, dir string) []string {
	t.Helper()
	var ids []string
	for id, st := range journalStepsIfAny(t, dir) {
		if st.typ == "published" || st.typ == "removed" {
			ids = append(ids, id)
		}
	}
	return ids
}

// TestConnectionDroppedAwaitingAcks: the connection to a live server is
// lost while a publish awaits its ack (the server stored it; the ack never
// arrives): apply exits 1 within a bound, naming the resume, with that
// entry's outcome unknown in the journal; the resume sends it again under
// the same Nats-Msg-Id, and every event is on the origin once.
func TestConnectionDroppedAwaitingAcks(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	const n = 40
	fx := newCopyFixture(t, srv, js, n)
	proxy := srv.Proxy(t)
	source := proxy.URL() + fx.source[strings.Index(fx.source, "?"):] + "&timeout=2s"
	dir := t.TempDir()
	planApprove(t, dir, source, "--rate", "20", "--burst", "1", "--ramp", "40")
	done := startApply(t, dir, source)
	waitRemoved(t, dir, 3)
	proxy.HoldAfterPublish(fx.subj)
	waitUntil(t, "a publish awaiting its ack", func() bool {
		return proxy.Holding() && len(redrivenCopies(t, fx.origin)) > len(journalRemovedOrPublished(t, dir))
	})
	proxy.Cut()
	cut := time.Now()
	var r runResult
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("apply still runs 30 s after its connection was lost")
	}
	t.Logf("apply exited %s after the connection was cut", time.Since(cut).Round(time.Millisecond))
	if r.code != 1 || !strings.Contains(r.out, "resume p.journal") {
		t.Fatalf("apply after the connection was lost: exit %d, want 1 with the resume command\n%s", r.code, r.out)
	}
	// What the journal does not know: entries whose last step is intent.
	// At least one of them is on the origin (its ack was held).
	onOrigin := map[string]bool{}
	for _, c := range redrivenCopies(t, fx.origin) {
		id, _, _ := strings.Cut(c, "#")
		onOrigin[id] = true
	}
	unknownStored := 0
	for _, st := range journalSteps(t, dir) {
		if st.typ == "intent" && onOrigin[st.eventID] {
			unknownStored++
		}
	}
	if unknownStored == 0 {
		t.Errorf("no entry both stored on the origin and unknown in the journal: the cut did not catch a publish awaiting its ack\n%s", r.out)
	}
	code, out := conformance.RunCommand(t, dir, nil, nil, "--source", source, "redrive", "resume", "p.journal")
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	fx.checkOnce(t, n)
}

// TestByteIdenticalDeadLetters: three dead letters with the same bytes
// (headers and data: a producer that retried a publish, an import run
// twice) are three entries; a plan takes all three, the run moves three
// with no halt, the DLQ ends empty, and the origin holds three copies.
func TestByteIdenticalDeadLetters(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	ctx := context.Background()
	same := func() *nats.Msg {
		return &nats.Msg{Header: nats.Header{"event_id": {"DUP"}, "tenant": {"acme"}}, Data: []byte(`{"order":7}`)}
	}
	t.Run("copies", func(t *testing.T) {
		fx := newCopyFixture(t, srv, js, 0)
		name := fx.dlq.CachedInfo().Config.Name
		for range 3 {
			m := same()
			m.Subject = "dlq." + name + "." + fx.subj
			m.Header.Set(natsdlq.HeaderOriginalSubject, fx.subj)
			if _, err := js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		dir := t.TempDir()
		if moved, status := applyAll(t, dir, fx.source); moved != 3 || status != "completed" {
			t.Errorf("apply: %s, %d moved, want completed, 3", status, moved)
		}
		if l := msgs(t, fx.dlq); l != 0 {
			t.Errorf("%d left in the DLQ", l)
		}
		if got := redrivenCopies(t, fx.origin); fmt.Sprint(got) != "[DUP#1 DUP#1 DUP#1]" {
			t.Errorf("the origin holds %v, want three redrives of DUP", got)
		}
	})
	t.Run("advisories", func(t *testing.T) {
		fx := newTermFixture(t, srv, js)
		for range 3 {
			m := same()
			m.Subject = fx.subj
			if _, err := js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		fx.term(t, fx.cons, 3)
		adv := fx.advisories(t, 3)
		dir := t.TempDir()
		if moved, status := applyAll(t, dir, fx.source); moved != 3 || status != "completed" {
			t.Errorf("apply: %s, %d moved, want completed, 3", status, moved)
		}
		if l := msgs(t, adv); l != 0 {
			t.Errorf("%d advisories left", l)
		}
		if got := redrivenCopies(t, fx.origin); fmt.Sprint(got) != "[DUP#1 DUP#1 DUP#1]" {
			t.Errorf("the origin holds %v, want three redrives of DUP", got)
		}
	})
}
