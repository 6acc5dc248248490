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
// holder ends it as the transaction it belonged to ended, which the
// transaction's marker on the origin says: committed or aborted. On a
// compacted origin the committed record may be gone, superseded by a newer
// one of its key: the marker still says committed, so the move is not
// redone (which would deliver it twice and put the old value of the key
// after the newer one).
func TestHangingStateTransactionIsSettled(t *testing.T) {
	for _, c := range []struct {
		name              string
		commit, compacted bool
	}{
		{"origin committed", true, false},
		{"origin aborted", false, false},
		{"compacted origin with the record superseded", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxFor(t)
			origin, dlt, src, entries := seedRedrive(t, ctx)
			if _, err := src.Remove(ctx, nil); err != nil { // makes the state topic
				t.Fatal(err)
			}
			dest := origin
			if c.compacted {
				dest = origin + "-compacted"
				createTopic(t, ctx, dest, 1, compactedConfig())
			}
			off := crashedChunk(t, ctx, kafkadlq.TransactionalID(dlt), dlt+".dlqctl-state", dest, entries[0].ID, c.commit)
			if c.compacted {
				supersede(t, ctx, dest, off)
			}

			n, stderr, err := holderLen(t, ctx, dlt, time.Minute)
			if err != nil {
				t.Fatalf("Len with a hanging transaction on the state topic: %v", err)
			}
			want, verb := int64(len(entries)), "aborted"
			if c.commit {
				want, verb = want-1, "committed"
			}
			if n != want {
				t.Errorf("Len = %d, want %d (the state record %s)", n, want, verb)
			}
			if !strings.Contains(stderr, "no coordinator held open") || !strings.Contains(stderr, "it is "+verb+" now") {
				t.Errorf("stderr does not say the hanging transaction was %s:\n%s", verb, stderr)
			}
			if c.compacted && !strings.Contains(stderr, "removed by the log cleaner") {
				t.Errorf("stderr does not say the origin record was compacted away:\n%s", stderr)
			}
		})
	}
}

// TestHangingEverywhereIsAborted: a transaction that hangs on the origin
// partition it wrote as well as on the state topic (a coordinator that
// lost both partitions in a broker restart: no marker anywhere) was never
// read committed anywhere: the lease holder aborts it on both, and the
// origin's consumers are no longer held at its first record.
func TestHangingEverywhereIsAborted(t *testing.T) {
	ctx := ctxFor(t)
	origin, dlt, src, entries := seedRedrive(t, ctx)
	if _, err := src.Remove(ctx, nil); err != nil {
		t.Fatal(err)
	}
	txnID := kafkadlq.TransactionalID(dlt)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &txnID
	init.TransactionTimeoutMillis = 20000
	ir, err := init.RequestWith(ctx, rawClient(t))
	if err == nil {
		err = kerr.ErrorForCode(ir.ErrorCode)
	}
	if err != nil {
		t.Fatal(err)
	}
	off := produceHanging(t, ctx, txnID, ir.ProducerID, ir.ProducerEpoch, &kgo.Record{Topic: origin, Key: []byte("k"), Value: []byte("redriven"),
		Headers: []kgo.RecordHeader{{Key: backend.MarkerRunID, Value: []byte("crashed")}, {Key: backend.MarkerSeq, Value: []byte("1")}}})
	value := fmt.Sprintf(`{"status":"redriven","run_id":"crashed","seq":1,"dest":%q,"dest_id":"0:%d","at":"2026-01-01T00:00:00Z"}`, origin, off)
	state := dlt + ".dlqctl-state"
	produceHanging(t, ctx, txnID, ir.ProducerID, ir.ProducerEpoch, &kgo.Record{Topic: state, Key: []byte(entries[0].ID), Value: []byte(value)})
	if !openOn(t, ctx, origin) || !openOn(t, ctx, state) {
		t.Fatal("the transaction does not hang on both partitions")
	}
	n, stderr, err := holderLen(t, ctx, dlt, time.Minute)
	if err != nil {
		t.Fatalf("Len with a transaction hanging everywhere: %v\n%s", err, stderr)
	}
	if n != int64(len(entries)) || !strings.Contains(stderr, "hangs on every origin partition") || !strings.Contains(stderr, "it is aborted now") {
		t.Fatalf("Len = %d (want %d: the entry stays), stderr:\n%s", n, len(entries), stderr)
	}
	if openOn(t, ctx, origin) {
		t.Fatal("the origin partition still holds the transaction open")
	}
}

