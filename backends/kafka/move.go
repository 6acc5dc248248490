package kafkadlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// Atomic is true: the records put back on the origin and the state
// records that take the entries out of the DLQ commit in one transaction.
func (t *Topic) Atomic() bool { return true }

// DefaultDest is the original topic named by the dead-lettering headers.
func (t *Topic) DefaultDest(origin string) string { return origin }

// TransactionalID is the transactional ID of every redrive of the DLT:
// one per DLT, so the run that takes the DLQ lease fences the producer of
// the run before it — crashed, or paused past its lease — and the broker
// aborts that producer's open transaction and refuses its commits.
func TransactionalID(dlt string) string { return "dlqctl-" + dlt }

// fenceProducer starts this Topic's transactional producer anew, fencing
// any other with the DLT's transactional ID.
func (t *Topic) fenceProducer(ctx context.Context) error {
	t.mu.Lock()
	if t.txn != nil {
		go t.txn.Close()
		t.txn = nil
	}
	t.mu.Unlock()
	_, err := t.txnClient(ctx)
	return err
}

// txnClient returns the transactional producer of the DLT, creating it and
// loading its producer ID, which fences any earlier producer with the same
// transactional ID and aborts its open transaction.
func (t *Topic) txnClient(ctx context.Context) (*kgo.Client, error) {
	id := TransactionalID(t.src.topic)
	t.mu.Lock()
	if t.txn != nil {
		cl := t.txn
		t.mu.Unlock()
		return cl, nil
	}
	t.mu.Unlock()
	o, err := t.baseOpts()
	if err != nil {
		return nil, err
	}
	o = append(o,
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(t.txnTTL),
		// dlqctl picks every partition itself (see destPartition).
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	)
	cl, err := kgo.NewClient(o...)
	if err != nil {
		return nil, backend.Configf("%s: %v", t, err)
	}
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	defer t.slow(fmt.Sprintf("waiting for the broker to start the transactional producer %s (after a broker restart its transaction coordinator loads first; a transaction left open by a crashed run is aborted now)", id))()
	if _, _, err := cl.ProducerID(rctx); err != nil {
		cl.Close()
		return nil, t.connErr(ctx, "initialize the transactional producer "+id, err)
	}
	t.mu.Lock()
	t.txn, t.txnID = cl, id
	t.mu.Unlock()
	return cl, nil
}

// dropTxn forgets a transactional producer after a failure: the next
// Publish starts a new one with the same ID, which fences this one.
func (t *Topic) dropTxn(cl *kgo.Client) {
	t.mu.Lock()
	if t.txn == cl {
		t.txn = nil
	}
	t.mu.Unlock()
	// Close waits for records still in flight, which with the broker gone
	// may be forever: let it finish on its own.
	go cl.Close()
}

// Publish redrives the chunk in one transaction: each entry's record goes
// to item.Dest with the same key and value, on the original partition
// where the headers name one and Dest is the original topic (else the
// partition Kafka's default partitioner picks for the key), with the
// original headers less those dead-lettering added (kafka_dlt-*,
// __connect.errors.*, source_*), redrive_count one higher and dlqctl's
// markers; then a state record for each; then commit. Each result has
// Removed set: the commit took the entry out of the DLQ.
//
// An entry no longer there (redriven, resolved, expired by retention) is
// ErrNotFound and one whose fingerprint differs is ErrChanged; neither is
// sent. An error from Publish itself means the transaction did not
// commit, or its commit's outcome is unknown; Get then tells which, once
// the broker has settled it.
func (t *Topic) Publish(ctx context.Context, items []backend.MoveItem, m backend.Markers) ([]backend.MoveResult, error) {
	if m.RunID == "" {
		return nil, errors.New("kafka: a redrive needs a run ID (it names the transactional producer)")
	}
	if err := t.ensureStateTopic(ctx); err != nil {
		return nil, err
	}
	if err := t.leaseHeld(ctx); err != nil {
		return nil, err
	}
	cl, err := t.txnClient(ctx)
	if err != nil {
		return nil, t.fencedErr(ctx, err)
	}
	results, recs, states, err := t.prepare(ctx, items, m)
	if err != nil {
		return nil, err
	}
	if len(states) == 0 {
		return results, nil
	}
	refused, err := t.commitRefusing(ctx, cl, recs, states)
	if err != nil {
		t.dropTxn(cl)
		return nil, t.fencedErr(ctx, err)
	}
	for _, s := range states {
		if e, ok := refused[s.record]; ok {
			results[s.index].Err = fmt.Errorf("entry %s: %s refused the record: %w", items[s.index].ID, recs[s.record].Topic, e)
			continue
		}
		results[s.index].DestID = s.rec.DestID
	}
	for i := range results {
		if results[i].Err == nil {
			results[i].Removed = true
		}
	}
	return results, nil
}

