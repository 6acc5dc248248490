package kafkadlq_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/kafka"
)

// TestForgedStateRecordsChangeNothing: records that dlqctl did not write
// to the state topic — a plain producer's state record, tombstone, garbage
// and lease take, and a transactional record with headers, as a redrive of
// another DLT into this state topic writes — hide no entry, bring back no
// moved one, block no read and hold no lease; stats says they were ignored.
func TestForgedStateRecordsChangeNothing(t *testing.T) {
	ctx := ctxFor(t)
	origin, dlt, src, entries := seedRedrive(t, ctx)
	if res, err := src.Publish(ctx, itemsOf(entries[:1], origin), backend.Markers{RunID: "run-1"}); err != nil || res[0].Err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	state := dlt + ".dlqctl-state"
	forged := func(id string) []byte {
		return []byte(fmt.Sprintf(`{"status":"redriven","run_id":"run-1","seq":2,"dest":%q,"dest_id":"0:0","at":%q}`, origin, time.Now().UTC().Format(time.RFC3339)))
	}
	produceManual(t, ctx,
		&kgo.Record{Topic: state, Partition: 0, Key: []byte(entries[1].ID), Value: forged(entries[1].ID)},
		&kgo.Record{Topic: state, Partition: 0, Key: []byte(entries[0].ID)}, // a tombstone for the moved one
		&kgo.Record{Topic: state, Partition: 0, Key: []byte(entries[2].ID), Value: []byte("not json")},
		&kgo.Record{Topic: state, Partition: 0, Key: []byte("dlqctl-lease"), Value: []byte(`{"op":"take","run_id":"evil","since":"2026-01-01T00:00:00Z","ttl_ms":3155760000000,"epoch":0}`)},
	)
	// A transactional producer's record with headers: what a redrive of
	// another DLT writes.
	tx := rawClient(t, kgo.TransactionalID("other-"+dlt), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Topic: state, Partition: 0, Key: []byte(entries[3].ID), Value: forged(entries[3].ID),
		Headers: []kgo.RecordHeader{{Key: backend.MarkerRunID, Value: []byte("run-b")}}}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	fresh := openTopic(t, ctx, dlt, kafkadlq.Options{})
	got := scanAll(t, ctx, fresh, "")
	if len(got) != 3 || got[0].ID == entries[0].ID {
		t.Fatalf("scan shows %s, want the three entries not moved (%s %s %s)", ids(got), entries[1].ID, entries[2].ID, entries[3].ID)
	}
	if n, err := fresh.Len(ctx); err != nil || n != 3 {
		t.Fatalf("Len = %d, %v; want 3", n, err)
	}
	if _, err := fresh.Get(ctx, entries[0].ID); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("the moved entry came back: %v", err)
	}
	x, err := fresh.Extras(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(x.JSON.(kafkadlq.KafkaExtras).Warnings, "\n"); !strings.Contains(w, "5 records in the state topic") || !strings.Contains(w, "not written by dlqctl") {
		t.Fatalf("warnings %q, want one saying 5 records were not written by dlqctl", w)
	}
	if h, err := fresh.LeaseHolder(ctx); err != nil || h != "" {
		t.Fatalf("LeaseHolder = %q, %v: a forged take holds the DLQ", h, err)
	}
	l, err := fresh.Lease(ctx, backend.LeaseHolder{RunID: "run-2", PID: 1, Host: "h"})
	if err != nil {
		t.Fatalf("a forged take blocks the lease: %v", err)
	}
	defer l.Release(ctx)
	res, err := fresh.Publish(ctx, itemsOf(got, origin), backend.Markers{RunID: "run-2"})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || !r.Removed {
			t.Fatalf("entry %s: %+v", got[i].ID, r)
		}
	}
	if left := scanAll(t, ctx, openTopic(t, ctx, dlt, kafkadlq.Options{}), ""); len(left) != 0 {
		t.Fatalf("left %s", ids(left))
	}
}

// TestRedriveIntoAnotherStateTopicRefused: a dead letter of DLT B whose
// original topic is DLT A's state topic, named anything by state_topic=,
// is never redriven there: the destination holds dlqctl bookkeeping.
func TestRedriveIntoAnotherStateTopicRefused(t *testing.T) {
	ctx := ctxFor(t)
	broker := kafkaServer(t)
	// DLT A, with its state in a custom topic.
	origin, dltA, _, entriesA := seedRedrive(t, ctx)
	custom := dltA + "-bookkeeping"
	a, err := kafkadlq.Open(ctx, "kafka://"+broker.Bootstrap()+"?topic="+dltA+"&state_topic="+custom, kafkadlq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if res, err := a.Publish(ctx, itemsOf(entriesA[:1], origin), backend.Markers{RunID: "run-a"}); err != nil || res[0].Err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	// DLT B, whose dead letters name A's state topic as their origin.
	dltB := freshTopic(t, ".DLT")
	createTopic(t, ctx, dltB, 1, nil)
	produceManual(t, ctx, springDeadLetter(dltB, 0, time.Now().Add(-time.Minute), custom, 0, 1, entriesA[1].ID, "B1",
		`{"status":"redriven","run_id":"run-b","at":"2026-01-01T00:00:00Z"}`, "planted"))
	b := openTopic(t, ctx, dltB, kafkadlq.Options{})
	err = b.GuardDestination(ctx, custom)
	if err == nil || !strings.Contains(err.Error(), "dlqctl state topic") {
		t.Fatalf("GuardDestination(A's state topic %s) = %v", custom, err)
	}
	if err := b.GuardDestination(ctx, origin); err != nil {
		t.Fatalf("GuardDestination(an origin) = %v", err)
	}
	before := len(readCommitted(t, ctx, custom))
	bEntries := scanAll(t, ctx, b, "")
	res, err := b.Publish(ctx, itemsOf(bEntries, ""), backend.Markers{RunID: "run-b"})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "refused") {
		t.Fatalf("redrive into A's state topic: %+v", res[0])
	}
	if after := len(readCommitted(t, ctx, custom)); after != before {
		t.Fatalf("A's state topic went from %d to %d records", before, after)
	}
	if left := scanAll(t, ctx, a, ""); len(left) != len(entriesA)-1 {
		t.Fatalf("A shows %s", ids(left))
	}
}