// TestHangingTransactionOfAnotherProducer: a hanging transaction on the
// state topic that another producer left is never ended by dlqctl, even
// when its records look like dlqctl's and name a committed origin record
// with a run's markers; the wait's error says why.
func TestHangingTransactionOfAnotherProducer(t *testing.T) {
	ctx := ctxFor(t)
	origin, dlt, src, entries := seedRedrive(t, ctx)
	if _, err := src.Remove(ctx, nil); err != nil {
		t.Fatal(err)
	}
	state := dlt + ".dlqctl-state"
	crashedChunk(t, ctx, "intruder-"+dlt, state, origin, entries[0].ID, true)
	_, stderr, err := holderLen(t, ctx, dlt, settleWait)
	if err == nil || !strings.Contains(err.Error(), "not dlqctl's") {
		t.Fatalf("Len with another producer's hanging transaction: %v, want an error saying it is not dlqctl's", err)
	}
	if strings.Contains(stderr, " now\n") {
		t.Fatalf("dlqctl ended another producer's transaction:\n%s", stderr)
	}
	if !openOn(t, ctx, state) {
		t.Fatal("the other producer's transaction is no longer open")
	}
}

// TestHangingTransactionUnknownOutcome: when the origin record a hanging
// state transaction names and that transaction's marker are both gone
// (retention, or the log cleaner that removes a marker once its
// transaction's records are gone), nothing says how it ended: dlqctl
// settles nothing, and the wait's error says the outcome is unknown.
func TestHangingTransactionUnknownOutcome(t *testing.T) {
	ctx := ctxFor(t)
	origin, dlt, src, entries := seedRedrive(t, ctx)
	if _, err := src.Remove(ctx, nil); err != nil {
		t.Fatal(err)
	}
	state := dlt + ".dlqctl-state"
	off := crashedChunk(t, ctx, kafkadlq.TransactionalID(dlt), state, origin, entries[0].ID, true)
	// The record at off, its marker at off+1, a later record; the first
	// two are deleted.
	produceManual(t, ctx, &kgo.Record{Topic: origin, Partition: 0, Key: []byte("k"), Value: []byte("later")})
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: origin, Partition: 0, At: off + 2})
	if _, err := kadm.NewClient(rawClient(t)).DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := holderLen(t, ctx, dlt, settleWait)
	if err == nil || !strings.Contains(err.Error(), "outcome is unknown") {
		t.Fatalf("Len with a hanging transaction whose origin record and marker are gone: %v, want an error saying the outcome is unknown", err)
	}
	if strings.Contains(stderr, " now\n") || !openOn(t, ctx, state) {
		t.Fatalf("dlqctl settled a transaction of unknown outcome:\n%s", stderr)
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
	crashedChunk(t, ctx, kafkadlq.TransactionalID(dlt), dlt+".dlqctl-state", origin, entries[0].ID, true)
	reader := openTopic(t, ctx, dlt, kafkadlq.Options{TransactionTimeout: time.Second})
	_, err := reader.Len(ctx)
	if err == nil || !strings.Contains(err.Error(), "hanging transaction") || !strings.Contains(err.Error(), "a resume of the run settles it") {
		t.Fatalf("Len by a reader with a hanging transaction: err = %v, want one naming the hanging transaction", err)
	}
}

// settleWait is long enough for two hang checks, five seconds apart, and
// the settling they lead to.
const settleWait = 16 * time.Second

