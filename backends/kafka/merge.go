package kafkadlq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// mergeKey orders DLQ records: timestamp, then partition, then offset.
type mergeKey struct {
	ts        int64
	partition int32
	offset    int64
}

func (a mergeKey) less(b mergeKey) bool {
	if a.ts != b.ts {
		return a.ts < b.ts
	}
	if a.partition != b.partition {
		return a.partition < b.partition
	}
	return a.offset < b.offset
}

func keyOf(r *kgo.Record) mergeKey {
	return mergeKey{ts: r.Timestamp.UnixMilli(), partition: r.Partition, offset: r.Offset}
}

// mergePart is one partition in scanRecords' merge: its records fetched
// and not yet merged, the merge key of the first, and where it ends.
type mergePart struct {
	cl           *kgo.Client // the reader that fetches it
	p            int32
	end          int64 // the offset to read up to
	buf          []*kgo.Record
	head         mergeKey // keyOf(buf[0]) while buf is not empty
	done, paused bool
	seen         bool // a record of it was given out (Topic.firstSeen)
}

func (m *mergePart) push(r *kgo.Record) {
	if len(m.buf) == 0 {
		m.head = keyOf(r)
	}
	m.buf = append(m.buf, r)
}

// pop takes the first record and its key.
func (m *mergePart) pop() (*kgo.Record, mergeKey) {
	r, k := m.buf[0], m.head
	m.buf[0] = nil // the batch it goes to holds it from now on
	m.buf = m.buf[1:]
	if len(m.buf) > 0 {
		m.head = keyOf(m.buf[0])
	}
	return r, k
}

// Scan reads the DLQ in dead-letter order — every partition at once,
// merged by record timestamp, each partition in offset order — leaving out
// what the state topic records, starting after the cursor `after`. It
// buffers at most some 4,000 records per partition, and decodes on other
// cores while it merges (pipeline.go).
func (t *Topic) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	return t.scan(ctx, after, false, fn)
}

// ScanLean is Scan with lean envelopes (backend.LeanScanner): most of the
// CPU a scan spends past reading the records is properties.
func (t *Topic) ScanLean(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	return t.scan(ctx, after, true, fn)
}

func (t *Topic) scan(ctx context.Context, after string, lean bool, fn func(envelope.Envelope) error) error {
	c, err := t.parseCursor(ctx, after)
	if err != nil {
		return err
	}
	st, err := t.loadState(ctx, true)
	if err != nil {
		return err
	}
	return t.scanDecoded(ctx, c, st, lean, fn)
}

// scanRecords is Scan on raw records: the partitions' starts, one
// mergePart per partition, the readers, then the merge loop.
func (t *Topic) scanRecords(ctx context.Context, c cursor, st state, fn func(*kgo.Record) error) error {
	from, ends, err := t.scanStarts(ctx, c)
	if err != nil || len(from) == 0 {
		return err
	}
	m := &scanMerge{t: t, ctx: ctx}
	m.addParts(ends)
	readers := make([]*kgo.Client, 0, min(len(m.parts), scanReaders))
	defer func() {
		for _, cl := range readers {
			cl.Close()
		}
	}()
	readers, err = m.openReaders(readers, from)
	if err != nil {
		return err
	}
	need := true // a partition may have run out of buffered records
	for {
		// Every partition that may still hold records needs its head.
		if need {
			polled, err := m.fillHeads()
			if err != nil {
				return err
			}
			if polled {
				continue
			}
			need = false
		}
		bm := m.first()
		if bm == nil {
			return nil
		}
		best, bestKey := bm.pop()
		p := bm.p
		if len(bm.buf) == 0 {
			need = true
		}
		if bm.paused && len(bm.buf) < mergeLowWater {
			bm.cl.ResumeFetchPartitions(map[string][]int32{t.src.topic: {p}})
			bm.paused = false
		}
		if c.after != nil && !c.after.less(bestKey) {
			continue
		}
		if rec, ok := st.done.getAt(p, best.Offset); ok && t.hides(rec, best) {
			continue
		}
		if !bm.seen {
			bm.seen = true
			t.noteFirstSeen(p, best)
		}
		if err := fn(best); err != nil {
			if errors.Is(err, backend.ErrStop) {
				return nil
			}
			return err
		}
	}
}

// scanStarts is, per partition that holds records past the cursor, the
// offset to read from and the offset to read up to; none when the topic
// is missing and was when it was opened.
func (t *Topic) scanStarts(ctx context.Context, c cursor) (from, ends map[int32]int64, err error) {
	spans, ok, err := t.spans(ctx, t.src.topic)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		if t.missing {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("%s: topic %q does not exist", t, t.src.topic)
	}
	ends = map[int32]int64{}
	from = map[int32]int64{}
	for _, s := range spans {
		start := s.start
		if n, ok := c.minNext[s.partition]; ok && n > start {
			start = n
		}
		if start < s.end {
			from[s.partition] = start
			ends[s.partition] = s.end
		}
	}
	return from, ends, nil
}

// scanMerge is scanRecords' merge: its partitions and their readers.
type scanMerge struct {
	t   *Topic
	ctx context.Context
	// One mergePart per partition that holds records to read, found by
	// partition number through byPart: the loops run per record.
	parts  []*mergePart
	byPart []*mergePart
}

