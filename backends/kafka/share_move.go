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

// shareMove is the move of a share-group source record that this process
// made: the entry that moved it and where the record went.
type shareMove struct {
	by, destID string
}

// shareDuplicate finds the move of the share-group source record key:
// earlier in the chunk (pending, whose state it then shares: the same
// origin record) or in an earlier transaction of this process (then it
// has no record of its own, record -1, and the destination that move
// wrote). by is the entry that moved it, "" when none did.
func (t *Topic) shareDuplicate(key string, pending []pendingState) (dup pendingState, by string) {
	for _, s := range pending {
		if s.share == key {
			return s, s.key
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.shareMoved[key]; ok {
		return pendingState{record: -1, rec: stateRecord{DestID: m.destID}}, m.by
	}
	return pendingState{}, ""
}

// noteShareMoves records, after a commit, the share-group source records
// the chunk moved, so that a later chunk's duplicate resolves with them.
func (t *Topic) noteShareMoves(items []backend.MoveItem, results []backend.MoveResult, states []pendingState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range states {
		if s.share == "" || s.record < 0 || results[s.index].Err != nil {
			continue
		}
		if t.shareMoved == nil {
			t.shareMoved = map[string]shareMove{}
		}
		if _, ok := t.shareMoved[s.share]; !ok {
			t.shareMoved[s.share] = shareMove{by: items[s.index].ID, destID: s.rec.DestID}
		}
	}
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
