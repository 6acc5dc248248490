package kafkadlq_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	kafkadlq "github.com/dlqctl/dlqctl/backends/kafka"
)

// TestOpenTransactionIsNotWaitedOnForEver: a transaction on the state
// topic that the broker does not end (here a producer of another
// transactional ID with a ten-minute timeout, which no lease fences) makes
// a read fail, naming what it waited for, once it has stayed open well
// past the transaction timeout, instead of waiting on it for ever.
func TestOpenTransactionIsNotWaitedOnForEver(t *testing.T) {
	broker := kafkaServer(t)
	ctx := ctxFor(t)
	_, dlt, src, entries := seedRedrive(t, ctx)
	// The state topic must exist for the stuck producer to write to it.
	if _, err := src.Remove(ctx, nil); err != nil {
		t.Fatal(err)
	}
	stuck, err := kgo.NewClient(kgo.SeedBrokers(broker.Bootstrap()), kgo.TransactionalID("not-dlqctl-"+dlt),
		kgo.TransactionTimeout(10*time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	if err := stuck.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: dlt + ".dlqctl-state", Partition: 0, Key: []byte(entries[0].ID), Value: []byte(`{"status":"redriven","run_id":"stuck"}`)}
	if err := stuck.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	defer stuck.EndTransaction(ctx, kgo.TryAbort)

	reader := openTopic(t, ctx, dlt, kafkadlq.Options{TransactionTimeout: time.Second})
	start := time.Now()
	_, err = reader.Len(ctx)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "stayed open") || !strings.Contains(err.Error(), dlt+".dlqctl-state") {
		t.Fatalf("Len with a transaction left open: err = %v, want one saying the transaction on the state topic stayed open", err)
	}
	if took < 30*time.Second || took > 60*time.Second {
		t.Fatalf("Len gave up after %s, want about 32 s (twice the 1 s transaction timeout, and 30 s)", took)
	}
}