// prepare reads the chunk's DLQ records and builds what the transaction
// writes; results has one entry per item, DestID filled at commit.
func (t *Topic) prepare(ctx context.Context, items []backend.MoveItem, m backend.Markers) (results []backend.MoveResult, recs []*kgo.Record, states []pendingState, err error) {
	results = make([]backend.MoveResult, len(items))
	// The producer is fenced now: the state is settled once no
	// transaction is open on it.
	st, err := t.loadState(ctx, true)
	if err != nil {
		return nil, nil, nil, err
	}
	want := map[int32][]int64{}
	for _, it := range items {
		if p, o, ok := ParseKafkaID(it.ID); ok {
			want[p] = append(want[p], o)
		}
	}
	found, err := t.fetchMany(ctx, want)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := t.recheckMissing(ctx, st, items, found); err != nil {
		return nil, nil, nil, err
	}
	counts := map[string]int{}
	for i, it := range items {
		r := found[it.ID]
		if err := t.goneErr(st, it.ID, r); err != nil {
			results[i].Err = err
			continue
		}
		env := t.decode(r)
		if env.Fingerprint != it.Fingerprint {
			results[i].Err = fmt.Errorf("entry %s: %w (now %s)", it.ID, backend.ErrChanged, env.Fingerprint)
			continue
		}
		dest, n, itemErr, err := t.moveDestination(ctx, it, env, counts)
		if err != nil {
			return nil, nil, nil, err
		}
		if itemErr != nil {
			results[i].Err = itemErr
			continue
		}
		ps := pendingState{index: i, record: len(recs), rec: stateRecord{
			Status: StatusRedriven, RunID: m.RunID, Seq: it.Seq, EventID: it.EventID,
			Fingerprint: it.Fingerprint, Dest: dest, At: t.now().UTC(),
			TopicID: t.topicID, RecordTS: r.Timestamp.UnixMilli(),
		}, key: it.ID}
		if ps.share = shareMoveKey(r); ps.share != "" {
			if dup, by := shareDuplicate(ps.share, it, states, st); by != "" {
				// One source record, dead-lettered twice: the entry is
				// resolved with the move of the other, nothing is sent.
				ps.record, ps.rec.DestID = dup.record, dup.rec.DestID
				results[i].Err = &sameSourceError{id: it.ID, by: by, source: ps.share}
				states = append(states, ps)
				continue
			}
		}
		ps.rec.Source = ps.share
		out := t.redriveRecord(r, it, m, dest)
		out.Partition = destPartition(r, out, dest, n)
		recs = append(recs, out)
		states = append(states, ps)
	}
	return results, recs, states, nil
}

// moveDestination is where entry it (decoded as env) goes and how many
// partitions that topic has (counts keeps them per chunk). itemErr refuses
// this entry alone; err stops the chunk: nothing is sent on a guess.
func (t *Topic) moveDestination(ctx context.Context, it backend.MoveItem, env envelope.Envelope, counts map[string]int) (dest string, n int, itemErr, err error) {
	dest = it.Dest
	if dest == "" {
		dest = env.Origin.Topic
	}
	if dest == "" {
		return "", 0, fmt.Errorf("entry %s: no original topic in its headers and no --to", it.ID), nil
	}
	// Checked here as well as at plan time: a hand-made or older plan
	// must not write the state topic either.
	if err := t.GuardDestination(ctx, dest); err != nil {
		var unknown *backend.GuardUnavailable
		if errors.As(err, &unknown) {
			return "", 0, nil, err
		}
		return "", 0, fmt.Errorf("entry %s: destination refused: %w", it.ID, err), nil
	}
	n, ok := counts[dest]
	if !ok {
		if n, err = t.destPartitions(ctx, dest); err != nil {
			if ctx.Err() != nil {
				return "", 0, nil, err
			}
			return "", 0, err, nil
		}
		counts[dest] = n
	}
	return dest, n, nil, nil
}

