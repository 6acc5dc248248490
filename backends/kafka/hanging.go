package kafkadlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
)

// A transaction can hang on a partition: the partition holds a transaction
// open that its coordinator no longer holds open, so no marker will ever
// end it, and read_committed readers stop before it for good (Kafka's
// "hanging transaction"; kafka-transactions.sh find-hanging and abort are
// the manual cure). A broker killed at the wrong moment can leave one on
// the state topic, and then no resume could read which entries moved.
//
// The run that holds the DLQ lease settles such a transaction the way the
// transaction it belonged to ended. Every transactional state record names
// the origin record written in the same transaction (DestID), and the
// origin's partitions did get their markers: committed there, the state
// records are committed too; aborted there, they are aborted. Anything
// less clear (no origin record named, some committed and some not, an
// origin still open itself) is refused with what was found.

// hangCheckAfter is how long a lease holder waits on an open transaction
// on the state topic before it asks whether the transaction hangs, and
// then between two asks (a transaction is settled once seen hanging
// twice). Taking
// the lease fenced dlqctl's transactional ID, which ends its open
// transaction at once, so one still open seconds later is either another
// producer's or one no coordinator holds.
const hangCheckAfter = 5 * time.Second

// openTxn is a transaction open on a partition of the state topic, as the
// partition's leader describes it.
type openTxn struct {
	partition  int32
	producerID int64
	epoch      int16
	coordEpoch int32
	start      int64 // the offset of its first record
}

func (o openTxn) String() string {
	return fmt.Sprintf("partition %d from offset %d (producer ID %d, epoch %d)", o.partition, o.start, o.producerID, o.epoch)
}

// liveTxnStates are the coordinator's states of a transaction it still
// holds open.
var liveTxnStates = map[string]bool{"Ongoing": true, "PrepareCommit": true, "PrepareAbort": true, "PrepareEpochFence": true}

// hangingTxns lists the transactions open on the state topic that no
// coordinator holds open: for each open one, the coordinators are asked
// which transactional ID has its producer ID, and it is live only when
// that transaction is in a live state and holds the partition.
func (t *Topic) hangingTxns(ctx context.Context) ([]openTxn, error) {
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	topic := t.src.stateTopic
	ps, err := t.adm.DescribeProducers(rctx, kadm.TopicsSet{topic: nil})
	if err != nil {
		return nil, t.connErr(ctx, "describe the producers of "+topic, err)
	}
	var open []openTxn
	var ids []int64
	ps.EachProducer(func(p kadm.DescribedProducer) {
		if p.Topic == topic && p.CurrentTxnStartOffset >= 0 {
			open = append(open, openTxn{partition: p.Partition, producerID: p.ProducerID, epoch: p.ProducerEpoch, coordEpoch: p.CoordinatorEpoch, start: p.CurrentTxnStartOffset})
			ids = append(ids, p.ProducerID)
		}
	})
	if len(open) == 0 {
		return nil, nil
	}
	listed, err := t.adm.ListTransactions(rctx, ids, nil)
	if err != nil {
		return nil, t.connErr(ctx, "list the transactions of the producers on "+topic, err)
	}
	var described kadm.DescribedTransactions
	if len(listed) > 0 {
		// Asked with no ID, DescribeTransactions would describe them all.
		if described, err = t.adm.DescribeTransactions(rctx, listed.TransactionalIDs()...); err != nil {
			return nil, t.connErr(ctx, "describe the transactions of the producers on "+topic, err)
		}
	}
	for _, d := range described {
		if d.Err != nil {
			// A coordinator still loading, say: whether the transaction
			// is live is not known yet.
			return nil, t.connErr(ctx, "describe transaction "+d.TxnID, d.Err)
		}
	}
	var hanging []openTxn
	for _, o := range open {
		live := false
		for _, d := range described {
			if d.ProducerID == o.producerID && liveTxnStates[d.State] {
				if _, ok := d.Topics[topic][o.partition]; ok {
					live = true
				}
			}
		}
		if !live {
			hanging = append(hanging, o)
		}
	}
	return hanging, nil
}

