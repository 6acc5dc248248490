package rabbitmq_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/rabbitmq/rabbitmqtest"
	"github.com/dlqctl/dlqctl/envelope"
)

// depth is the number of messages ready in queue.
func depth(t *testing.T, srv *rabbitmqtest.Server, queue string) int {
	t.Helper()
	st, err := srv.Channel(t).QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st.Messages
}

// drainCounts takes every message of queue and counts them by message ID.
func drainCounts(t *testing.T, srv *rabbitmqtest.Server, queue string) map[string]int {
	t.Helper()
	got := map[string]int{}
	ch := srv.Channel(t)
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return got
		}
		got[d.MessageId]++
	}
}

// moveFirst moves the first entry of base's DLQ (event E1) to base's
// origin through the backend, as a run does (publish, then remove), and
// returns what the DLQ held before.
func moveFirst(t *testing.T, srv *rabbitmqtest.Server, base string) []envelope.Envelope {
	t.Helper()
	ctx := context.Background()
	q := open(t, srv, base+"-dlq", true)
	es := scanAll(t, q)
	items := []backend.MoveItem{{Seq: 1, ID: es[0].ID, EventID: "E1", Fingerprint: es[0].Fingerprint, Dest: base + "-orders"}}
	if _, err := q.Publish(ctx, items, backend.Markers{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	if rm, err := q.Remove(ctx, items); err != nil || !rm[0].Removed {
		t.Fatalf("remove: %v %+v", err, rm)
	}
	return es
}

// recoveredDepth is queue's depth once a restarted broker has recovered
// it: the broker answers before every queue has read its index back, and
// a quorum queue replays its log, so the depth is read until it has not
// changed for two seconds.
func recoveredDepth(t *testing.T, srv *rabbitmqtest.Server, queue string) int {
	t.Helper()
	last, since := -1, time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n := depth(t, srv, queue)
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= 2*time.Second {
			return n
		}
		time.Sleep(200 * time.Millisecond)
	}
	return last
}

// planApproved plans a redrive of every entry of source, unthrottled and
// unverified, in one batch, and approves it; it returns the plan's path.
func planApproved(t *testing.T, dir, source string, extra ...string) string {
	t.Helper()
	args := append([]string{"--source", source, "redrive", "plan", "--reason", "crash test", "--out", "p.json",
		"--allow-disposition", "investigate", "--rate", "0", "--unverified-ok", "--settle", "0s", "--ramp", "1000"}, extra...)
	if code, out := run(t, dir, args...); code != 0 {
		t.Fatalf("plan: %d\n%s", code, out)
	}
	if code, out := run(t, dir, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d\n%s", code, out)
	}
	return filepath.Join(dir, "p.json")
}

// planned is how many entries a new plan of every entry of source takes.
func planned(t *testing.T, dir, source string) int {
	t.Helper()
	os.Remove(filepath.Join(dir, "again.json"))
	code, out := run(t, dir, "--source", source, "redrive", "plan", "--reason", "again", "--out", "again.json",
		"--allow-disposition", "investigate", "--rate", "0", "--unverified-ok")
	if code != 0 {
		t.Fatalf("plan: %d\n%s", code, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "again.json"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	return len(p.Entries)
}

// viaProxy is a proxy to srv and source rewritten to go through it.
func viaProxy(t *testing.T, srv *rabbitmqtest.Server, source string) (*rabbitmqtest.Proxy, string) {
	t.Helper()
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := rabbitmqtest.NewProxy(t, u.Host)
	return proxy, proxy.Via(source)
}

// applyAndCrash applies p.json in dir (its source going through proxy)
// and SIGKILLs the broker once trigger is closed, then starts it again:
// the acks dlqctl sent are not on disk yet (a classic queue writes them
// once idle, within a fifth of a second).
func applyAndCrash(t *testing.T, srv *rabbitmqtest.Server, dir, source string, trigger <-chan struct{}) (int, string) {
	t.Helper()
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := run(t, dir, "--source", source, "redrive", "apply", "p.json")
		done <- result{code, out}
	}()
	select {
	case <-trigger:
	case <-time.After(2 * time.Minute):
		t.Fatal("apply acked nothing within 2 minutes")
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	return r.code, r.out
}

// afterAcks is closed wait after the proxy saw the first basic.ack.
func afterAcks(proxy *rabbitmqtest.Proxy, wait time.Duration) <-chan struct{} {
	acked := proxy.Watch(60, 80)
	out := make(chan struct{})
	go func() {
		<-acked
		time.Sleep(wait)
		close(out)
	}()
	return out
}

// journaled is closed once the journal at path holds mark.
func journaled(path, mark string) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if raw, _ := os.ReadFile(path); strings.Contains(string(raw), mark) {
				break
			}
		}
		close(out)
	}()
	return out
}

