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
// buffers at most some 16,000 records per partition, and decodes on other
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

// scanRecords is Scan on raw records.
func (t *Topic) scanRecords(ctx context.Context, c cursor, st state, fn func(*kgo.Record) error) error {
	spans, ok, err := t.spans(ctx, t.src.topic)
	if err != nil {
		return err
	}
	if !ok {
		if t.missing {
			return nil
		}
		return fmt.Errorf("%s: topic %q does not exist", t, t.src.topic)
	}
	ends := map[int32]int64{}
	from := map[int32]int64{}
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
	if len(from) == 0 {
		return nil
	}
	// One mergePart per partition that holds records to read, found by
	// partition number through byPart: the loops below run per record.
	var parts []*mergePart
	var byPart []*mergePart
	for p, end := range ends {
		m := &mergePart{p: p, end: end}
		parts = append(parts, m)
		if int(p) >= len(byPart) {
			byPart = append(byPart, make([]*mergePart, int(p)+1-len(byPart))...)
		}
		byPart[p] = m
	}
	slices.SortFunc(parts, func(a, b *mergePart) int { return int(a.p) - int(b.p) })
	// A client fetches from one broker one request at a time, and decodes
	// the response on one goroutine before it asks again: with one
	// client, that goroutine is what a scan waits on. Up to
	// scanReaders clients, each with a share of the partitions, fetch and
	// decode side by side, and each holds at most one fetch the merge has
	// not taken. The client's default of 1 MiB per partition per fetch is
	// kept: the limit counts compressed bytes, and 4 MiB of well-compressed
	// dead letters tripled the peak memory of a scan for no measurable gain.
	nr := min(len(parts), scanReaders)
	share := make([]map[int32]int64, nr)
	for i, m := range parts {
		if share[i%nr] == nil {
			share[i%nr] = map[int32]int64{}
		}
		share[i%nr][m.p] = from[m.p]
	}
	readers := make([]*kgo.Client, 0, nr)
	defer func() {
		for _, cl := range readers {
			cl.Close()
		}
	}()
	for i := range nr {
		cl, err := t.reader(t.src.topic, share[i])
		if err != nil {
			return err
		}
		readers = append(readers, cl)
	}
	for i, m := range parts {
		m.cl = readers[i%nr]
	}
	poll := func(cl *kgo.Client) error {
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
			for _, m := range parts {
				if m.cl == cl && len(m.buf) == 0 {
					m.done = true
				}
			}
			return nil
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Partition < 0 || int(r.Partition) >= len(byPart) {
				return
			}
			m := byPart[r.Partition]
			if m == nil || m.done {
				return
			}
			if r.Offset >= m.end {
				m.done = true
				return
			}
			if !r.Attrs.IsControl() {
				m.push(r)
			}
			if r.Offset >= m.end-1 {
				m.done = true
			}
		})
		var pause []int32
		for _, m := range parts {
			if m.cl == cl && len(m.buf) >= mergeHighWater && !m.paused && !m.done {
				pause = append(pause, m.p)
				m.paused = true
			}
		}
		if len(pause) > 0 {
			cl.PauseFetchPartitions(map[string][]int32{t.src.topic: pause})
		}
		return nil
	}
	need := true // a partition may have run out of buffered records
	for {
		// Every partition that may still hold records needs its head.
		if need {
			var empty *mergePart
			for _, m := range parts {
				if len(m.buf) == 0 && !m.done {
					if m.paused {
						m.cl.ResumeFetchPartitions(map[string][]int32{t.src.topic: {m.p}})
						m.paused = false
					}
					if empty == nil {
						empty = m
					}
				}
			}
			if empty != nil {
				if err := poll(empty.cl); err != nil {
					return err
				}
				continue
			}
			need = false
		}
		var bm *mergePart
		for _, m := range parts {
			if len(m.buf) > 0 && (bm == nil || m.head.less(bm.head)) {
				bm = m
			}
		}
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
			t.mu.Lock()
			if t.firstSeen == nil {
				t.firstSeen = map[int32]seenRecord{}
			}
			t.firstSeen[p] = seenRecord{offset: best.Offset, ts: best.Timestamp}
			t.mu.Unlock()
		}
		if err := fn(best); err != nil {
			if errors.Is(err, backend.ErrStop) {
				return nil
			}
			return err
		}
	}
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
