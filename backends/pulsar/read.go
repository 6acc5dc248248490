package pulsardlq

import (
	"context"
	"fmt"
	"sort"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/dlqctl/dlqctl/backend"
)

// readPending reads the pending messages of a chunk: one Reader per
// partition, forward from the chunk's first entry, rather than one Reader
// (a broker round trip) per message — a chunk holds consecutive DLQ
// entries, so the reads are in order. msgs[i] is nil and errs[i] wraps
// ErrNotFound for an id that is not, or no longer, pending; err is a
// failure of the whole read.
func (t *Topic) readPending(ctx context.Context, ids []string) (msgs []pulsar.Message, mids []msgID, errs []error, err error) {
	n := len(ids)
	msgs, mids, errs = make([]pulsar.Message, n), make([]msgID, n), make([]error, n)
	notFound := func(i int) error { return fmt.Errorf("message %s: %w in %s", ids[i], backend.ErrNotFound, t) }
	cursors := map[int32]cursor{}
	parts := map[int32]part{}
	wanted := map[int32][]int{} // partition → indexes into ids
	for i, id := range ids {
		mid, ok := parseMsgID(id)
		if !ok {
			errs[i] = fmt.Errorf("%q is not a Pulsar message id (ledger:entry:partition:batch): %w in %s", id, backend.ErrNotFound, t)
			continue
		}
		mids[i] = mid
		p, ok := t.partOf(mid.partition)
		if !ok {
			if _, err := t.parts(ctx); err != nil {
				return nil, nil, nil, err
			}
			if p, ok = t.partOf(mid.partition); !ok {
				errs[i] = notFound(i)
				continue
			}
		}
		c, ok := cursors[mid.partition]
		if !ok {
			if c, err = t.cursor(ctx, p); err != nil {
				return nil, nil, nil, err
			}
			cursors[mid.partition] = c
		}
		if !c.pending(mid.position) {
			errs[i] = notFound(i)
			continue
		}
		parts[mid.partition] = p
		wanted[mid.partition] = append(wanted[mid.partition], i)
	}
	for pn, idx := range wanted {
		sort.SliceStable(idx, func(a, b int) bool {
			x, y := mids[idx[a]], mids[idx[b]]
			if x.position != y.position {
				return x.position.less(y.position)
			}
			return x.batch < y.batch
		})
		if err := t.readForward(ctx, parts[pn], pn, idx, ids, msgs, mids, errs, notFound); err != nil {
			return nil, nil, nil, err
		}
	}
	return msgs, mids, errs, nil
}

// readForward reads one partition from its first wanted entry until every
// wanted message (idx, sorted by position) is found or passed.
func (t *Topic) readForward(ctx context.Context, p part, pn int32, idx []int, ids []string, msgs []pulsar.Message, mids []msgID, errs []error, notFound func(int) error) error {
	first := mids[idx[0]].position
	r, err := t.reader(ctx, p, position{first.ledger, first.entry - 1}, min(len(idx)+10, 1000))
	if err != nil {
		return err
	}
	defer r.Close()
	k := 0
	for k < len(idx) {
		m, err := r.Next(ctx)
		if err != nil {
			return t.connErr(ctx, "read "+ids[idx[k]], err)
		}
		got := idOf(m.ID(), pn)
		// Wanted entries before this one are not in the topic.
		for k < len(idx) && mids[idx[k]].position.less(got.position) {
			errs[idx[k]] = notFound(idx[k])
			k++
		}
		for j := k; j < len(idx) && mids[idx[j]].position == got.position; j++ {
			if w := mids[idx[j]]; w.batch == got.batch || (w.batch == 0 && got.batch == -1) {
				msgs[idx[j]], mids[idx[j]] = m, got
			}
		}
		if lastInEntry(m.ID()) {
			// The entry is read whole: a wanted batch index it did not
			// hold is not there.
			for k < len(idx) && mids[idx[k]].position == got.position {
				if msgs[idx[k]] == nil {
					errs[idx[k]] = notFound(idx[k])
				}
				k++
			}
		}
	}
	return nil
}