// statsDoc is the part of dlqctl.stats/v1 these tests read.
type statsDoc struct {
	Total   int `json:"total"`
	Backend struct {
		CameBack      int64 `json:"came_back"`
		NotSeen       int64 `json:"not_seen"`
		RecordEntries int   `json:"record_entries"`
		RecordIgnored int   `json:"record_ignored"`
		Type          string
	} `json:"backend"`
}

func stats(t *testing.T, dir, source string) statsDoc {
	t.Helper()
	code, out := run(t, dir, "--source", source, "-o", "json", "stats")
	if code != 0 {
		t.Fatalf("stats: %d\n%s", code, out)
	}
	var doc statsDoc
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):strings.LastIndex(out, "}")+1]), &doc); err != nil {
		t.Fatalf("stats: %v\n%s", err, out)
	}
	return doc
}

// TestRemovalsSurviveABrokerCrash: a redrive completes, and the broker is
// SIGKILLed right after: a classic queue has not written the acks yet, a
// quorum queue writes them much later still, and the redriven dead
// letters are back in the DLQ when it restarts. They must stay removed:
// stats says total 0 and how many came back, a new plan takes nothing,
// and check --max-total 0 passes; the origin holds each event once.
func TestRemovalsSurviveABrokerCrash(t *testing.T) {
	// Beside the conformance suites, each on a broker of its own.
	t.Parallel()
	srv := rabbitmqtest.Start(t) // its own: it is killed
	t.Run("mid-apply", func(t *testing.T) { crashMidApply(t, srv) })
	for _, c := range []struct {
		name   string
		quorum bool
	}{{"classic", false}, {"quorum", true}} {
		t.Run(c.name, func(t *testing.T) {
			base := withDLX(t, srv, c.quorum)
			var ids []string
			for i := range 100 {
				ids = append(ids, fmt.Sprintf("E%03d", i))
			}
			deadLetter(t, srv, base+"-orders", base+"-dlq", ids...)
			// The dead letters themselves reach the disk once the queue is
			// idle: a crash right after dead-lettering loses them, not
			// the acks.
			time.Sleep(time.Second)
			dir := t.TempDir()
			proxy, source := viaProxy(t, srv, srv.Source(base+"-dlq"))
			planApproved(t, dir, source)
			// A classic queue writes acks once idle: 30 ms leaves the
			// run's acks and close in the broker, unwritten. A quorum
			// queue takes the chunk's one ack (multiple set) as one log
			// command, written within those 30 ms: it is killed as the
			// ack goes through, so that the ack is lost on its way or
			// unwritten.
			wait := 30 * time.Millisecond
			if c.quorum {
				wait = 0
			}
			applyAndCrash(t, srv, dir, source, afterAcks(proxy, wait))
			back := recoveredDepth(t, srv, base+"-dlq")
			if back == 0 {
				t.Fatal("the broker wrote every ack before the SIGKILL: nothing came back, so this run tests nothing (a loaded machine?)")
			}
			t.Logf("%d of 100 acked dead letters came back after the crash", back)
			doc := stats(t, dir, source)
			if doc.Total != 0 || doc.Backend.CameBack != int64(back) {
				_, out := run(t, dir, "--source", source, "stats")
				t.Log(out)
				t.Errorf("stats after the crash: total %d, came back %d; want 0 and %d", doc.Total, doc.Backend.CameBack, back)
			}
			if code, out := run(t, dir, "--source", source, "check", "--max-total", "0"); code != 0 {
				t.Errorf("check --max-total 0: %d\n%s", code, out)
			}
			if n := planned(t, dir, source); n != 0 {
				t.Errorf("a new plan after the crash takes %d entries, want none", n)
			}
			if n := depth(t, srv, base+"-orders"); n != 100 {
				t.Errorf("the origin holds %d messages, want the 100 redriven", n)
			}
		})
	}
}

