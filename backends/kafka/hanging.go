package kafkadlq

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
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
		commit, why, alsoOpen, err := t.hangingOutcome(ctx, o)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: the state topic %s holds a transaction no coordinator holds open, %s, and it cannot be settled: %w; end it with kafka-transactions.sh (find-hanging, then abort or commit as its origin records say) and resume", t, t.src.stateTopic, o, err)
		}
		// The origin partitions where it hangs too first: should this
		// stop half way, the next settling finds their markers.
		for _, h := range alsoOpen {
			if err := t.writeMarker(ctx, h.topic, h.openTxn, commit); err != nil {
				return 0, nil, err
			}
		}
		if err := t.writeMarker(ctx, t.src.stateTopic, o, commit); err != nil {
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

// hangingOutcome decides how a hanging state transaction ended. It must
// be dlqctl's own (ownTxn). Its state records name the origin records
// written in the same transaction, and on each origin partition the
// transaction's own marker says how it ended: the first control record
// of its producer after those records. A named record that the log
// cleaner removed since (a compacted origin keeps only the newest record
// of a key, and drops aborted ones) is decided by that marker too, never
// by its absence; where no such marker is left, the outcome is unknown and
// nothing is settled.
//
// A transaction can hang on its origin partitions as well (a coordinator
// that lost them in a broker restart): no marker there, its records all
// there, still open. Where it hangs on every origin partition, none of
// its records was ever read committed, and it is aborted everywhere;
// where some partitions have a marker, the others get the same. alsoOpen
// lists the origin partitions to end with the state topic's.
func (t *Topic) hangingOutcome(ctx context.Context, o openTxn) (commit bool, why string, alsoOpen []topicTxn, err error) {
	if err := t.ownTxn(ctx, o); err != nil {
		return false, "", nil, err
	}
	named, err := t.hangingRecords(ctx, o)
	if err != nil {
		return false, "", nil, err
	}
	if len(named) == 0 {
		return false, "", nil, errors.New("none of its records names an origin record")
	}
	type topicPart struct {
		topic     string
		partition int32
	}
	byPart := map[topicPart][]originRecord{}
	var parts []topicPart
	for _, n := range named {
		tp := topicPart{n.topic, n.partition}
		if _, ok := byPart[tp]; !ok {
			parts = append(parts, tp)
		}
		byPart[tp] = append(byPart[tp], n)
	}
	committed, aborted, removed := 0, 0, 0
	for _, tp := range parts {
		v, err := t.originOutcome(ctx, o, tp.topic, tp.partition, byPart[tp])
		if err != nil {
			return false, "", nil, err
		}
		switch {
		case v.open != nil:
			alsoOpen = append(alsoOpen, topicTxn{tp.topic, *v.open})
		case v.commit:
			committed += len(byPart[tp])
		default:
			aborted += len(byPart[tp])
		}
		removed += v.removed
	}
	if committed > 0 && aborted > 0 {
		return false, "", nil, fmt.Errorf("of the origin records its state records name, the markers say %d committed and %d aborted", committed, aborted)
	}
	commit = committed > 0
	outcome := fmt.Sprintf("the markers of the %d origin records its state records name say aborted", aborted)
	if commit {
		outcome = fmt.Sprintf("the markers of the %d origin records its state records name say committed", committed)
	}
	if committed+aborted == 0 {
		outcome = "it hangs on every origin partition it wrote too, with no marker anywhere, so none of its records was ever read committed"
	}
	if removed > 0 {
		outcome += fmt.Sprintf(" (%d of them removed by the log cleaner since)", removed)
	}
	if len(alsoOpen) > 0 && committed+aborted > 0 {
		outcome += fmt.Sprintf("; it hangs on %d origin partitions too, which are ended alike", len(alsoOpen))
	}
	return commit, outcome, alsoOpen, nil
}

// topicTxn is a transaction open on a partition of topic.
type topicTxn struct {
	topic string
	openTxn
}

// ownTxn refuses a hanging transaction that is not dlqctl's: its producer
// ID must be the one the broker gave the DLT's transactional ID, which
// this lease holder's producer holds now, at an epoch no later than this
// holder's (taking the lease fenced the transactional ID, so a crashed
// run's epoch is lower). Another producer's transaction on the state
// topic is never ended by dlqctl, whatever its records say.
func (t *Topic) ownTxn(ctx context.Context, o openTxn) error {
	cl, err := t.txnClient(ctx)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	pid, epoch, err := cl.ProducerID(rctx)
	if err != nil {
		return t.connErr(ctx, "the producer ID of "+TransactionalID(t.src.topic), err)
	}
	if o.producerID != pid || o.epoch > epoch {
		return fmt.Errorf("it is not dlqctl's: the transactional ID %s has producer ID %d, at epoch %d now", TransactionalID(t.src.topic), pid, epoch)
	}
	return nil
}

// originRecord is where a state record of a hanging transaction says its
// entry went, and the run markers the record there must carry.
type originRecord struct {
	topic     string
	partition int32
	offset    int64
	runID     string
	seq       int64
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
		if sr.Dest == "" || !ok || sr.RunID == "" {
			return fmt.Errorf("its record %d:%d (entry %s) names no origin record and run", r.Partition, r.Offset, r.Key)
		}
		named = append(named, originRecord{topic: sr.Dest, partition: p, offset: off, runID: sr.RunID, seq: sr.Seq})
		return nil
	})
	return named, err
}

