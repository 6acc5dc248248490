package kafkadlq

import (
	"fmt"
	"strconv"
	"sync"
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

// shareMoves is the share-group source records the state topic says were
// put back, by shareMoveKey: loadState notes them as it reads the state
// records (a redrive's, written by dlqctl in its transaction), so that a
// move finds them without a read of its own. The done set keeps no source
// (nor event ID) of a state record; these are few, one per share-group
// move.
type shareMoves struct {
	mu sync.RWMutex
	by map[string]shareMove
	at map[string]time.Time
}

func newShareMoves() *shareMoves {
	return &shareMoves{by: map[string]shareMove{}, at: map[string]time.Time{}}
}

// note records r, the state record key wrote, when it put back a
// share-group source record; the first of them by time names the move.
func (s *shareMoves) note(key string, r stateRecord) {
	if r.Status != StatusRedriven || r.Source == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if first, seen := s.at[r.Source]; seen && !r.At.Before(first) {
		return
	}
	s.at[r.Source] = r.At
	s.by[r.Source] = shareMove{by: key, destID: r.DestID, eventID: r.EventID, fingerprint: r.Fingerprint}
}

// get is the recorded move of the share-group source record source.
func (s *shareMoves) get(source string) (shareMove, bool) {
	if s == nil {
		return shareMove{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.by[source]
	return m, ok
}

// shareDuplicate finds the move of the share-group source record key that
// entry it would make again: earlier in the chunk (pending, whose state it
// then shares: the same origin record), or recorded in the state topic by
// any run of any process (st, as the move just read it; then it has no
// record of its own, record -1, and the destination that move wrote). by
// is the entry that moved it, "" when none did.
func shareDuplicate(key string, it backend.MoveItem, pending []pendingState, st state) (dup pendingState, by string) {
	for _, s := range pending {
		if s.share == key {
			return s, s.key
		}
	}
	m, ok := st.shares.get(key)
	if ok && m.eventID == it.EventID && m.fingerprint == it.Fingerprint {
		return pendingState{record: -1, rec: stateRecord{DestID: m.destID}}, m.by
	}
	return pendingState{}, ""
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