// crashMidApply: the broker is SIGKILLed right after a redrive journaled
// its first batch's removals. The run stops; the acked dead letters come
// back with the restart. The resume must not take them for events that came back (a
// halt), must not publish them again, and must end with the DLQ empty and
// each event on the origin exactly once.
func crashMidApply(t *testing.T, srv *rabbitmqtest.Server) {
	base := withDLX(t, srv, false)
	var ids []string
	for i := range 60 {
		ids = append(ids, fmt.Sprintf("E%03d", i))
	}
	deadLetter(t, srv, base+"-orders", base+"-dlq", ids...)
	time.Sleep(time.Second) // on disk (see above)
	dir := t.TempDir()
	source := srv.Source(base + "-dlq")
	planApproved(t, dir, source, "--ramp", "10")
	// Killed once the first batch's removals are journaled: the resume
	// takes them as done, and reads the DLQ for events that came back.
	if code, out := applyAndCrash(t, srv, dir, source, journaled(filepath.Join(dir, "p.journal"), `"type":"removed"`)); code == 0 {
		t.Fatalf("apply went on through a broker crash\n%s", out)
	}
	code, out := run(t, dir, "--source", source, "-o", "json", "redrive", "resume", "p.journal")
	if code != 0 || !strings.Contains(out, `"status": "completed"`) {
		t.Fatalf("resume after the crash: exit %d\n%s", code, out)
	}
	if n := recoveredDepth(t, srv, base+"-dlq"); n != 0 {
		t.Errorf("the DLQ holds %d messages after the resume, want 0", n)
	}
	got := drainCounts(t, srv, base+"-orders")
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("%s is on the origin %d times, want once", id, got[id])
		}
	}

	// The record does not grow without bound: after a restart has shown
	// every ack written, the next run drops the entries of what is gone.
	if doc := stats(t, dir, source); doc.Backend.RecordEntries != len(ids) {
		t.Errorf("the record holds %d entries before the restart, want %d", doc.Backend.RecordEntries, len(ids))
	}
	if err := srv.Down(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	deadLetter(t, srv, base+"-orders", base+"-dlq", "E999")
	again := t.TempDir()
	planApproved(t, again, source)
	if code, out := run(t, again, "--source", source, "redrive", "apply", "p.json"); code != 0 {
		t.Fatalf("a redrive after the restart: exit %d\n%s", code, out)
	}
	if doc := stats(t, again, source); doc.Backend.RecordEntries != 1 || doc.Total != 0 {
		t.Errorf("after a restart and one more redrive the record holds %d entries (total %d), want 1 (and 0)", doc.Backend.RecordEntries, doc.Total)
	}
}

