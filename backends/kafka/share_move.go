package kafkadlq

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/backend"
)

// shareMoveKey names the source record a share-group dead letter stands
// for — topic, partition and offset — or "" for any other record. A broker
// that retries a dead-letter write leaves two dead letters for one record,
// and two share groups that both gave up on it leave one each: they are
// one move, since a record put back on the topic reaches every group that
// reads it (the group is not part of the key).
func shareMoveKey(r *kgo.Record) string {
	s, ok, err := shareDeadLetterOf(toKafkaRecord(r).Headers)
	if !ok || err != nil || s.Partition < 0 || s.Offset < 0 {
		return ""
	}
	return s.Topic + "/" + strconv.Itoa(int(s.Partition)) + ":" + strconv.FormatInt(s.Offset, 10)
}

// shareMove is a move of a share-group source record that the state
// topic records: the entry that moved it, where the record went, and what
// it was (a source topic deleted and made again reuses offsets: another
// record at the same place is not the same record).
type shareMove struct {
	by, destID, eventID, fingerprint string
}

// shareIndex is the share-group source records the state topic says were
// put back, by shareMoveKey, as read up to offset upTo of its partition 0
// (prov judged those records). The done set keeps no source (nor event ID)
// of a state record, so the index reads the state topic itself, only what
// was written since it last did.
type shareIndex struct {
	upTo int64
	prov provenance
	by   map[string]shareMove
	at   map[string]time.Time
}

// shareDuplicate finds the move of the share-group source record key that
// entry it would make again: earlier in the chunk (pending, whose state it
// then shares: the same origin record), or recorded in the state topic by
// any run of any process (then it has no record of its own, record -1,
// and the destination that move wrote). by is the entry that moved it, ""
// when none did.
// moves and read carry the state topic's moves through the chunk.
func (t *Topic) shareDuplicate(ctx context.Context, key string, it backend.MoveItem, pending []pendingState, moves *map[string]shareMove, read *bool) (dup pendingState, by string, err error) {
	for _, s := range pending {
		if s.share == key {
			return s, s.key, nil
		}
	}
	if !*read {
		// Once per chunk: a read of the state topic is a few round trips.
		if *moves, err = t.shareMoves(ctx); err != nil {
			return pendingState{}, "", err
		}
		*read = true
	}
	m, ok := (*moves)[key]
	if ok && m.eventID == it.EventID && m.fingerprint == it.Fingerprint {
		return pendingState{record: -1, rec: stateRecord{DestID: m.destID}}, m.by, nil
	}
	return pendingState{}, "", nil
}

// shareMoves indexes the share-group source records that the state topic's
// redrives put back, reading what was written since the last call (a move
// has just waited for the topic to be stable); the first of them by time
// names the move. Records count as loadState counts them: written by
// dlqctl, a redrive's in its transaction.
func (t *Topic) shareMoves(ctx context.Context) (map[string]shareMove, error) {
	spans, ok, err := t.spans(ctx, t.src.stateTopic)
	if err != nil || !ok {
		return nil, err
	}
	var start, end int64 = 0, -1
	for _, s := range spans {
		if s.partition == 0 {
			start, end = s.start, s.end
		}
	}
	t.shareMu.Lock()
	defer t.shareMu.Unlock()
	idx := &t.shareMoved
	if idx.by == nil || idx.upTo > end || idx.upTo < start {
		// First read, or the state topic was made again.
		*idx = shareIndex{upTo: start, prov: newProvenance(), by: map[string]shareMove{}, at: map[string]time.Time{}}
	}
	if idx.upTo >= end {
		return idx.by, nil
	}
	err = t.readRange(ctx, t.src.stateTopic, map[int32][2]int64{0: {idx.upTo, end}}, func(r *kgo.Record) error {
		idx.upTo = max(idx.upTo, r.Offset+1)
		if !idx.prov.written(r) || isMetaKey(string(r.Key)) {
			return nil
		}
		sr, ok := parseStateRecord(r)
		if !ok || sr.Status != StatusRedriven || sr.Source == "" || !r.Attrs.IsTransactional() {
			return nil
		}
		if first, seen := idx.at[sr.Source]; seen && !sr.At.Before(first) {
			return nil
		}
		idx.at[sr.Source] = sr.At
		idx.by[sr.Source] = shareMove{by: string(r.Key), destID: sr.DestID, eventID: sr.EventID, fingerprint: sr.Fingerprint}
		return nil
	})
	if err != nil {
		*idx = shareIndex{}
		return nil, err
	}
	return idx.by, nil
}

// sameSourceError is the result of an entry whose share-group source
// record another entry moved: its state record resolved it in the same
// transaction, and nothing was sent for it.
type sameSourceError struct {
	id, by, source string
}

func (e *sameSourceError) Error() string {
	return fmt.Sprintf("entry %s is another dead letter of record %s, which the entry %s moved: nothing published, entry resolved", e.id, e.source, e.by)
}

func (e *sameSourceError) Is(target error) bool {
	return target == backend.ErrSameMessage || target == backend.ErrNotFound
}
