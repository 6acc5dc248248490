package kafkadlq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A record in a state topic counts only when dlqctl wrote it. Anyone who
// may produce to the topic can write a record keyed like an entry, a lease
// or a claim, and a redrive of another DLT whose dead letters name this
// topic as their origin writes there too; either would hide entries that
// were never moved, or hold the lease. Kafka tells who wrote a record
// only by how: dlqctl writes every record of a state topic in a Kafka
// transaction (a chunk's state records with the DLT's transactional
// producer, lease, claim and format records each in one of their own), and
// never with headers, always to partition 0. So a record counts when its
// batch is transactional, it carries no headers, it is on partition 0
// (a state topic someone else made may have more), and its value is what
// its key says it is; any other is ignored and counted, and stats says
// how many.
//
// State topics written before this rule hold dlqctl's records written
// without a transaction (resolve's, the lease's, the claims). The first
// record dlqctl writes to a state topic now is a format record (key
// dlqctl-format), in a transaction: a record without one before it is one
// of those and counts; after it, it does not. A redrive's state record
// never was one of those (it always committed with the records it put
// back): outside a transaction it counts nowhere (loadState).

// formatKey is the key of the format record.
const formatKey = "dlqctl-format"

// stateFormat is the format the format record names: records count only
// when written in a transaction.
const stateFormat = 2

// formatRecord is the value of the format record.
type formatRecord struct {
	Format int    `json:"format"`
	DLT    string `json:"dlt"`
}

// provenance judges the records of a state topic read in offset order.
type provenance struct {
	// cutoff is the offset of the first format record, -1 before one is
	// read.
	cutoff int64
	// ignored counts the records that did not count; example names one.
	ignored int64
	example string
}

func newProvenance() provenance { return provenance{cutoff: -1} }

// written says whether r is a record dlqctl wrote, by how it was written
// (its value is for the caller to judge), and takes note of format
// records. Call it for every record in offset order.
func (p *provenance) written(r *kgo.Record) bool {
	if len(r.Headers) > 0 || r.Partition != 0 {
		return false
	}
	tx := r.Attrs.IsTransactional()
	if string(r.Key) == formatKey {
		var f formatRecord
		if !tx || r.Value == nil || json.Unmarshal(r.Value, &f) != nil || f.Format < stateFormat {
			return false
		}
		if p.cutoff < 0 {
			p.cutoff = r.Offset
		}
		return true
	}
	return tx || p.cutoff < 0
}

// ignore counts r as a record that does not count, for why.
func (p *provenance) ignore(r *kgo.Record, why string) {
	p.ignored++
	if p.example == "" {
		p.example = fmt.Sprintf("offset %d (key %q): %s", r.Offset, truncKey(r.Key), why)
	}
}

// notWritten is the reason given for a record that written refused.
func notWritten(r *kgo.Record) string {
	switch {
	case len(r.Headers) > 0:
		return "it carries headers (a redrive's or another producer's record)"
	case r.Partition != 0:
		return fmt.Sprintf("it is on partition %d, where dlqctl never writes", r.Partition)
	}
	return "it was not written in a transaction"
}

func truncKey(k []byte) string {
	if len(k) > 40 {
		return string(k[:40]) + "…"
	}
	return string(k)
}

// metaProducer writes the records of state topics that are not a chunk's
// (lease, claim and format records), each write one transaction of its
// own transactional ID. The ID is the run's where the Topic took a lease
// (a resume of the run fences a paused process's producer), else one of
// this Topic's own.
type metaProducer struct {
	mu sync.Mutex
	cl *kgo.Client
	id string
}

// metaTxnTimeout is how long the broker keeps a meta write's transaction
// open when its process dies inside it (a few milliseconds' window): reads
// of the state topic wait for it, and no other run's fencing ends it.
const metaTxnTimeout = 10 * time.Second

// metaWriteBound is the least time a meta write is given: its first
// starts the meta producer, which waits for the transaction coordinator,
// and a broker that has just restarted loads its coordinators first.
const metaWriteBound = 15 * time.Second

// metaTimeout bounds one meta write: the URL's timeout, but never less
// than metaWriteBound.
func (t *Topic) metaTimeout() time.Duration { return max(t.timeout, metaWriteBound) }

// metaTxnID names the meta producer of the Topic: dlqctl-meta-<DLT>-<run
// ID>, or a random suffix before any run ID is known.
func (t *Topic) metaTxnID() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.metaID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		t.metaID = "dlqctl-meta-" + t.src.topic + "-" + hex.EncodeToString(b[:])
	}
	return t.metaID
}

// setMetaRun names the meta producer after the run, unless it was named
// already, and notes the run ID for the state records of resolved
// entries.
func (t *Topic) setMetaRun(runID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.runID = runID
	if t.metaID == "" && runID != "" {
		t.metaID = "dlqctl-meta-" + t.src.topic + "-" + runID
	}
}

// writeMeta writes recs (to partition 0 of their topics) in one
// transaction; each record holds its offset then. On failure the
// producer is dropped, and the next write starts one anew, which aborts
// whatever this one left open.
func (t *Topic) writeMeta(ctx context.Context, recs ...*kgo.Record) error {
	t.meta.mu.Lock()
	defer t.meta.mu.Unlock()
	if t.meta.cl == nil {
		t.mu.Lock()
		closed := t.closed
		t.mu.Unlock()
		if closed {
			return kgo.ErrClientClosed
		}
		o, err := t.baseOpts()
		if err != nil {
			return err
		}
		t.meta.id = t.metaTxnID()
		o = append(o, kgo.TransactionalID(t.meta.id), kgo.TransactionTimeout(min(t.txnTTL, metaTxnTimeout)),
			kgo.RetryTimeout(t.metaTimeout()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
		if t.meta.cl, err = kgo.NewClient(o...); err != nil {
			return err
		}
	}
	cl := t.meta.cl
	fail := func(err error) error {
		t.meta.cl = nil
		go cl.Close() // it may wait on records in flight to a broker that is gone
		return err
	}
	for _, r := range recs {
		r.Partition = 0
	}
	if err := cl.BeginTransaction(); err != nil {
		return fail(err)
	}
	res, err := produceSync(ctx, cl, recs)
	if err == nil {
		err = res.FirstErr()
	}
	if err != nil {
		return fail(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fail(err)
	}
	return nil
}

// closeMeta closes the meta producer (Close).
func (t *Topic) closeMeta() {
	t.meta.mu.Lock()
	defer t.meta.mu.Unlock()
	if t.meta.cl != nil {
		t.meta.cl.Close()
		t.meta.cl = nil
	}
}

// ensureFormat writes the format record to topic unless it holds one.
func (t *Topic) ensureFormat(ctx context.Context, topic string) error {
	m, err := t.readMeta(ctx, topic)
	if err != nil {
		return err
	}
	if m.prov.cutoff >= 0 {
		return nil
	}
	v, _ := json.Marshal(formatRecord{Format: stateFormat, DLT: t.src.topic})
	rctx, cancel := context.WithTimeout(ctx, t.metaTimeout())
	defer cancel()
	if err := t.writeMeta(rctx, &kgo.Record{Topic: topic, Key: []byte(formatKey), Value: v}); err != nil {
		return t.connErr(ctx, "write the format record of the state topic "+topic, err)
	}
	return nil
}