// addParts makes one mergePart per partition of ends, in partition order.
func (m *scanMerge) addParts(ends map[int32]int64) {
	for p, end := range ends {
		mp := &mergePart{p: p, end: end}
		m.parts = append(m.parts, mp)
		if int(p) >= len(m.byPart) {
			m.byPart = append(m.byPart, make([]*mergePart, int(p)+1-len(m.byPart))...)
		}
		m.byPart[p] = mp
	}
	slices.SortFunc(m.parts, func(a, b *mergePart) int { return int(a.p) - int(b.p) })
}

// openReaders opens the readers, appending each to readers as it opens
// (the caller closes them), and gives each partition its reader.
//
// A client fetches from one broker one request at a time, and decodes
// the response on one goroutine before it asks again: with one
// client, that goroutine is what a scan waits on. Up to
// scanReaders clients, each with a share of the partitions, fetch and
// decode side by side, and each holds at most one fetch the merge has
// not taken. The client's default of 1 MiB per partition per fetch is
// kept: the limit counts compressed bytes, and 4 MiB of well-compressed
// dead letters tripled the peak memory of a scan for no measurable gain.
func (m *scanMerge) openReaders(readers []*kgo.Client, from map[int32]int64) ([]*kgo.Client, error) {
	nr := min(len(m.parts), scanReaders)
	share := make([]map[int32]int64, nr)
	for i, mp := range m.parts {
		if share[i%nr] == nil {
			share[i%nr] = map[int32]int64{}
		}
		share[i%nr][mp.p] = from[mp.p]
	}
	for i := range nr {
		cl, err := m.t.reader(m.t.src.topic, share[i])
		if err != nil {
			return readers, err
		}
		readers = append(readers, cl)
	}
	for i, mp := range m.parts {
		mp.cl = readers[i%nr]
	}
	return readers, nil
}

// poll takes one fetch of cl into its partitions' buffers, and pauses
// those that hold mergeHighWater records.
func (m *scanMerge) poll(cl *kgo.Client) error {
	t, ctx := m.t, m.ctx
	pctx, cancel := context.WithTimeout(ctx, stateIdleTimeout+t.timeout)
	fs := cl.PollFetches(pctx)
	idle := pctx.Err() != nil && fs.NumRecords() == 0
	cancel()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := fetchErr(fs); err != nil {
		return t.connErr(ctx, "read "+t.src.topic, err)
	}
	if idle {
		// Nothing came although records were due: what is left of
		// those partitions is gone (compaction, retention).
		for _, mp := range m.parts {
			if mp.cl == cl && len(mp.buf) == 0 {
				mp.done = true
			}
		}
		return nil
	}
	fs.EachRecord(m.take)
	var pause []int32
	for _, mp := range m.parts {
		if mp.cl == cl && len(mp.buf) >= mergeHighWater && !mp.paused && !mp.done {
			pause = append(pause, mp.p)
			mp.paused = true
		}
	}
	if len(pause) > 0 {
		cl.PauseFetchPartitions(map[string][]int32{t.src.topic: pause})
	}
	return nil
}

// take buffers one fetched record in its partition, up to its end.
func (m *scanMerge) take(r *kgo.Record) {
	if r.Partition < 0 || int(r.Partition) >= len(m.byPart) {
		return
	}
	mp := m.byPart[r.Partition]
	if mp == nil || mp.done {
		return
	}
	if r.Offset >= mp.end {
		mp.done = true
		return
	}
	if !r.Attrs.IsControl() {
		mp.push(r)
	}
	if r.Offset >= mp.end-1 {
		mp.done = true
	}
}

// fillHeads resumes every partition that ran out of buffered records and
// may hold more, and polls the reader of the first of them; polled says
// it did, so the merge must look again.
func (m *scanMerge) fillHeads() (polled bool, err error) {
	var empty *mergePart
	for _, mp := range m.parts {
		if len(mp.buf) == 0 && !mp.done {
			if mp.paused {
				mp.cl.ResumeFetchPartitions(map[string][]int32{m.t.src.topic: {mp.p}})
				mp.paused = false
			}
			if empty == nil {
				empty = mp
			}
		}
	}
	if empty == nil {
		return false, nil
	}
	return true, m.poll(empty.cl)
}

// first is the partition whose head comes first in merged order; nil
// when every buffer is empty.
func (m *scanMerge) first() *mergePart {
	var bm *mergePart
	for _, mp := range m.parts {
		if len(mp.buf) > 0 && (bm == nil || mp.head.less(bm.head)) {
			bm = mp
		}
	}
	return bm
}

// noteFirstSeen records r as the first record a scan gave out of
// partition p (Topic.firstSeen).
func (t *Topic) noteFirstSeen(p int32, r *kgo.Record) {
	t.mu.Lock()
	if t.firstSeen == nil {
		t.firstSeen = map[int32]seenRecord{}
	}
	t.firstSeen[p] = seenRecord{offset: r.Offset, ts: r.Timestamp}
	t.mu.Unlock()
}

// seenRecord is a record's offset and timestamp (Topic.firstSeen).
type seenRecord struct {
	offset int64
	ts     time.Time
}

// seenAt is the timestamp of the record at p:o if a scan gave it out first
// in its partition.
func (t *Topic) seenAt(p int32, o int64) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.firstSeen[p]
	return s.ts, ok && s.offset == o
}