// TestForgedRecordCountsForNothing: a message published to dlqctl's record
// of removals (by mistake or not) that names a DLQ entry, in a broker
// epoch of its choosing, hides nothing: it has no valid MAC under the
// record's key. Nor can the key be replaced by publishing: its queue
// takes one message and refuses any other.
func TestForgedRecordCountsForNothing(t *testing.T) {
	srv := broker.Get(t)
	base := withDLX(t, srv, false)
	ctx := context.Background()
	deadLetter(t, srv, base+"-orders", base+"-dlq", "E1", "E2", "E3")
	es := moveFirst(t, srv, base)
	raw, err := hex.DecodeString(es[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	body := append(raw, 1, 1) // content E2, one copy, rank 1
	ch := confirmChannel(t, srv)
	forged := amqp.Publishing{DeliveryMode: amqp.Persistent, Body: body, Headers: amqp.Table{
		"dlqctl-record": "entries", "dlqctl-run": "r", "dlqctl-epoch": "before-a-restart", "dlqctl-shape": "queue",
		"dlqctl-mac": strings.Repeat("00", 16)}}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "dlqctl.removed."+base+"-dlq", true, false, forged)
	if err != nil || !dc.Wait() {
		t.Fatalf("publish the forged page: %v", err)
	}
	dc, err = ch.PublishWithDeferredConfirmWithContext(ctx, "", "dlqctl.removed."+base+"-dlq.key", true, false, amqp.Publishing{Body: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	if dc.Wait() {
		t.Error("the record's key queue took a second key")
	}
	dir := t.TempDir()
	doc := stats(t, dir, srv.Source(base+"-dlq"))
	if doc.Total != 2 || doc.Backend.CameBack != 0 || doc.Backend.RecordIgnored != 1 {
		t.Errorf("stats with a forged record page: total %d, came back %d, ignored %d; want 2, 0 and 1", doc.Total, doc.Backend.CameBack, doc.Backend.RecordIgnored)
	}
	var ids []string
	for _, e := range scanAll(t, open(t, srv, base+"-dlq", false)) {
		ids = append(ids, e.EventID)
	}
	if strings.Join(ids, ",") != "E2,E3" {
		t.Errorf("the DLQ reads as %v, want E2,E3", ids)
	}
}

// TestForgedEpochHidesNothing: a token published to dlqctl's epoch queue
// by anyone but dlqctl reads as no broker restart. A copy that arrives
// after its content was removed within the epoch (a producer's retry, the
// same envelope imported again) is an entry; a forged epoch would make
// the removal look older than a restart and hide the copy as one that
// came back.
func TestForgedEpochHidesNothing(t *testing.T) {
	srv := broker.Get(t)
	base := withDLX(t, srv, false)
	ctx := context.Background()
	ch := confirmChannel(t, srv)
	publish := func(queue string, m amqp.Publishing) bool {
		t.Helper()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, m)
		if err != nil {
			t.Fatal(err)
		}
		return dc.Wait()
	}
	copyOf := publishing("E1")
	if !publish(base+"-dlq", copyOf) {
		t.Fatal("the broker refused the dead letter")
	}
	moveFirst(t, srv, base)
	if !publish(base+"-dlq", copyOf) {
		t.Fatal("the broker refused the second copy")
	}
	if n := len(scanAll(t, open(t, srv, base+"-dlq", false))); n != 1 {
		t.Fatalf("the copy that arrived after the removal reads as %d entries, want 1", n)
	}
	if publish("dlqctl.epoch."+base+"-dlq", amqp.Publishing{Body: []byte("0123456789abcdef")}) {
		t.Log("the epoch queue took a forged token")
	}
	dir := t.TempDir()
	if doc := stats(t, dir, srv.Source(base+"-dlq")); doc.Total != 1 || doc.Backend.CameBack != 0 {
		t.Errorf("stats after a forged epoch: total %d, came back %d; want 1 and 0", doc.Total, doc.Backend.CameBack)
	}
	planApproved(t, dir, srv.Source(base+"-dlq"), "--to", base+"-orders")
	if code, out := run(t, dir, "--source", srv.Source(base+"-dlq"), "redrive", "apply", "p.json"); code != 0 {
		t.Fatalf("apply after a forged epoch: exit %d\n%s", code, out)
	}
	if n := depth(t, srv, base+"-dlq"); n != 0 {
		t.Errorf("the DLQ still holds %d messages after the redrive, want 0", n)
	}
	if n := depth(t, srv, base+"-orders"); n != 2 {
		t.Errorf("the origin holds %d messages, want 2 (one per redrive)", n)
	}
}

// TestKeyQueueLeftEmpty: a run stopped (the broker went down) between
// declaring the record's key queue and writing the key leaves it empty,
// with no page written: reads go on, and the next removal writes the key.
// A key queue purged while the record holds pages stops reads, loudly.
func TestKeyQueueLeftEmpty(t *testing.T) {
	srv := broker.Get(t)
	base := withDLX(t, srv, false)
	ctx := context.Background()
	deadLetter(t, srv, base+"-orders", base+"-dlq", "E1", "E2")
	ch := srv.Channel(t)
	keyQueue := "dlqctl.removed." + base + "-dlq.key"
	if _, err := ch.QueueDeclare(keyQueue, true, false, false, false, amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	q := open(t, srv, base+"-dlq", false)
	es := scanAll(t, q)
	if len(es) != 2 {
		t.Fatalf("read with an empty key queue: %d entries", len(es))
	}
	items := []backend.MoveItem{{Seq: 1, ID: es[0].ID, EventID: "E1", Fingerprint: es[0].Fingerprint, Dest: base + "-orders"}}
	if _, err := q.Publish(ctx, items, backend.Markers{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	if rm, err := q.Remove(ctx, items); err != nil || !rm[0].Removed {
		t.Fatalf("remove: %v %+v", err, rm)
	}
	if n := len(scanAll(t, open(t, srv, base+"-dlq", false))); n != 1 {
		t.Errorf("after the move the DLQ reads %d entries, want 1", n)
	}
	if _, err := ch.QueuePurge(keyQueue, false); err != nil {
		t.Fatal(err)
	}
	err := open(t, srv, base+"-dlq", false).Scan(ctx, "", func(envelope.Envelope) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "holds no key") {
		t.Errorf("a read with the key purged and pages left: %v, want a refusal", err)
	}
}
