package rawkafka

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TxnResult is what TxnLoop did.
type TxnResult struct {
	Records      int // redriven
	Transactions int
	Read         time.Duration // of the wall time, waiting for the DLT's records
}

// stateValue is a state record as a redrive tool would write one per
// entry: what happened, in which run, where it went.
type stateValue struct {
	Status      string    `json:"status"`
	RunID       string    `json:"run_id"`
	Seq         int64     `json:"seq"`
	EventID     string    `json:"event_id"`
	Fingerprint string    `json:"fingerprint"`
	Dest        string    `json:"dest"`
	At          time.Time `json:"at"`
}

// TxnLoop is the least a Go program redriving a Spring Kafka dead-letter
// topic exactly once does with plain franz-go: read every partition of
// dlt from its log start to its end offset (read_committed, partitions
// assigned directly), and for each chunk of records, in one transaction,
// produce each record to its original topic and partition (from the
// kafka_dlt-* headers) with the same key and value and the original
// headers less the kafka_dlt-* ones plus a run marker, produce one JSON
// state record per entry to stateTopic (keyed partition:offset), and
// commit. Origin and state records go out in one batch: nothing waits for
// the origin offsets. stateTopic must exist.
func TxnLoop(ctx context.Context, bootstrap, dlt, stateTopic string, chunk int) (TxnResult, error) {
	var res TxnResult
	want, parts, err := endOffsets(ctx, bootstrap, dlt)
	if err != nil || len(want) == 0 {
		return res, err
	}
	reader, err := kgo.NewClient(kgo.SeedBrokers(bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{dlt: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return res, err
	}
	defer reader.Close()
	runID := "raw-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	prod, err := kgo.NewClient(kgo.SeedBrokers(bootstrap),
		kgo.TransactionalID(runID),
		kgo.TransactionTimeout(20*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0))
	if err != nil {
		return res, err
	}
	defer prod.Close()

	tw := &txnWriter{prod: prod, runID: runID, stateTopic: stateTopic, res: &res, pending: make([]*kgo.Record, 0, chunk)}
	for len(want) > 0 {
		t0 := time.Now()
		fs := reader.PollFetches(ctx)
		res.Read += time.Since(t0)
		if err := ctx.Err(); err != nil {
			return res, err
		}
		var bad error
		fs.EachError(func(_ string, p int32, err error) {
			bad = errors.Join(bad, fmt.Errorf("partition %d: %w", p, err))
		})
		if bad != nil {
			return res, bad
		}
		var ferr error
		fs.EachRecord(func(r *kgo.Record) {
			if ferr != nil {
				return
			}
			tw.pending = append(tw.pending, r)
			if len(tw.pending) == chunk {
				ferr = tw.flush(ctx)
			}
			if r.Offset >= want[r.Partition]-1 {
				delete(want, r.Partition)
			}
		})
		if ferr != nil {
			return res, ferr
		}
	}
	return res, tw.flush(ctx)
}

// txnWriter redrives the records read so far, a chunk per transaction.
type txnWriter struct {
	prod              *kgo.Client
	runID, stateTopic string
	seq               int64
	res               *TxnResult
	pending           []*kgo.Record
}

// flush redrives the pending records in one transaction: each to its
// origin, and one state record per entry.
func (tw *txnWriter) flush(ctx context.Context) error {
	if len(tw.pending) == 0 {
		return nil
	}
	if err := tw.prod.BeginTransaction(); err != nil {
		return err
	}
	out := make([]*kgo.Record, 0, 2*len(tw.pending))
	states := make([]*kgo.Record, 0, len(tw.pending))
	for _, r := range tw.pending {
		tw.seq++
		o, hs := redriveHeaders(r.Headers, tw.runID, tw.seq)
		out = append(out, &kgo.Record{Topic: o.topic, Partition: o.partition, Key: r.Key, Value: r.Value, Headers: hs})
		v, _ := json.Marshal(stateValue{Status: "redriven", RunID: tw.runID, Seq: tw.seq, EventID: header(r.Headers, "event_id"),
			Fingerprint: header(r.Headers, "fingerprint"), Dest: o.topic, At: time.Now().UTC()})
		id := strconv.FormatInt(int64(r.Partition), 10) + ":" + strconv.FormatInt(r.Offset, 10)
		states = append(states, &kgo.Record{Topic: tw.stateTopic, Key: []byte(id), Value: v})
	}
	if err := tw.prod.ProduceSync(ctx, append(out, states...)...).FirstErr(); err != nil {
		_ = tw.prod.EndTransaction(ctx, kgo.TryAbort)
		return err
	}
	if err := tw.prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return err
	}
	tw.res.Records += len(tw.pending)
	tw.res.Transactions++
	tw.pending = tw.pending[:0]
	return nil
}

// redriveHeaders reads the original topic and partition from Spring's
// headers and returns the headers to send: the others, then the markers.
func redriveHeaders(in []kgo.RecordHeader, runID string, seq int64) (origin, []kgo.RecordHeader) {
	var o origin
	hs := make([]kgo.RecordHeader, 0, len(in))
	for _, h := range in {
		switch h.Key {
		case "kafka_dlt-original-topic":
			o.topic = string(h.Value)
		case "kafka_dlt-original-partition":
			if len(h.Value) == 4 {
				o.partition = int32(binary.BigEndian.Uint32(h.Value))
			}
		}
		if strings.HasPrefix(h.Key, "kafka_dlt-") {
			continue
		}
		hs = append(hs, h)
	}
	hs = append(hs,
		kgo.RecordHeader{Key: "dlqctl_run_id", Value: []byte(runID)},
		kgo.RecordHeader{Key: "dlqctl_seq", Value: []byte(strconv.FormatInt(seq, 10))})
	return o, hs
}

func header(hs []kgo.RecordHeader, name string) string {
	for _, h := range hs {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}
