package kafkadlq

import (
	"fmt"
	"strconv"

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
// put back, by shareMoveKey, indexed from the done set done when it held
// n records. Entries only join a done set, so an index of the same set at
// the same size is current.
type shareIndex struct {
	done *doneSet
	n    int
	by   map[string]shareMove
}

// shareDuplicate finds the move of the share-group source record key that
// entry it (in the state st) would make again: earlier in the chunk
// (pending, whose state it then shares: the same origin record), or
// recorded in the state topic by any run of any process (then it has no
// record of its own, record -1, and the destination that move wrote). by
// is the entry that moved it, "" when none did.
func (t *Topic) shareDuplicate(st state, key string, it backend.MoveItem, pending []pendingState) (dup pendingState, by string) {
	for _, s := range pending {
		if s.share == key {
			return s, s.key
		}
	}
	m, ok := t.shareMoves(st)[key]
	if ok && m.eventID == it.EventID && m.fingerprint == it.Fingerprint {
		return pendingState{record: -1, rec: stateRecord{DestID: m.destID}}, m.by
	}
	return pendingState{}, ""
}

// shareMoves indexes the share-group source records that st's redrives
// put back; the first of them (by time) names the move. It walks the done
// set only when it grew since the last call: once per chunk of a run that
// moves share-group dead letters.
func (t *Topic) shareMoves(st state) map[string]shareMove {
	d := st.done
	if d == nil {
		return nil
	}
	d.mu.RLock()
	n := len(d.m)
	d.mu.RUnlock()
	t.mu.Lock()
	idx := t.shareMoved
	t.mu.Unlock()
	if idx.done == d && idx.n == n {
		return idx.by
	}
	by, at := map[string]shareMove{}, map[string]stateRecord{}
	d.mu.RLock()
	for id, r := range d.m {
		if r.Source == "" || r.Status != StatusRedriven {
			continue
		}
		if first, seen := at[r.Source]; seen && !r.At.Before(first.At) {
			continue
		}
		at[r.Source] = r
		by[r.Source] = shareMove{by: id, destID: r.DestID, eventID: r.EventID, fingerprint: r.Fingerprint}
	}
	n = len(d.m)
	d.mu.RUnlock()
	t.mu.Lock()
	t.shareMoved = shareIndex{done: d, n: n, by: by}
	t.mu.Unlock()
	return by
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