// originVerdict is how the hanging transaction ended on one origin
// partition: committed or not by its marker there, or still open there
// (open), and how many of its records the cleaner removed since.
type originVerdict struct {
	commit  bool
	open    *openTxn
	removed int
}

// originOutcome says how the hanging transaction o ended on one origin
// partition, where recs (its records there) went: the partition is read
// uncommitted, markers included, from the first of them to the first
// marker of o's producer — o's own, since a producer's next transaction on
// a partition starts only after its marker there. Each named record still
// there must be o's (its producer and epoch) and carry its run's markers
// (dlqctl_run_id, dlqctl_seq). A record of o's producer at a later epoch
// before any marker means o's marker is gone: the outcome is unknown. With
// no marker at all, o is open there too when every named record is there
// and the partition's producers say so.
func (t *Topic) originOutcome(ctx context.Context, o openTxn, topic string, partition int32, recs []originRecord) (originVerdict, error) {
	spans, _, err := t.spans(ctx, topic)
	if err != nil {
		return originVerdict{}, err
	}
	var s *span
	for i := range spans {
		if spans[i].partition == partition {
			s = &spans[i]
		}
	}
	want := make(map[int64]originRecord, len(recs))
	first, last := recs[0].offset, recs[0].offset
	for _, n := range recs {
		want[n.offset] = n
		first, last = min(first, n.offset), max(last, n.offset)
	}
	where := fmt.Sprintf("%s partition %d", topic, partition)
	if s == nil || last >= s.hwm {
		return originVerdict{}, fmt.Errorf("origin record %s/%s is not there (past the partition's end)", topic, KafkaID(partition, last))
	}
	seen, decided, commit := 0, false, false
	marker := int64(-1)
	err = t.readRecords(ctx, topic, map[int32][2]int64{partition: {max(first, s.start), s.hwm}}, kgo.ReadUncommitted(), true, func(r *kgo.Record) error {
		if n, ok := want[r.Offset]; ok && !r.Attrs.IsControl() {
			if err := n.check(r, o); err != nil {
				return err
			}
			seen++
		}
		if r.ProducerID != o.producerID {
			return nil
		}
		if !r.Attrs.IsControl() {
			if r.ProducerEpoch != o.epoch {
				return fmt.Errorf("on %s, a later transaction of producer %d (epoch %d) comes before any marker of this one: its marker is gone, and its outcome unknown", where, o.producerID, r.ProducerEpoch)
			}
			return nil
		}
		// A transaction's markers carry its epoch, or the next one where
		// the coordinator bumps the epoch as it ends the transaction
		// (transaction version 2, Kafka 4.0 and later).
		if r.ProducerEpoch != o.epoch && r.ProducerEpoch != o.epoch+1 {
			return fmt.Errorf("on %s, the first marker of producer %d after the transaction's records is of epoch %d, not this transaction's (%d): its own marker is gone, and its outcome unknown", where, o.producerID, r.ProducerEpoch, o.epoch)
		}
		c, ok := controlCommit(r.Key)
		if !ok {
			return fmt.Errorf("on %s, the control record at offset %d is no transaction marker", where, r.Offset)
		}
		commit, decided, marker = c, true, r.Offset
		return backend.ErrStop
	})
	switch {
	case err != nil:
		return originVerdict{}, err
	case decided && last > marker:
		return originVerdict{}, fmt.Errorf("origin record %s/%s comes after the transaction's marker there: it is not the transaction's", topic, KafkaID(partition, last))
	case decided:
		return originVerdict{commit: commit, removed: len(recs) - seen}, nil
	}
	if seen == len(recs) {
		open, err := t.openOn(ctx, topic, partition, o)
		if err != nil {
			return originVerdict{}, err
		}
		if open != nil && open.start <= first {
			return originVerdict{open: open}, nil
		}
	}
	return originVerdict{}, fmt.Errorf("on %s, no marker of producer %d follows offset %d (the log cleaner removed it, or it is not written yet): the outcome is unknown", where, o.producerID, first)
}

