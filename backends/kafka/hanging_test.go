package kafkadlq_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/dlqctl/dlqctl/backend"
	kafkadlq "github.com/dlqctl/dlqctl/backends/kafka"
)

// TestHangingStateTransactionIsSettled: a transaction left open on the
// state topic that no coordinator holds (a hanging transaction, as a
// broker crash can leave) would stop every resume for good. The lease
// holder ends it as the transaction it belonged to ended: committed when
// the origin record its state record names is committed, aborted when
// that record was aborted.
func TestHangingStateTransactionIsSettled(t *testing.T) {
	for _, committed := range []bool{true, false} {
		t.Run(fmt.Sprintf("origin committed %v", committed), func(t *testing.T) {
			ctx := ctxFor(t)
			origin, dlt, src, entries := seedRedrive(t, ctx)
			if _, err := src.Remove(ctx, nil); err != nil { // makes the state topic
				t.Fatal(err)
			}
			part, off := originRecord(t, ctx, origin, committed)
			value := fmt.Sprintf(`{"status":"redriven","run_id":"crashed","seq":1,"dest":%q,"dest_id":"%d:%d","at":"2026-01-01T00:00:00Z"}`, origin, part, off)
			hangTransaction(t, ctx, kafkadlq.TransactionalID(dlt), dlt+".dlqctl-state", []byte(entries[0].ID), []byte(value))

			var stderr bytes.Buffer
			holder := openTopic(t, ctx, dlt, kafkadlq.Options{TransactionTimeout: 2 * time.Second, Stderr: &stderr})
			l, err := holder.Lease(ctx, backend.LeaseHolder{RunID: "resume", PID: 1, Host: "h"})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			n, err := holder.Len(ctx)
			if err != nil {
				t.Fatalf("Len with a hanging transaction on the state topic: %v", err)
			}
			want, verb := int64(len(entries)), "aborted"
			if committed {
				want, verb = want-1, "committed"
			}
			if n != want {
				t.Errorf("Len = %d, want %d (the state record %s)", n, want, verb)
			}
			if !strings.Contains(stderr.String(), "no coordinator held open") || !strings.Contains(stderr.String(), "it is "+verb+" now") {
				t.Errorf("stderr does not say the hanging transaction was %s:\n%s", verb, stderr.String())
			}
		})
	}
}

// TestHangingTransactionNamedToReaders: a reader that holds no lease
// leaves a hanging transaction alone, and its error says what hangs and
// how it is ended.
func TestHangingTransactionNamedToReaders(t *testing.T) {
	ctx := ctxFor(t)
	origin, dlt, src, entries := seedRedrive(t, ctx)
	if _, err := src.Remove(ctx, nil); err != nil {
		t.Fatal(err)
	}
	part, off := originRecord(t, ctx, origin, true)
	value := fmt.Sprintf(`{"status":"redriven","run_id":"crashed","dest":%q,"dest_id":"%d:%d","at":"2026-01-01T00:00:00Z"}`, origin, part, off)
	hangTransaction(t, ctx, kafkadlq.TransactionalID(dlt), dlt+".dlqctl-state", []byte(entries[0].ID), []byte(value))
	reader := openTopic(t, ctx, dlt, kafkadlq.Options{TransactionTimeout: time.Second})
	_, err := reader.Len(ctx)
	if err == nil || !strings.Contains(err.Error(), "hanging transaction") || !strings.Contains(err.Error(), "a resume of the run settles it") {
		t.Fatalf("Len by a reader with a hanging transaction: err = %v, want one naming the hanging transaction", err)
	}
}

// originRecord writes one record to partition 0 of topic, committed or in
// a transaction that is then aborted, and returns where it went.
func originRecord(t *testing.T, ctx context.Context, topic string, committed bool) (int32, int64) {
	t.Helper()
	rec := &kgo.Record{Topic: topic, Partition: 0, Value: []byte("redriven")}
	if committed {
		produceManual(t, ctx, rec)
		return rec.Partition, rec.Offset
	}
	cl := rawClient(t, kgo.TransactionalID("abort-"+topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	return rec.Partition, rec.Offset
}

// hangTransaction leaves a transaction of txnID open on partition 0 of
// topic that its coordinator never heard of: a produce of the old protocol
// that skips AddPartitionsToTxn, accepted while the broker's partition
// verification is off for a moment (the way KIP-664 reproduces a hanging
// transaction).
func hangTransaction(t *testing.T, ctx context.Context, txnID, topic string, key, value []byte) {
	t.Helper()
	cl := rawClient(t, kgo.MaxVersions(kversion.V3_6_0()))
	adm := kadm.NewClient(cl)
	const verify = "transaction.partition.verification.enable"
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: verify, Value: kadm.StringPtr("false")}}); err != nil {
		t.Fatal(err)
	}
	defer adm.AlterBrokerConfigs(context.WithoutCancel(ctx), []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: verify}})
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &txnID
	init.TransactionTimeoutMillis = 20000
	ir, err := init.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(ir.ErrorCode)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The config change reaches the broker's request path a moment later.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := produceTransactional(ctx, cl, txnID, topic, ir.ProducerID, ir.ProducerEpoch, key, value)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce a transactional record that skips AddPartitionsToTxn: %v", err)
		}
	}
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, e := lso[topic][0].Offset, end[topic][0].Offset; o >= e {
		t.Fatalf("the transaction does not hang: last stable offset %d, end %d", o, e)
	}
}

// produceTransactional sends one record in a transactional batch with a
// Produce v11 request, built by hand so no client adds the partition to
// the transaction first.
func produceTransactional(ctx context.Context, cl *kgo.Client, txnID, topic string, pid int64, epoch int16, key, value []byte) error {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 11
	req.TransactionID = &txnID
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = transactionalBatch(pid, epoch, key, value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// transactionalBatch encodes a v2 record batch of one record with the
// transactional attribute.
func transactionalBatch(pid int64, epoch int16, key, value []byte) []byte {
	var rec []byte
	rec = append(rec, 0)              // attributes
	rec = binary.AppendVarint(rec, 0) // timestamp delta
	rec = binary.AppendVarint(rec, 0) // offset delta
	rec = binary.AppendVarint(rec, int64(len(key)))
	rec = append(rec, key...)
	rec = binary.AppendVarint(rec, int64(len(value)))
	rec = append(rec, value...)
	rec = binary.AppendVarint(rec, 0) // headers
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x10, // transactional
		FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, NumRecords: 1,
		Records: append(binary.AppendVarint(nil, int64(len(rec))), rec...),
	}
	raw := b.AppendTo(nil)
	// Length counts what follows it; the CRC-32C covers everything from
	// the attributes on.
	binary.BigEndian.PutUint32(raw[8:12], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}