// destPartitions is the number of partitions of a redrive's destination,
// asked once per Topic (a run) rather than once per chunk: a topic's
// partitions change only by an operator adding some, and a run that
// straddles that change sends keyless-headered entries by the count it
// started with.
func (t *Topic) destPartitions(ctx context.Context, dest string) (int, error) {
	t.mu.Lock()
	n, ok := t.destParts[dest]
	t.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := t.partitions(ctx, dest)
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	if t.destParts == nil {
		t.destParts = map[string]int{}
	}
	t.destParts[dest] = n
	t.mu.Unlock()
	return n, nil
}

// pendingState is a state record to write once its origin record's
// offset is known.
type pendingState struct {
	index  int // in the items
	record int // in the origin records; -1: none in this transaction (share_move.go)
	key    string
	rec    stateRecord
	share  string // the share-group source record it moves (shareMoveKey), or ""
}

// commitRefusing commits the chunk's moves, leaving out each record the
// destination refuses for what it is (too large once dlqctl's headers are
// on it, a topic it may not write): one such record must not fail its
// whole chunk, every time it is resumed. When a transaction fails on
// refused records, it is aborted, the others are committed without them,
// and each refused record is tried alone (a broker refuses a whole batch
// for one record, so its neighbours were maybe refused only by company).
// It returns the refused records, by index in recs, and their errors; an
// error of its own means the outcome of what was not yet committed is
// unknown.
func (t *Topic) commitRefusing(ctx context.Context, cl *kgo.Client, recs []*kgo.Record, states []pendingState) (map[int]error, error) {
	refused := map[int]error{}
	var try func(part []pendingState, alone bool) error
	try = func(part []pendingState, alone bool) error {
		// Several states may share a record (one share-group source
		// record dead-lettered twice), and one may have none.
		var sub []*kgo.Record
		subOf := map[int]int{}
		subStates := make([]pendingState, len(part))
		for i, s := range part {
			subStates[i] = s
			if s.record < 0 {
				continue
			}
			j, ok := subOf[s.record]
			if !ok {
				r := *recs[s.record] // a fresh record: an attempt's left its offsets on it
				r.Partition, r.Offset, r.Timestamp = recs[s.record].Partition, 0, time.Time{}
				j = len(sub)
				subOf[s.record] = j
				sub = append(sub, &r)
			}
			subStates[i].record = j
		}
		bad, err := t.commit(ctx, cl, sub, subStates)
		if err == nil {
			for i, s := range subStates {
				for j := range states {
					if part[i].record >= 0 && states[j].record == part[i].record {
						states[j].rec.DestID = s.rec.DestID
					}
				}
			}
			return nil
		}
		if len(bad) == 0 {
			return err
		}
		if alone {
			for i, s := range subStates {
				if e, ok := bad[s.record]; ok && s.record >= 0 {
					refused[part[i].record] = e
				}
			}
			return nil
		}
		var rest, suspects []pendingState
		for i, s := range part {
			if _, ok := bad[subStates[i].record]; ok && s.record >= 0 {
				suspects = append(suspects, s)
			} else {
				rest = append(rest, s)
			}
		}
		if len(rest) > 0 {
			if err := try(rest, false); err != nil {
				return err
			}
		}
		// Each suspect record alone, with the states that share it.
		var order []int
		byRecord := map[int][]pendingState{}
		for _, s := range suspects {
			if _, ok := byRecord[s.record]; !ok {
				order = append(order, s.record)
			}
			byRecord[s.record] = append(byRecord[s.record], s)
		}
		for _, r := range order {
			if err := try(byRecord[r], true); err != nil {
				return err
			}
		}
		return nil
	}
	return refused, try(states, len(recs) <= 1)
}