// openOn is o's transaction as open on partition of topic by the
// partition's producers (its producer, at its epoch), nil when it is not.
func (t *Topic) openOn(ctx context.Context, topic string, partition int32, o openTxn) (*openTxn, error) {
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	ps, err := t.adm.DescribeProducers(rctx, kadm.TopicsSet{topic: {partition: {}}})
	if err != nil {
		return nil, t.connErr(ctx, "describe the producers of "+topic, err)
	}
	var open *openTxn
	ps.EachProducer(func(p kadm.DescribedProducer) {
		if p.Topic == topic && p.Partition == partition && p.ProducerID == o.producerID && p.ProducerEpoch == o.epoch && p.CurrentTxnStartOffset >= 0 {
			open = &openTxn{partition: partition, producerID: p.ProducerID, epoch: p.ProducerEpoch, coordEpoch: p.CoordinatorEpoch, start: p.CurrentTxnStartOffset}
		}
	})
	return open, nil
}

// check says whether r, found where n says its entry went, is the record
// the hanging transaction o wrote there for n's run.
func (n originRecord) check(r *kgo.Record, o openTxn) error {
	at := n.topic + "/" + KafkaID(n.partition, n.offset)
	if r.ProducerID != o.producerID || r.ProducerEpoch != o.epoch || !r.Attrs.IsTransactional() {
		return fmt.Errorf("origin record %s is not this transaction's (producer %d, epoch %d)", at, r.ProducerID, r.ProducerEpoch)
	}
	run, _ := recordHeader(r, backend.MarkerRunID)
	seq, _ := recordHeader(r, backend.MarkerSeq)
	if run != n.runID || seq != strconv.FormatInt(n.seq, 10) {
		return fmt.Errorf("origin record %s does not carry the markers of run %s, seq %d (%s=%q, %s=%q)", at, n.runID, n.seq, backend.MarkerRunID, run, backend.MarkerSeq, seq)
	}
	return nil
}

// recordHeader is the value of r's last header named k.
func recordHeader(r *kgo.Record, k string) (string, bool) {
	v, ok := "", false
	for _, h := range r.Headers {
		if h.Key == k {
			v, ok = string(h.Value), true
		}
	}
	return v, ok
}

// controlCommit reads a control record's key (version, then type, both
// int16): type 1 is a commit marker, 0 an abort marker.
func controlCommit(key []byte) (commit, ok bool) {
	if len(key) < 4 {
		return false, false
	}
	switch binary.BigEndian.Uint16(key[2:4]) {
	case 0:
		return false, true
	case 1:
		return true, true
	}
	return false, false
}

// writeMarker ends the hanging transaction o on its partition of topic
// with the marker of its outcome, fenced by the producer's epoch and the
// coordinator epoch the partition last saw, as Kafka's own abort tool
// writes it.
func (t *Topic) writeMarker(ctx context.Context, topic string, o openTxn, commit bool) error {
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res, err := t.adm.WriteTxnMarkers(rctx, kadm.TxnMarkers{
		ProducerID: o.producerID, ProducerEpoch: o.epoch, Commit: commit, CoordinatorEpoch: o.coordEpoch,
		Topics: kadm.TopicsSet{topic: {o.partition: {}}},
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
		return t.connErr(ctx, fmt.Sprintf("%s the hanging transaction on %s %s (writing its marker needs the ClusterAction permission)", what, topic, o), err)
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
