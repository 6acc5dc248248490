package kafkadlq

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// decode maps a record to an envelope.
func (t *Topic) decode(r *kgo.Record) envelope.Envelope {
	return t.dec.Decode(toKafkaRecord(r))
}

// toKafkaRecord is r as the decoder reads it; the headers are r's own
// (KafkaHeader is kgo.RecordHeader), neither copied nor changed.
func toKafkaRecord(r *kgo.Record) KafkaRecord {
	return KafkaRecord{
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp,
	}
}

// fetch reads the record at partition:offset of the DLQ topic; it is
// ErrNotFound when that offset is below the log start (retention), at or
// past the last stable offset, or holds no data record.
func (t *Topic) fetch(ctx context.Context, p int32, o int64) (*kgo.Record, error) {
	recs, err := t.fetchMany(ctx, map[int32][]int64{p: {o}})
	if err != nil {
		return nil, err
	}
	r, ok := recs[KafkaID(p, o)]
	if !ok {
		return nil, fmt.Errorf("entry %s: %w in %s", KafkaID(p, o), backend.ErrNotFound, t)
	}
	return r, nil
}

// fetchRaw reads the DLQ records at the given offsets, by locator; those
// that are not there are left out. It serves what it can from the records
// the last reads fetched (readahead.go) and reads the rest.
func (t *Topic) fetchRaw(ctx context.Context, want map[int32][]int64) (map[string]*kgo.Record, error) {
	spans, ok, err := t.spans(ctx, t.src.topic)
	if err != nil {
		return nil, err
	}
	out := map[string]*kgo.Record{}
	if !ok {
		return out, nil
	}
	bySpan := map[int32]span{}
	for _, s := range spans {
		bySpan[s.partition] = s
	}
	type need struct {
		lo, hi int64
		offs   []int64
	}
	needs := map[int32]*need{}
	for p, offs := range want {
		s, ok := bySpan[p]
		if !ok {
			continue
		}
		n := &need{lo: -1, hi: -1}
		for _, o := range offs {
			if o < s.start || o >= s.end {
				continue
			}
			n.offs = append(n.offs, o)
			if n.lo < 0 || o < n.lo {
				n.lo = o
			}
			if o+1 > n.hi {
				n.hi = o + 1
			}
		}
		if n.lo >= 0 {
			needs[p] = n
		}
	}
	read := map[int32][3]int64{}
	for p, n := range needs {
		if w := t.cachedWindow(p, n.lo, n.hi); w != nil {
			w.serve(p, n.offs, out)
			continue
		}
		read[p] = [3]int64{n.lo, n.hi, bySpan[p].end}
	}
	if len(read) == 0 {
		return out, nil
	}
	windows, err := t.readWindows(ctx, read)
	if err != nil {
		return out, err
	}
	for p, w := range windows {
		w.serve(p, needs[p].offs, out)
	}
	return out, nil
}

// Get reads the entry with locator id ("partition:offset"). An entry the
// state topic records as redriven or resolved, or one that retention
// removed, is ErrNotFound. Get waits for a transaction that is open on the
// state topic to end, so that its answer is settled.
func (t *Topic) Get(ctx context.Context, id string) (envelope.Envelope, error) {
	p, o, ok := ParseKafkaID(id)
	if !ok {
		return envelope.Envelope{}, fmt.Errorf("%q is not a Kafka entry id (partition:offset): %w in %s", id, backend.ErrNotFound, t)
	}
	st, err := t.loadState(ctx, true)
	if err != nil {
		return envelope.Envelope{}, err
	}
	// A resume takes an entry Get does not find for one its atomic move
	// took out: a record missing from a read right after a broker
	// restart must be looked at again, not taken for gone.
	id = KafkaID(p, o)
	recs, err := t.fetchMany(ctx, map[int32][]int64{p: {o}})
	if err != nil {
		return envelope.Envelope{}, err
	}
	if err := t.recheckMissing(ctx, st, []backend.MoveItem{{ID: id}}, recs); err != nil {
		return envelope.Envelope{}, err
	}
	r := recs[id]
	if err := t.goneErr(st, id, r); err != nil {
		return envelope.Envelope{}, err
	}
	return t.decode(r), nil
}

// Len is the number of offsets between each partition's log start and
// last stable offset, less the entries the state topic records there.
// Control records of a transactional dead-letter producer occupy offsets
// too and are counted; Scan's count is exact.
func (t *Topic) Len(ctx context.Context) (int64, error) {
	spans, ok, err := t.spans(ctx, t.src.topic)
	if err != nil {
		return 0, err
	}
	if !ok {
		if t.missing {
			return 0, nil
		}
		return 0, fmt.Errorf("%s: topic %q does not exist", t, t.src.topic)
	}
	st, err := t.loadState(ctx, true)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, s := range spans {
		n += s.end - s.start - st.done.countIn(s.partition, s.start, s.end)
	}
	return max(n, 0), nil
}
