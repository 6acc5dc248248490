package pulsardlq

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// position is a managed-ledger entry: one message, or one batch of them.
type position struct{ ledger, entry int64 }

func (p position) less(q position) bool {
	if p.ledger != q.ledger {
		return p.ledger < q.ledger
	}
	return p.entry < q.entry
}

func (p position) String() string { return fmt.Sprintf("%d:%d", p.ledger, p.entry) }

func parsePosition(s string) (position, error) {
	l, e, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return position{}, fmt.Errorf("position %q: want LEDGER:ENTRY", s)
	}
	ledger, err1 := strconv.ParseInt(l, 10, 64)
	entry, err2 := strconv.ParseInt(e, 10, 64)
	if err1 != nil || err2 != nil {
		return position{}, fmt.Errorf("position %q: want LEDGER:ENTRY", s)
	}
	return position{ledger, entry}, nil
}

// msgID is a message's locator: ledger:entry:partition:batch. partition is
// -1 on a non-partitioned topic; batch is -1 for an entry that holds one
// message and the index inside the batch otherwise.
type msgID struct {
	position
	partition int32
	batch     int32
}

func (m msgID) String() string {
	return fmt.Sprintf("%d:%d:%d:%d", m.ledger, m.entry, m.partition, m.batch)
}

// parseMsgID reads ledger:entry:partition:batch (or ledger:entry:partition,
// as Pulsar's own tools print a message outside a batch).
func parseMsgID(s string) (msgID, bool) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 && len(parts) != 4 {
		return msgID{}, false
	}
	var n [4]int64
	n[3] = -1
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return msgID{}, false
		}
		n[i] = v
	}
	if n[0] < 0 || n[1] < 0 || n[2] < -1 || n[2] > 1<<30 || n[3] < -1 || n[3] > 1<<30 {
		return msgID{}, false
	}
	return msgID{position: position{n[0], n[1]}, partition: int32(n[2]), batch: int32(n[3])}, true
}

// cursor is what the broker holds for the DLQ subscription on one topic
// (or partition): everything up to markDelete is acknowledged, and so are
// the entries in deleted, the ranges acknowledged individually past it.
// Acknowledgement is per entry: with batch-index acknowledgment enabled on
// the broker a batch can also be acknowledged in part, which the admin API
// does not show (see the package comment).
type cursor struct {
	markDelete    position
	deleted       []openClosed
	lastConfirmed position
	// ledgers holds the entry count of each ledger of the topic; the last
	// one, still open, counts up to lastConfirmed.
	ledgers map[int64]int64
	// removed are entries the broker shows pending that dlqctl's removal
	// record holds (removals.go): acknowledged, though the broker lost it.
	removed map[position]bool
}

// openClosed is the range (from, to] of entries.
type openClosed struct{ from, to position }

var rangePattern = regexp.MustCompile(`\((-?\d+):(-?\d+)\.\.(-?\d+):(-?\d+)\]`)

func newCursor(st internalStats, sub string) (cursor, error) {
	cs, ok := st.Cursors[sub]
	if !ok {
		return cursor{}, fmt.Errorf("the subscription %q does not exist (deleted since dlqctl created it?)", sub)
	}
	var c cursor
	var err error
	if c.markDelete, err = parsePosition(cs.MarkDeletePosition); err != nil {
		return c, fmt.Errorf("markDeletePosition: %v", err)
	}
	if c.lastConfirmed, err = parsePosition(st.LastConfirmedEntry); err != nil {
		return c, fmt.Errorf("lastConfirmedEntry: %v", err)
	}
	for _, m := range rangePattern.FindAllStringSubmatch(cs.IndividuallyDeletedMessages, -1) {
		var n [4]int64
		for i := range n {
			n[i], _ = strconv.ParseInt(m[i+1], 10, 64) // the pattern holds digits only
		}
		c.deleted = append(c.deleted, openClosed{position{n[0], n[1]}, position{n[2], n[3]}})
	}
	if strings.Contains(cs.IndividuallyDeletedMessages, "..") && len(c.deleted) == 0 {
		return c, fmt.Errorf("individuallyDeletedMessages: cannot read %.80q", cs.IndividuallyDeletedMessages)
	}
	c.ledgers = map[int64]int64{}
	for _, l := range st.Ledgers {
		c.ledgers[l.LedgerID] = l.Entries
	}
	return c, nil
}

// acked: the subscription acknowledged the entry at p.
func (c cursor) acked(p position) bool {
	if !c.markDelete.less(p) || c.removed[p] {
		return true
	}
	for _, r := range c.deleted {
		if r.from.less(p) && !r.to.less(p) {
			return true
		}
	}
	return false
}

// exists: the topic still holds an entry at p.
func (c cursor) exists(p position) bool {
	n, ok := c.ledgers[p.ledger]
	if !ok || p.entry < 0 {
		return false
	}
	if p.ledger == c.lastConfirmed.ledger {
		return p.entry <= c.lastConfirmed.entry
	}
	return p.entry < n
}

// pending: the entry at p is in the DLQ (there and not acknowledged).
func (c cursor) pending(p position) bool { return c.exists(p) && !c.acked(p) }