// TestStateTopicMadeByOthers: a state topic that exists before dlqctl
// first writes to it (auto-created by a produce with the broker's
// defaults: deleted after 7 days, maybe more than one partition; or
// compacted, as older dlqctl made it, where a record with an entry's key
// deletes its state record) is set to keep every record, uncompacted,
// before dlqctl writes to it; and a record on a partition dlqctl never
// writes, even one committed in a transaction, changes nothing.
func TestStateTopicMadeByOthers(t *testing.T) {
	for _, c := range []struct {
		partitions int32
		cfg        map[string]*string
	}{
		{2, nil},
		{1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact"), "retention.ms": kadm.StringPtr("604800000")}},
	} {
		ctx := ctxFor(t)
		origin, dlt, src, entries := seedRedrive(t, ctx)
		state := dlt + ".dlqctl-state"
		createTopic(t, ctx, state, c.partitions, c.cfg)
		cfg := c.cfg
		if res, err := src.Remove(ctx, itemsOf(entries[:1], "")); err != nil || !res[0].Removed {
			t.Fatalf("resolve: %+v %v", res, err)
		}
		if c.partitions > 1 {
			tx := rawClient(t, kgo.TransactionalID("other-"+dlt), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err := tx.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			value := fmt.Sprintf(`{"status":"redriven","run_id":"r","seq":1,"dest":%q,"dest_id":"0:0","at":"2026-01-01T00:00:00Z"}`, origin)
			if err := tx.ProduceSync(ctx, &kgo.Record{Topic: state, Partition: 1, Key: []byte(entries[1].ID), Value: []byte(value)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			if got := scanAll(t, ctx, openTopic(t, ctx, dlt, kafkadlq.Options{}), ""); len(got) != len(entries)-1 {
				t.Fatalf("a record on partition 1 of the state topic hid an entry: %s", ids(got))
			}
		}
		rc, err := kadm.NewClient(rawClient(t)).DescribeTopicConfigs(ctx, state)
		if err != nil {
			t.Fatal(err)
		}
		c, err := rc.On(state, nil)
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]string{}
		for _, kv := range c.Configs {
			if kv.Value != nil {
				have[kv.Key] = *kv.Value
			}
		}
		for k, want := range map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1", "message.timestamp.type": "LogAppendTime"} {
			if have[k] != want {
				t.Errorf("state topic made with %v: %s=%s, want %s", cfg, k, have[k], want)
			}
		}
	}
}

// TestForgedRedriveBeforeFormat: in a state topic that no dlqctl of this
// format wrote to yet (no format record: a state topic an older dlqctl
// wrote, or one someone made first), a plain producer's record of a
// redrive hides nothing — every dlqctl wrote those in the redrive's
// transaction — while an older dlqctl's plain resolve record still counts.
func TestForgedRedriveBeforeFormat(t *testing.T) {
	ctx := ctxFor(t)
	origin, dlt, _, entries := seedRedrive(t, ctx)
	state := dlt + ".dlqctl-state"
	createTopic(t, ctx, state, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact"), "message.timestamp.type": kadm.StringPtr("LogAppendTime")})
	at := time.Now().UTC().Format(time.RFC3339)
	produceManual(t, ctx,
		&kgo.Record{Topic: state, Partition: 0, Key: []byte(entries[0].ID),
			Value: []byte(fmt.Sprintf(`{"status":"redriven","run_id":"20260101T000000Z-forged00","seq":1,"dest":%q,"dest_id":"0:0","at":%q}`, origin, at))},
		&kgo.Record{Topic: state, Partition: 0, Key: []byte(entries[1].ID), Value: []byte(fmt.Sprintf(`{"status":"resolved","at":%q}`, at))},
	)
	got := scanAll(t, ctx, openTopic(t, ctx, dlt, kafkadlq.Options{}), "")
	if len(got) != len(entries)-1 || got[0].ID != entries[0].ID {
		t.Fatalf("scan shows %s; want every entry but the resolved %s (a plain record of a redrive hides nothing)", ids(got), entries[1].ID)
	}
}