// refusedRecord says whether a produce error is the destination refusing
// this record for what it is, which no retry of it changes.
func refusedRecord(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) ||
		errors.Is(err, kerr.InvalidRecord) || errors.Is(err, kerr.InvalidTopicException) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.PolicyViolation) ||
		errors.Is(err, kerr.CorruptMessage) || errors.Is(err, kerr.InvalidRequiredAcks)
}

// commit writes the origin records, then the state records naming where
// each went, in one transaction. When the origin refused records
// (refusedRecord), the transaction is aborted and they are returned by
// index with the error.
func (t *Topic) commit(ctx context.Context, cl *kgo.Client, recs []*kgo.Record, states []pendingState) (map[int]error, error) {
	if err := cl.BeginTransaction(); err != nil {
		return nil, t.connErr(ctx, "begin a transaction", err)
	}
	abort := func(cause error) error { return t.abortTxn(ctx, cl, cause) }
	res, err := produceSync(ctx, cl, recs)
	if err == nil {
		err = res.FirstErr()
	}
	if err != nil {
		bad := map[int]error{}
		if ctx.Err() == nil {
			at := make(map[*kgo.Record]int, len(recs))
			for i, r := range recs {
				at[r] = i
			}
			for _, r := range res {
				if r.Err != nil && refusedRecord(r.Err) {
					bad[at[r.Record]] = r.Err
				}
			}
		}
		return bad, abort(t.connErr(ctx, "produce to the origin", err))
	}
	stateRecs := make([]*kgo.Record, len(states))
	for i := range states {
		s := &states[i]
		// Results come in completion order; the records themselves carry
		// the offsets they were given.
		if s.record >= 0 {
			s.rec.DestID = KafkaID(recs[s.record].Partition, recs[s.record].Offset)
		}
		v, _ := json.Marshal(s.rec) // strings, numbers and a time always marshal
		stateRecs[i] = &kgo.Record{Topic: t.src.stateTopic, Partition: 0, Key: []byte(s.key), Value: v}
	}
	sres, err := produceSync(ctx, cl, stateRecs)
	if err == nil {
		err = sres.FirstErr()
	}
	if err != nil {
		return nil, abort(t.connErr(ctx, "write the state records", err))
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		// The commit may or may not have reached the coordinator.
		return nil, t.connErr(ctx, "commit", err)
	}
	return nil, nil
}

// redriveRecord is the record to put back: same key and value, original
// headers without the dead-lettering ones, and the markers.
func (t *Topic) redriveRecord(src *kgo.Record, it backend.MoveItem, m backend.Markers, dest string) *kgo.Record {
	rcNames := t.names[envelope.FieldRedriveCount]
	count := 0
	var hs []kgo.RecordHeader
	for _, h := range src.Headers {
		switch {
		case DeadLetterHeader(h.Key):
			continue
		case h.Key == backend.MarkerRunID || h.Key == backend.MarkerSeq || h.Key == backend.MarkerRedrivenFrom:
			continue
		case contains(rcNames, h.Key):
			if n, err := strconv.Atoi(string(h.Value)); err == nil && n > count {
				count = n
			}
			continue
		}
		hs = append(hs, h)
	}
	hs = append(hs,
		kgo.RecordHeader{Key: rcNames[0], Value: []byte(strconv.Itoa(count + 1))},
		kgo.RecordHeader{Key: backend.MarkerRunID, Value: []byte(m.RunID)},
		kgo.RecordHeader{Key: backend.MarkerSeq, Value: []byte(strconv.FormatInt(it.Seq, 10))},
		kgo.RecordHeader{Key: backend.MarkerRedrivenFrom, Value: []byte(t.src.topic + "/" + it.ID)},
	)
	return &kgo.Record{Topic: dest, Key: src.Key, Value: src.Value, Headers: hs}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// destPartition is the original partition when the headers name one on
// this topic, else the partition the Java client's default partitioner
// picks: murmur2 of the key, high bit masked, modulo the partition count
// (franz-go's StickyKeyPartitioner with a nil hasher is that). A record
// without a key and without an original partition goes to partition 0:
// it has no order to keep.
func destPartition(src, out *kgo.Record, dest string, n int) int32 {
	if o, err := OriginOf(toKafkaRecord(src).Headers); err == nil && o.Topic == dest && o.Partition >= 0 && int(o.Partition) < n {
		return o.Partition
	}
	if out.Key == nil || n <= 0 {
		return 0
	}
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic(dest).Partition(out, n))
}