// settleHanging ends each transaction on the state topic that hangs now
// and hung at the last check too (suspects, the same producer, epoch and
// first offset), the way the transaction it belonged to ended (see the
// top of this file), and says on stderr what it did. Seen once is not
// enough: a transaction that commits between the two questions hangingTxns
// asks (open on the partition, then complete at its coordinator) looks
// hanging for that moment; by the next check its markers are there. It
// returns how many it ended and the suspects for the next check.
func (t *Topic) settleHanging(ctx context.Context, suspects []openTxn) (int, []openTxn, error) {
	hanging, err := t.hangingTxns(ctx)
	if err != nil || len(hanging) == 0 {
		return 0, nil, err
	}
	var again []openTxn
	settled := 0
	for _, o := range hanging {
		if !slices.Contains(suspects, o) {
			again = append(again, o)
			continue
		}
		commit, why, err := t.hangingOutcome(ctx, o)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: the state topic %s holds a transaction no coordinator holds open, %s, and it cannot be settled: %w; end it with kafka-transactions.sh (find-hanging, then abort or commit as its origin records say) and resume", t, t.src.stateTopic, o, err)
		}
		if err := t.writeMarker(ctx, o, commit); err != nil {
			return 0, nil, err
		}
		settled++
		verb := "aborted"
		if commit {
			verb = "committed"
		}
		if t.stderr != nil {
			fmt.Fprintf(t.stderr, "dlqctl: %s: the state topic %s held a transaction no coordinator held open (a broker crash can leave one), %s: %s; it is %s now\n", t, t.src.stateTopic, o, why, verb)
		}
	}
	return settled, again, nil
}

// hangingOutcome decides how a hanging state transaction ended: by the
// origin records its state records name, read at read_committed once the
// origin's partitions are settled past them.
func (t *Topic) hangingOutcome(ctx context.Context, o openTxn) (commit bool, why string, err error) {
	named, err := t.hangingRecords(ctx, o)
	if err != nil {
		return false, "", err
	}
	if len(named) == 0 {
		return false, "", errors.New("none of its records names an origin record")
	}
	committed, aborted := 0, 0
	spansOf := map[string][]span{} // each origin topic's offsets, asked once
	for _, n := range named {
		ok, err := t.committedAt(ctx, spansOf, n.topic, n.partition, n.offset)
		if err != nil {
			return false, "", err
		}
		if ok {
			committed++
		} else {
			aborted++
		}
	}
	switch {
	case aborted == 0:
		return true, fmt.Sprintf("the %d origin records its state records name are committed", committed), nil
	case committed == 0:
		return false, fmt.Sprintf("the %d origin records its state records name were aborted", aborted), nil
	}
	return false, "", fmt.Errorf("of the origin records its state records name, %d are committed and %d aborted", committed, aborted)
}

// originRecord is where a state record says its entry went.
type originRecord struct {
	topic     string
	partition int32
	offset    int64
}