// holderLen is Len, within wait, of dlt opened by the run that takes its
// lease (a resume), and what it said on stderr.
func holderLen(t *testing.T, ctx context.Context, dlt string, wait time.Duration) (int64, string, error) {
	t.Helper()
	var stderr bytes.Buffer
	holder := openTopic(t, ctx, dlt, kafkadlq.Options{TransactionTimeout: 2 * time.Second, Stderr: &stderr})
	l, err := holder.Lease(ctx, backend.LeaseHolder{RunID: "resume", PID: 1, Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	n, err := holder.Len(wctx)
	return n, stderr.String(), err
}

// compactedConfig makes a compacted topic that the log cleaner cleans
// within seconds: segments roll after 100 ms, any dirty share is enough.
func compactedConfig() map[string]*string {
	return map[string]*string{
		"cleanup.policy":            kadm.StringPtr("compact"),
		"segment.ms":                kadm.StringPtr("100"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
		"min.compaction.lag.ms":     kadm.StringPtr("0"),
	}
}

// crashedChunk leaves what a redrive chunk cut off by a broker crash can
// leave: a transaction of txnID that wrote a record with the run's markers
// (run "crashed", seq 1) to partition 0 of origin and a state record for
// entry to stateTopic, of which its coordinator knew only the origin
// partition. The transaction ends (committed or aborted) on the origin,
// and hangs on the state topic. It returns the origin record's offset.
func crashedChunk(t *testing.T, ctx context.Context, txnID, stateTopic, origin, entry string, commit bool) int64 {
	t.Helper()
	cl := rawClient(t, kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: origin, Partition: 0, Key: []byte("k"), Value: []byte("redriven"), Headers: []kgo.RecordHeader{
		{Key: backend.MarkerRunID, Value: []byte("crashed")}, {Key: backend.MarkerSeq, Value: []byte("1")},
	}}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	value := fmt.Sprintf(`{"status":"redriven","run_id":"crashed","seq":1,"dest":%q,"dest_id":"0:%d","at":"2026-01-01T00:00:00Z"}`, origin, rec.Offset)
	produceHanging(t, ctx, txnID, pid, epoch, &kgo.Record{Topic: stateTopic, Key: []byte(entry), Value: []byte(value)})
	how := kgo.TryAbort
	if commit {
		how = kgo.TryCommit
	}
	if err := cl.EndTransaction(ctx, how); err != nil {
		t.Fatal(err)
	}
	if !openOn(t, ctx, stateTopic) {
		t.Fatal("the transaction does not hang on the state topic")
	}
	return rec.Offset
}

// supersede writes a newer record of the key of crashedChunk's record on
// partition 0 of the compacted topic, and waits until the log cleaner has
// removed the records up to offset off.
func supersede(t *testing.T, ctx context.Context, topic string, off int64) {
	t.Helper()
	produceManual(t, ctx, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("k"), Value: []byte("newer")})
	for deadline := time.Now().Add(90 * time.Second); ; {
		// A record past segment.ms rolls the segment: only segments no
		// longer written are cleaned.
		time.Sleep(150 * time.Millisecond)
		produceManual(t, ctx, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("roll"), Value: []byte("x")})
		if firstFrom(t, ctx, topic, off) > off {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log cleaner did not remove %s 0:%d", topic, off)
		}
		time.Sleep(time.Second)
	}
}

// firstFrom is the offset of the first record, markers included, that a
// read_uncommitted fetch of partition 0 of topic from offset off returns.
func firstFrom(t *testing.T, ctx context.Context, topic string, off int64) int64 {
	t.Helper()
	cl := rawClient(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(off)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords())
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fs := cl.PollFetches(pctx)
	if fs.NumRecords() == 0 {
		t.Fatalf("nothing in %s from offset %d: %v", topic, off, fs.Errors())
	}
	return fs.Records()[0].Offset
}

// openOn says whether a transaction is open on partition 0 of topic: its
// last stable offset is short of its end.
func openOn(t *testing.T, ctx context.Context, topic string) bool {
	t.Helper()
	adm := kadm.NewClient(rawClient(t))
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return lso[topic][0].Offset < end[topic][0].Offset
}

// produceHanging writes rec as one record of producer pid at epoch, in a
// transaction of txnID, to partition 0 of rec.Topic without telling the
// transaction's coordinator, and returns its offset: a produce of the old
// protocol that skips AddPartitionsToTxn, accepted while the broker's
// partition verification is off for a moment (the way KIP-664 reproduces
// a hanging transaction).
func produceHanging(t *testing.T, ctx context.Context, txnID string, pid int64, epoch int16, rec *kgo.Record) int64 {
	t.Helper()
	cl := rawClient(t, kgo.MaxVersions(kversion.V3_6_0()))
	adm := kadm.NewClient(cl)
	const verify = "transaction.partition.verification.enable"
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: verify, Value: kadm.StringPtr("false")}}); err != nil {
		t.Fatal(err)
	}
	defer adm.AlterBrokerConfigs(context.WithoutCancel(ctx), []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: verify}})
	// The config change reaches the broker's request path a moment later.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		off, err := produceTransactional(ctx, cl, txnID, pid, epoch, rec)
		if err == nil {
			return off
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce a transactional record that skips AddPartitionsToTxn: %v", err)
		}
	}
}

// produceTransactional sends rec in a transactional batch with a Produce
// v11 request, built by hand so no client adds the partition to the
// transaction first, and returns its offset.
func produceTransactional(ctx context.Context, cl *kgo.Client, txnID string, pid int64, epoch int16, rec *kgo.Record) (int64, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 11
	req.TransactionID = &txnID
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = rec.Topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = transactionalBatch(pid, epoch, rec)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	part := resp.Topics[0].Partitions[0]
	return part.BaseOffset, kerr.ErrorForCode(part.ErrorCode)
}

// transactionalBatch encodes a v2 record batch of one record, rec's key,
// value and headers, with the transactional attribute.
func transactionalBatch(pid int64, epoch int16, rec *kgo.Record) []byte {
	var r []byte
	r = append(r, 0)              // attributes
	r = binary.AppendVarint(r, 0) // timestamp delta
	r = binary.AppendVarint(r, 0) // offset delta
	r = binary.AppendVarint(r, int64(len(rec.Key)))
	r = append(r, rec.Key...)
	r = binary.AppendVarint(r, int64(len(rec.Value)))
	r = append(r, rec.Value...)
	r = binary.AppendVarint(r, int64(len(rec.Headers)))
	for _, h := range rec.Headers {
		r = binary.AppendVarint(r, int64(len(h.Key)))
		r = append(r, h.Key...)
		r = binary.AppendVarint(r, int64(len(h.Value)))
		r = append(r, h.Value...)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x10, // transactional
		FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, NumRecords: 1,
		Records: append(binary.AppendVarint(nil, int64(len(r))), r...),
	}
	raw := b.AppendTo(nil)
	// Length counts what follows it; the CRC-32C covers everything from
	// the attributes on.
	binary.BigEndian.PutUint32(raw[8:12], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}