// Remove resolves each entry still in the DLQ by writing its state record
// (Kafka cannot delete one record); others are ErrNotFound.
func (t *Topic) Remove(ctx context.Context, items []backend.MoveItem) ([]backend.MoveResult, error) {
	if err := t.ensureStateTopic(ctx); err != nil {
		return nil, err
	}
	if err := t.leaseHeld(ctx); err != nil {
		return nil, err
	}
	st, err := t.loadState(ctx, true)
	if err != nil {
		return nil, err
	}
	want := map[int32][]int64{}
	for _, it := range items {
		if p, o, ok := ParseKafkaID(it.ID); ok {
			want[p] = append(want[p], o)
		}
	}
	found, err := t.fetchMany(ctx, want)
	if err != nil {
		return nil, err
	}
	if err := t.recheckMissing(ctx, st, items, found); err != nil {
		return nil, err
	}
	results := make([]backend.MoveResult, len(items))
	var recs []*kgo.Record
	var idx []int
	t.mu.Lock()
	runID := t.runID
	t.mu.Unlock()
	for i, it := range items {
		r := found[it.ID]
		if err := t.goneErr(st, it.ID, r); err != nil {
			results[i].Err = err
			continue
		}
		v, _ := json.Marshal(stateRecord{Status: StatusResolved, RunID: runID, Seq: it.Seq, EventID: it.EventID, Fingerprint: it.Fingerprint, At: t.now().UTC(),
			TopicID: t.topicID, RecordTS: r.Timestamp.UnixMilli()})
		recs = append(recs, &kgo.Record{Topic: t.src.stateTopic, Partition: 0, Key: []byte(it.ID), Value: v})
		idx = append(idx, i)
	}
	if len(recs) == 0 {
		return results, nil
	}
	// In a transaction of the DLT's producer, as a redrive's: only such
	// records count (provenance.go), and the lease holder's fencing ends
	// one a crash left open.
	cl, err := t.txnClient(ctx)
	if err != nil {
		return nil, t.fencedErr(ctx, err)
	}
	if err := t.commitRecords(ctx, cl, recs); err != nil {
		t.dropTxn(cl)
		return nil, t.fencedErr(ctx, err)
	}
	for _, i := range idx {
		results[i].Removed = true
	}
	return results, nil
}

// commitRecords writes recs in one transaction of cl and commits it. An
// error means it did not commit, or its commit's outcome is unknown.
func (t *Topic) commitRecords(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	if err := cl.BeginTransaction(); err != nil {
		return t.connErr(ctx, "begin a transaction", err)
	}
	res, err := produceSync(ctx, cl, recs)
	if err == nil {
		err = res.FirstErr()
	}
	if err != nil {
		return t.abortTxn(ctx, cl, t.connErr(ctx, "write the state records", err))
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		// The commit may or may not have reached the coordinator.
		return t.connErr(ctx, "commit", err)
	}
	return nil
}

// abortTxn aborts cl's open transaction, as far as it can, and returns
// cause.
func (t *Topic) abortTxn(ctx context.Context, cl *kgo.Client, cause error) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.timeout)
	defer cancel()
	if err := cl.AbortBufferedRecords(actx); err == nil {
		_ = cl.EndTransaction(actx, kgo.TryAbort)
	}
	return cause
}

// produceSync is ProduceSync that gives up when ctx ends. An idempotent
// producer keeps retrying a record that was in flight when a broker went
// away (failing it could break its sequence numbers), whatever the
// record's context says, so ProduceSync alone can wait for as long as the
// broker is down. Here the caller gets ctx's error and the outcome stays
// unknown, which the journal and the state topic settle on resume.
func produceSync(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) (kgo.ProduceResults, error) {
	done := make(chan kgo.ProduceResults, 1)
	go func() { done <- cl.ProduceSync(ctx, recs...) }()
	select {
	case res := <-done:
		return res, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
