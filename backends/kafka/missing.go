package kafkadlq

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
)

// recheckMissing looks again, before a move or a Get decides anything, at
// each item the read found no record for and the state does not record as
// taken out. The first read may have been served from a window read
// while the broker was restarting (an idle read, taken for records
// removed) or cut at an end the broker had not caught up to. Looked at
// again with the partition's offsets as they are now, a record is gone
// when retention took it (below the log start), when it is past the end
// (the topic was made again), or when compaction did (a read from its
// offset gives a later one first). A read that goes idle before it
// reaches the offset decides nothing: the move fails, try again, rather
// than skip the entry as gone. A record the second read finds is put in
// found.
func (t *Topic) recheckMissing(ctx context.Context, st state, items []backend.MoveItem, found map[string]*kgo.Record) error {
	want, upTo := map[int32]int64{}, map[int32]int64{}
	for _, it := range items {
		p, o, ok := ParseKafkaID(it.ID)
		if !ok || found[it.ID] != nil {
			continue
		}
		if _, done := st.done.get(it.ID); done {
			continue
		}
		if cur, seen := want[p]; !seen || o < cur {
			want[p] = o
		}
		upTo[p] = max(upTo[p], o)
	}
	if len(want) == 0 {
		return nil
	}
	spans, ok, err := t.spans(ctx, t.src.topic)
	if err != nil || !ok {
		return err
	}
	from, end := map[int32]int64{}, map[int32]int64{}
	for _, s := range spans {
		if o, ok := want[s.partition]; ok && o >= s.start && o < s.end {
			from[s.partition], end[s.partition] = o, s.end
			upTo[s.partition] = min(upTo[s.partition], s.end-1)
		}
	}
	if len(from) == 0 {
		return nil // retention took them
	}
	first, err := t.recordsFrom(ctx, from, upTo)
	if err != nil {
		return err
	}
	var again []*kgo.Record
	var ids []string
	for _, it := range items {
		p, o, ok := ParseKafkaID(it.ID)
		if !ok || found[it.ID] != nil {
			continue
		}
		start, asked := from[p]
		if !asked || o < start || o >= end[p] {
			continue // below the log start, or past the end: gone
		}
		recs := first[p]
		if len(recs) == 0 || recs[len(recs)-1].Offset < o {
			return fmt.Errorf("kafka: entry %s: the broker returned no record at or after its offset, which it still holds (it may not have caught up after a restart): nothing decided, try again", it.ID)
		}
		for _, r := range recs {
			if r.Offset == o {
				again, ids = append(again, r), append(ids, it.ID)
			}
		}
	}
	// A share-group dead letter stands for its source record, as in
	// fetchMany.
	if err := t.rebuild(ctx, again, true); err != nil {
		return err
	}
	for i, id := range ids {
		found[id] = again[i]
	}
	return nil
}

// recordsFrom reads, per partition, the data records from offset from[p]
// until one at or past upTo[p]; it stops early when a poll stays empty
// for the idle timeout.
func (t *Topic) recordsFrom(ctx context.Context, from, upTo map[int32]int64) (map[int32][]*kgo.Record, error) {
	cl, err := t.reader(t.src.topic, from)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[int32][]*kgo.Record{}
	reached := map[int32]bool{}
	for len(reached) < len(from) {
		fs, idle, err := t.pollDLQ(ctx, cl)
		if err != nil {
			return nil, err
		}
		if idle {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			start, asked := from[r.Partition]
			if !asked || reached[r.Partition] || r.Offset < start {
				return
			}
			if !r.Attrs.IsControl() {
				out[r.Partition] = append(out[r.Partition], r)
			}
			if r.Offset >= upTo[r.Partition] {
				reached[r.Partition] = true
			}
		})
	}
	return out, nil
}
