package kafkadlq_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/backends/kafka"
)

// TestRecreatedDLTShowsNewEntries: a DLT deleted and made again reuses
// offsets from 0; the state of the old topic must not hide the new
// topic's dead letters, and stats' extras say that state disagreed.
func TestRecreatedDLTShowsNewEntries(t *testing.T) {
	ctx := ctxFor(t)
	origin, dlt, src, entries := seedRedrive(t, ctx)
	if res, err := src.Publish(ctx, itemsOf(entries[:2], origin), backend.Markers{RunID: "run-old"}); err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if res, err := src.Remove(ctx, itemsOf(entries[2:], "")); err != nil || res[0].Err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	src.Close()
	adm := kadm.NewClient(rawClient(t))
	if _, err := adm.DeleteTopics(ctx, dlt); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := adm.CreateTopic(ctx, 2, 1, nil, dlt)
		if err == nil {
			err = resp.Err
		}
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) || time.Now().After(deadline) {
			t.Fatalf("make the DLT again: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	base := time.Now().Add(-10 * time.Second).Truncate(time.Millisecond)
	produceManual(t, ctx,
		springDeadLetter(dlt, 0, base, origin, 0, 1, "k", "N1", `{"n":"new1"}`, "boom"),
		springDeadLetter(dlt, 1, base.Add(time.Millisecond), origin, 0, 2, "k", "N2", `{"n":"new2"}`, "boom"),
		springDeadLetter(dlt, 0, base.Add(2*time.Millisecond), origin, 0, 3, "k", "N3", `{"n":"new3"}`, "boom"),
	)
	fresh := openTopic(t, ctx, dlt, kafkadlq.Options{})
	got := scanAll(t, ctx, fresh, "")
	if len(got) != 3 {
		t.Fatalf("the new DLT shows %d of 3 entries: %s", len(got), ids(got))
	}
	for _, e := range got {
		if _, err := fresh.Get(ctx, e.ID); err != nil {
			t.Fatalf("Get %s: %v", e.ID, err)
		}
	}
	x, err := fresh.Extras(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ke := x.JSON.(kafkadlq.KafkaExtras)
	if len(ke.Warnings) == 0 || !strings.Contains(ke.Warnings[0], "topic ID") {
		t.Fatalf("warnings %q", ke.Warnings)
	}
	if ke.Partitions[0].Remaining != 2 || ke.Partitions[1].Remaining != 1 {
		t.Fatalf("extras %+v", ke.Partitions)
	}
	// The new entries move, and only then are hidden.
	if res, err := fresh.Publish(ctx, itemsOf(got, origin), backend.Markers{RunID: "run-new"}); err != nil || res[0].Err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if left := scanAll(t, ctx, fresh, ""); len(left) != 0 {
		t.Fatalf("left %s", ids(left))
	}
}

// TestLegacyStateRecordChecksFingerprint: a state record from before
// topic IDs were recorded hides the record at its offset only if the
// fingerprint it names is that record's.
func TestLegacyStateRecordChecksFingerprint(t *testing.T) {
	ctx := ctxFor(t)
	_, dlt, _, entries := seedRedrive(t, ctx)
	// As an older dlqctl made it and wrote to it: no format record, a
	// redrive's state records committed in the DLT's transaction (as every
	// dlqctl wrote them).
	state := dlt + ".dlqctl-state"
	createTopic(t, ctx, state, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	tx := rawClient(t, kgo.TransactionalID(kafkadlq.TransactionalID(dlt)), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx,
		&kgo.Record{Topic: state, Partition: 0, Key: []byte(entries[0].ID), Value: []byte(`{"status":"redriven","fingerprint":"` + entries[0].Fingerprint + `","at":"2025-01-01T00:00:00Z"}`)},
		&kgo.Record{Topic: state, Partition: 0, Key: []byte(entries[1].ID), Value: []byte(`{"status":"redriven","fingerprint":"sha256:another-record","at":"2025-01-01T00:00:00Z"}`)},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	fresh := openTopic(t, ctx, dlt, kafkadlq.Options{})
	got := scanAll(t, ctx, fresh, "")
	shown := map[string]bool{}
	for _, e := range got {
		shown[e.ID] = true
	}
	if len(got) != 3 || shown[entries[0].ID] || !shown[entries[1].ID] {
		t.Fatalf("scan %s (hidden should be %s only)", ids(got), entries[0].ID)
	}
}
