package pulsardlq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/pulsar"
)

// freshNamespace creates a namespace of its own in the public tenant; with
// partitioned, one whose auto-created topics are partitioned (2 partitions),
// as the broker setting allowAutoTopicCreationType=partitioned does.
func freshNamespace(t *testing.T, partitioned bool) string {
	t.Helper()
	ns := fmt.Sprintf("public/ns-%d-%d", time.Now().UnixNano()%1e9, topicSeq.Add(1))
	adminDo(t, http.MethodPut, "/admin/v2/namespaces/"+ns, "")
	if partitioned {
		adminDo(t, http.MethodPost, "/admin/v2/namespaces/"+ns+"/autoTopicCreation",
			`{"allowAutoTopicCreation":true,"topicType":"partitioned","defaultNumPartitions":2}`)
	}
	return ns
}

// deadLetters produces n dead letters of origin to dlq, one per entry,
// with event IDs PREFIX-1…PREFIX-n.
func deadLetters(t *testing.T, c pulsar.Client, dlq, origin, prefix string, n int) {
	t.Helper()
	msgs := make([]*pulsar.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &pulsar.ProducerMessage{
			Payload:    []byte(fmt.Sprintf(`{"n":%d}`, i+1)),
			Properties: map[string]string{"REAL_TOPIC": origin, "event_id": fmt.Sprintf("%s-%d", prefix, i+1)},
		}
	}
	produce(t, c, dlq, false, msgs...)
}

// withConsumers gives topic a durable subscription, as its consumers have:
// without one, the broker's default retention drops what it holds.
func withConsumers(t *testing.T, c pulsar.Client, topic string) {
	t.Helper()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "workers", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	cons.Close()
}

// move publishes and removes items, as one chunk of a run does.
func move(t *testing.T, tp *pulsardlq.Topic, items []backend.MoveItem, m backend.Markers) {
	t.Helper()
	ctx := testCtx(t)
	res, err := tp.Publish(ctx, items, m)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("publish %s: %v", items[i].ID, r.Err)
		}
	}
	if res, err = tp.Remove(ctx, items); err != nil {
		t.Fatalf("remove: %v", err)
	}
	for i, r := range res {
		if r.Err != nil || !r.Removed {
			t.Fatalf("remove %s: %+v", items[i].ID, r)
		}
	}
}

// eventIDs lists the event IDs of the messages on topic (each of its
// partitions when it is partitioned), sorted.
func eventIDs(t *testing.T, c pulsar.Client, topic string) []string {
	t.Helper()
	var meta struct {
		Partitions int `json:"partitions"`
	}
	adminJSON(t, adminPath(topic)+"/partitions", &meta)
	topics := []string{topic}
	if meta.Partitions > 0 {
		topics = topics[:0]
		for i := range meta.Partitions {
			topics = append(topics, fmt.Sprintf("%s-partition-%d", topic, i))
		}
	}
	var ids []string
	for _, tp := range topics {
		for _, m := range readAll(t, c, tp) {
			ids = append(ids, m.Properties()["event_id"])
		}
	}
	slices.Sort(ids)
	return ids
}

// internalLedgers lists the ledger ids topic holds now (loading it on the
// broker if it was not).
func internalLedgers(t *testing.T, topic string) []int64 {
	t.Helper()
	var st struct {
		Ledgers []struct {
			LedgerID int64 `json:"ledgerId"`
		} `json:"ledgers"`
	}
	adminJSON(t, adminPath(topic)+"/internalStats", &st)
	var ids []int64
	for _, l := range st.Ledgers {
		ids = append(ids, l.LedgerID)
	}
	return ids
}