// hangingRecords reads the hanging transaction's state records (read
// uncommitted, by its producer ID) and returns the origin records they
// name. A record of it that names none makes the outcome unknowable.
func (t *Topic) hangingRecords(ctx context.Context, o openTxn) ([]originRecord, error) {
	spans, _, err := t.spans(ctx, t.src.stateTopic)
	if err != nil {
		return nil, err
	}
	end := int64(-1)
	for _, s := range spans {
		if s.partition == o.partition {
			end = s.hwm
		}
	}
	var named []originRecord
	ranges := map[int32][2]int64{o.partition: {o.start, end}}
	err = t.readRangeIso(ctx, t.src.stateTopic, ranges, kgo.ReadUncommitted(), func(r *kgo.Record) error {
		// Its producer's later transactions (a higher epoch) are not it.
		if r.ProducerID != o.producerID || r.ProducerEpoch != o.epoch || isMetaKey(string(r.Key)) {
			return nil
		}
		var sr stateRecord
		if r.Value == nil || json.Unmarshal(r.Value, &sr) != nil {
			return fmt.Errorf("its record %d:%d is not a dlqctl state record", r.Partition, r.Offset)
		}
		p, off, ok := ParseKafkaID(sr.DestID)
		if sr.Dest == "" || !ok {
			return fmt.Errorf("its record %d:%d (entry %s) names no origin record", r.Partition, r.Offset, r.Key)
		}
		named = append(named, originRecord{topic: sr.Dest, partition: p, offset: off})
		return nil
	})
	return named, err
}

// committedAt says whether the record at topic/partition/offset is
// committed: a read_committed fetch from its offset returns it first,
// where an aborted one is skipped. The partition must be settled past it.
// spansOf caches each topic's offsets across the calls of one outcome.
func (t *Topic) committedAt(ctx context.Context, spansOf map[string][]span, topic string, partition int32, offset int64) (bool, error) {
	spans, known := spansOf[topic]
	if !known {
		var err error
		if spans, _, err = t.spans(ctx, topic); err != nil {
			return false, err
		}
		spansOf[topic] = spans
	}
	var s *span
	for i := range spans {
		if spans[i].partition == partition {
			s = &spans[i]
		}
	}
	if s == nil || offset < s.start {
		return false, fmt.Errorf("origin record %s/%s is gone (deleted or past retention)", topic, KafkaID(partition, offset))
	}
	if offset >= s.end {
		return false, fmt.Errorf("origin record %s/%s is in a transaction still open there too", topic, KafkaID(partition, offset))
	}
	first := int64(-1)
	err := t.readRange(ctx, topic, map[int32][2]int64{partition: {offset, s.end}}, func(r *kgo.Record) error {
		first = r.Offset
		return backend.ErrStop
	})
	return first == offset, err
}

// writeMarker ends a hanging transaction on its state topic partition
// with the marker of its outcome, fenced by the producer's epoch and the
// coordinator epoch the partition last saw, as Kafka's own abort tool
// writes it.
func (t *Topic) writeMarker(ctx context.Context, o openTxn, commit bool) error {
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res, err := t.adm.WriteTxnMarkers(rctx, kadm.TxnMarkers{
		ProducerID: o.producerID, ProducerEpoch: o.epoch, Commit: commit, CoordinatorEpoch: o.coordEpoch,
		Topics: kadm.TopicsSet{t.src.stateTopic: {o.partition: {}}},
	})
	if err == nil {
		res.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
			if p.Err != nil && err == nil {
				err = p.Err
			}
		})
	}
	if err != nil {
		what := "abort"
		if commit {
			what = "commit"
		}
		return t.connErr(ctx, fmt.Sprintf("%s the hanging transaction on %s %s (writing its marker needs the ClusterAction permission)", what, t.src.stateTopic, o), err)
	}
	return nil
}

// describeOpenTxns says, for an error, which transactions are open on the
// state topic and whether a coordinator holds them: what an operator
// needs to end one by hand.
func (t *Topic) describeOpenTxns(ctx context.Context) string {
	hanging, err := t.hangingTxns(ctx)
	if err != nil || len(hanging) == 0 {
		return ""
	}
	parts := make([]string, len(hanging))
	for i, o := range hanging {
		parts[i] = o.String()
	}
	return "; no coordinator holds it open (a hanging transaction): " + strings.Join(parts, ", ") + "; a resume of the run settles it, or kafka-transactions.sh abort ends it by hand"
}

// holdsLease says whether this Topic took the DLQ lease and still holds
// it by what it last knew: only the holder may end a transaction it did
// not start.
func (t *Topic) holdsLease() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held >= 0
}