// TestBrokerCrash: a broker SIGKILLed loses the acknowledgements it had
// not written yet, and on restart rolls every topic over to a new ledger;
// the next retention check deletes the closed ledgers that no subscription
// holds (the default retention keeps nothing consumed, and a topic without
// subscription has consumed everything). One SIGKILL lands right after a
// completed run, between two chunks of a run, while a run's sends await
// their receipts, and after a run in a namespace that auto-creates
// partitioned topics. After the restart and the retention check (this
// package's shared broker runs it every 5 s): every removal is still recorded, stats say what came back, a new
// plan takes nothing that was moved, the send cut off ended within its
// timeout with every outcome unknown, and the resumes leave each event on
// its origin once.
func TestBrokerCrash(t *testing.T) {
	broker := pulsarServer(t)
	c := client(t)
	type scenario struct {
		name          string
		ns            string
		dlq, origin   string
		n, removed    int
		inFlight      bool
		markers       backend.Markers
		before, after []backend.MoveItem
	}
	scenarios := []*scenario{
		{name: "completed run", n: 6, removed: 6},
		{name: "between two chunks", n: 6, removed: 3},
		{name: "sends awaiting their receipts", n: 600, inFlight: true},
		{name: "completed run where topics are created partitioned", ns: freshNamespace(t, true), n: 6, removed: 6},
	}
	var cut *scenario
	for i, s := range scenarios {
		s.dlq, s.origin = freshTopic(t, s.ns), freshTopic(t, s.ns)
		s.markers = backend.Markers{RunID: fmt.Sprint("crash-", i), ProducerName: fmt.Sprintf("dlqctl-crash-%d-%d", i, time.Now().UnixNano())}
		withConsumers(t, c, s.origin)
		deadLetters(t, c, s.dlq, s.origin, fmt.Sprintf("S%d", i), s.n)
		if s.inFlight {
			cut = s
			continue
		}
		tp, err := pulsardlq.Open(testCtx(t), sourceURL(t, s.dlq), pulsardlq.Options{})
		if err != nil {
			t.Fatal(err)
		}
		items := planItems(t, tp)
		s.before, s.after = items[:s.removed], items[s.removed:]
		move(t, tp, s.before, s.markers)
		_ = tp.Close()
	}
	// A topic that no subscription holds, whose closed ledger shows when
	// the retention check has run.
	control := freshTopic(t, "")
	produce(t, c, control, false, &pulsar.ProducerMessage{Payload: []byte("x")})
	old := internalLedgers(t, control)

	// The cut run sends with a 2 s timeout; the broker dies once a few of
	// its sends have arrived.
	tp, err := pulsardlq.Open(testCtx(t), sourceURL(t, cut.dlq, "timeout=2s"), pulsardlq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cut.after = planItems(t, tp)
	arrived, err := c.Subscribe(pulsar.ConsumerOptions{Topic: cut.origin, SubscriptionName: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	type outcome struct {
		res []backend.MoveResult
		err error
		at  time.Time
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := tp.Publish(context.Background(), cut.after, cut.markers)
		done <- outcome{res, err, time.Now()}
	}()
	for range 5 {
		if _, err := arrived.Receive(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := broker.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	o := <-done
	t.Logf("the cut send returned %v after the kill: %v", o.at.Sub(killed).Round(time.Millisecond), o.err)
	if o.err == nil {
		t.Errorf("the send cut off by the crash returned per-item results %d, want an error: every outcome unknown", len(o.res))
	}
	if d := o.at.Sub(killed); d > 15*time.Second {
		t.Errorf("the send cut off by the crash returned %v after it, want within its timeout", d)
	}
	_ = tp.Close()
	if err := broker.Up(); err != nil {
		t.Fatal(err)
	}
	// Every command after the restart reads the record, which loads its
	// topic (a new ledger); then the retention check runs.
	for _, s := range scenarios {
		if tp, err := pulsardlq.Open(testCtx(t), sourceURL(t, s.dlq), pulsardlq.Options{}); err == nil {
			_ = tp.Close()
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for slices.Contains(internalLedgers(t, control), old[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("the retention check never deleted ledger %d of %s", old[0], control)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second) // deletions of one check run one after another

	for i, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			tp := open(t, s.dlq, pulsardlq.Options{})
			if n, err := pulsardlq.RecordedRemovals(ctx, tp); err != nil || n != s.removed {
				t.Errorf("the removal record holds %d entries (%v) after the crash and the retention check, want %d", n, err, s.removed)
			}
			if n, err := tp.Len(ctx); err != nil || n != int64(s.n-s.removed) {
				t.Errorf("len = %d, %v; want %d", n, err, s.n-s.removed)
			}
			x, err := tp.Extras(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			ex := x.JSON.(pulsardlq.PulsarExtras)
			if want := int(ex.Backlog) - (s.n - s.removed); ex.CameBack != want {
				t.Errorf("came back %d, want %d (backlog %d)", ex.CameBack, want, ex.Backlog)
			}
			t.Logf("backlog after the crash %d, came back %d", ex.Backlog, ex.CameBack)
			again := planItems(t, tp)
			if len(again) != len(s.after) {
				t.Fatalf("a new plan takes %d entries, want the %d not moved yet", len(again), len(s.after))
			}
			for k := range again {
				if again[k].ID != s.after[k].ID {
					t.Fatalf("a new plan takes %s, want %s", again[k].ID, s.after[k].ID)
				}
			}
			// The resume: what arrived is found by the run's markers, the
			// rest is sent with the same identity, and all is removed.
			rest := s.after
			if s.inFlight {
				qs := make([]backend.PublishedQuery, len(s.after))
				for k, it := range s.after {
					qs[k] = backend.PublishedQuery{Item: it, Since: since}
				}
				found, err := tp.CheckPublished(ctx, qs, s.markers)
				if err != nil {
					t.Fatal(err)
				}
				rest = nil
				for k, f := range found {
					if f != backend.PresenceFound {
						rest = append(rest, s.after[k])
					}
				}
				t.Logf("%d of %d sends had arrived", len(s.after)-len(rest), len(s.after))
			}
			if len(rest) > 0 {
				move(t, tp, rest, s.markers)
			}
			if len(rest) < len(s.after) {
				if _, err := tp.Remove(ctx, s.after); err != nil {
					t.Fatal(err)
				}
			}
			if n, err := tp.Len(ctx); err != nil || n != 0 {
				t.Errorf("len after the resume = %d, %v", n, err)
			}
			var all []string
			for k := 1; k <= s.n; k++ {
				all = append(all, fmt.Sprintf("S%d-%d", i, k))
			}
			slices.Sort(all)
			if got := eventIDs(t, c, s.origin); !slices.Equal(got, all) {
				t.Errorf("the origin holds %d events, want each of the %d once", len(got), len(all))
			}
		})
	}
}

// anchorOf is the anchor of dlqctl's removal record on the DLQ
// subscription of topic (not partitioned), as anyone allowed to look the
// topic up can read it.
func anchorOf(t *testing.T, topic string) (chain string, n int64, tip string) {
	t.Helper()
	var props map[string]string
	adminJSON(t, adminPath(topic)+"/subscription/dlqctl/properties", &props)
	var a struct {
		Chain string `json:"chain"`
		N     int64  `json:"n"`
		Tip   string `json:"tip"`
	}
	if err := json.Unmarshal([]byte(props["dlqctl-removals"]), &a); err != nil {
		t.Errorf("no anchor on the subscription of %s: %v (%v)", topic, err, props)
	}
	return a.Chain, a.N, a.Tip
}

// TestRemovalRecordCountsOnlyWhatDlqctlWrote: anyone who may produce to
// TOPIC-dlqctl-removed can write there; what dlqctl did not write hides
// nothing. Forged before dlqctl's first removal and after it, in the old
// plain form (a locator) and in dlqctl's own form linked to the chain's
// end, each forged entry is still listed, planned and moved, once.
func TestRemovalRecordCountsOnlyWhatDlqctlWrote(t *testing.T) {
	c := client(t)
	dlq, origin := freshTopic(t, ""), freshTopic(t, "")
	withConsumers(t, c, origin)
	deadLetters(t, c, dlq, origin, "F", 4)
	record := dlq + "-dlqctl-removed"
	tp := open(t, dlq, pulsardlq.Options{})
	items := planItems(t, tp)
	produce(t, c, record, false, &pulsar.ProducerMessage{Payload: []byte(items[1].ID)})
	move(t, tp, items[:1], backend.Markers{RunID: "first", ProducerName: fmt.Sprintf("dlqctl-first-%d", time.Now().UnixNano())})
	chain, n, tip := anchorOf(t, dlq)
	forged := func(n int64, chain, prev string, id string) *pulsar.ProducerMessage {
		raw, _ := json.Marshal(map[string]any{
			"schema": "dlqctl.removals/v1", "chain": chain, "n": n, "prev": prev,
			"subscription": "dlqctl", "entries": []string{id},
		})
		return &pulsar.ProducerMessage{Payload: raw}
	}
	produce(t, c, record, false,
		forged(n+1, chain, tip, items[2].ID),
		forged(1, "0123456789abcdef0123456789abcdef", "", items[3].ID),
		&pulsar.ProducerMessage{Payload: []byte(items[3].ID)})

	ctx := testCtx(t)
	fresh := open(t, dlq, pulsardlq.Options{})
	if got := ids(scanAll(t, fresh, "")); !slices.Equal(got, []string{items[1].ID, items[2].ID, items[3].ID}) {
		t.Fatalf("listed %v, want the three entries not moved yet", got)
	}
	if n, err := fresh.Len(ctx); err != nil || n != 3 {
		t.Errorf("len = %d, %v; want 3", n, err)
	}
	again := planItems(t, fresh)
	if len(again) != 3 {
		t.Fatalf("planned %d, want 3", len(again))
	}
	move(t, fresh, again, backend.Markers{RunID: "second", ProducerName: fmt.Sprintf("dlqctl-second-%d", time.Now().UnixNano())})
	if got := eventIDs(t, c, origin); !slices.Equal(got, []string{"F-1", "F-2", "F-3", "F-4"}) {
		t.Errorf("the origin holds %v, want each event once", got)
	}
	// dlqctl's chain went on from its own end, past the forged link.
	later := open(t, dlq, pulsardlq.Options{})
	if n, err := pulsardlq.RecordedRemovals(ctx, later); err != nil || n != 4 {
		t.Errorf("the record holds %d removals (%v), want the 4 dlqctl made", n, err)
	}
}

// TestARecordThatShouldExistIsNeverReadAsEmpty: once dlqctl has recorded a
// removal, a record topic that is gone, or partitioned in its place, is an
// error for every read, never an empty record that would let entries
// brought back by a broker crash be moved a second time.
func TestARecordThatShouldExistIsNeverReadAsEmpty(t *testing.T) {
	for _, tc := range []struct {
		name string
		says string
		lose func(t *testing.T, record string)
	}{
		{"deleted", "does not exist", func(t *testing.T, record string) {
			adminDo(t, http.MethodDelete, adminPath(record)+"?force=true", "")
		}},
		{"replaced by a partitioned topic", "is a partitioned topic", func(t *testing.T, record string) {
			adminDo(t, http.MethodDelete, adminPath(record)+"?force=true", "")
			createPartitioned(t, record, 2)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t)
			dlq, origin := freshTopic(t, ""), freshTopic(t, "")
			deadLetters(t, c, dlq, origin, "L", 2)
			tp := open(t, dlq, pulsardlq.Options{})
			items := planItems(t, tp)
			move(t, tp, items[:1], backend.Markers{RunID: "r", ProducerName: fmt.Sprintf("dlqctl-lost-%d", time.Now().UnixNano())})
			_ = tp.Close()
			tc.lose(t, dlq+"-dlqctl-removed")
			_, err := pulsardlq.Open(testCtx(t), sourceURL(t, dlq), pulsardlq.Options{})
			if err == nil || !strings.Contains(err.Error(), "incomplete") || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("open after the record was %s: %v, want an error saying the record is incomplete: %s", tc.name, err, tc.says)
			}
		})
	}
}

// TestRemovalRecordOutlivesInactiveTopicDeletion: Pulsar deletes, by
// default, a topic that has no subscription (or, in the other mode, whose
// subscriptions have all caught up) once it has been idle a while, data
// and all. The removal record is idle between runs; it must stay.
func TestRemovalRecordOutlivesInactiveTopicDeletion(t *testing.T) {
	c := client(t)
	type setup struct{ mode, ns, dlq, control string }
	var setups []*setup
	for _, mode := range []string{"delete_when_no_subscriptions", "delete_when_subscriptions_caught_up"} {
		s := &setup{mode: mode, ns: freshNamespace(t, false)}
		adminDo(t, http.MethodPost, "/admin/v2/namespaces/"+s.ns+"/inactiveTopicPolicies",
			`{"inactiveTopicDeleteMode":"`+mode+`","maxInactiveDurationSeconds":3,"deleteWhileInactive":true}`)
		s.dlq = freshTopic(t, s.ns)
		origin := freshTopic(t, s.ns)
		withConsumers(t, c, origin)
		// One entry stays: a DLQ whose subscription has caught up is idle
		// too, and goes with its anchor (and every entry the record names).
		deadLetters(t, c, s.dlq, origin, "I", 4)
		tp, err := pulsardlq.Open(testCtx(t), sourceURL(t, s.dlq), pulsardlq.Options{})
		if err != nil {
			t.Fatal(err)
		}
		move(t, tp, planItems(t, tp)[:3], runMarkers("inactive-"+mode))
		_ = tp.Close()
		// A topic that nothing holds, whose deletion shows the check ran.
		s.control = freshTopic(t, s.ns)
		produce(t, c, s.control, false, &pulsar.ProducerMessage{Payload: []byte("x")})
		setups = append(setups, s)
	}
	for _, s := range setups {
		deadline := time.Now().Add(60 * time.Second)
		for {
			var topics []string
			adminJSON(t, "/admin/v2/persistent/"+s.ns, &topics)
			if !slices.Contains(topics, s.control) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the broker never deleted the idle topic %s", s.mode, s.control)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	for _, s := range setups {
		tp := open(t, s.dlq, pulsardlq.Options{})
		if n, err := pulsardlq.RecordedRemovals(testCtx(t), tp); err != nil || n != 3 {
			t.Errorf("%s: the removal record holds %d entries (%v) after the idle topics were deleted, want 3", s.mode, n, err)
		}
	}
}
