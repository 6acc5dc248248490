package kafkadlq

import (
	"cmp"
	"encoding/binary"
	"slices"
	"sync"
	"time"
)

// doneSet is the entries the state topic takes out of the DLQ, by
// locator. A Topic keeps one and a later loadState adds to it in place
// (copying it per redrive chunk made a run quadratic), so readers go
// through its lock.
//
// A state topic is never trimmed, so a long-lived DLT's holds millions of
// records, and a stats reads them all: held as a map of state records, a
// million of them took some 500 MiB. Here an entry is 16 bytes in its
// partition's list, sorted by offset (Len counts a range with two binary
// searches; a scan, reading each partition in offset order, finds its
// entries the same way), and the rest of its record some 30 bytes in one
// byte slice (encodeDone): no pointers, so the collector never walks them,
// and the strings many records share (run ID, destination, topic ID) are
// held once. A record's event ID is not kept: nothing read from the state
// topic asks for it.
type doneSet struct {
	mu      sync.RWMutex
	parts   map[int32]*doneList
	topicID string
	details []byte
	strs    []string // interned: run IDs, destinations, topic IDs, by number
	strNum  map[string]uint64
}

// doneList is one DLQ partition's entries.
type doneList struct {
	entries []doneEntry // by offset
	// others are the offsets of entries about another topic of the same
	// name (their topic ID differs), sorted: Len leaves them out.
	others []int64
}

// doneEntry is one entry: its offset and where the rest of its state
// record starts in details.
type doneEntry struct {
	offset int64
	detail uint64
}

func newDoneSet(topicID string) *doneSet {
	return &doneSet{parts: map[int32]*doneList{}, topicID: topicID, strNum: map[string]uint64{}}
}

// counts says whether r is about this topic: no topic ID, or this one.
func (d *doneSet) counts(r stateRecord) bool {
	return r.TopicID == "" || d.topicID == "" || r.TopicID == d.topicID
}

// set records id (under mu); a later record of an id replaces the
// earlier.
func (d *doneSet) set(id string, r stateRecord) {
	p, o, ok := ParseKafkaID(id)
	if !ok {
		return
	}
	if d.parts == nil {
		d.parts, d.strNum = map[int32]*doneList{}, map[string]uint64{}
	}
	l := d.parts[p]
	if l == nil {
		l = &doneList{}
		d.parts[p] = l
	}
	at := uint64(len(d.details))
	d.details = d.encodeDone(d.details, r)
	// State records come mostly in offset order: usually an append.
	i := len(l.entries)
	if i > 0 && l.entries[i-1].offset >= o {
		i, _ = slices.BinarySearchFunc(l.entries, o, func(e doneEntry, o int64) int { return cmp.Compare(e.offset, o) })
	}
	if i < len(l.entries) && l.entries[i].offset == o {
		l.entries[i].detail = at // the old record's bytes stay, unused
	} else {
		l.entries = slices.Insert(l.entries, i, doneEntry{offset: o, detail: at})
	}
	j, other := slices.BinarySearch(l.others, o)
	switch counts := d.counts(r); {
	case counts && other:
		l.others = slices.Delete(l.others, j, j+1)
	case !counts && !other:
		l.others = slices.Insert(l.others, j, o)
	}
}

// find is the entry at offset o of partition p (under mu).
func (d *doneSet) find(p int32, o int64) (doneEntry, bool) {
	l := d.parts[p]
	if l == nil {
		return doneEntry{}, false
	}
	i, ok := slices.BinarySearchFunc(l.entries, o, func(e doneEntry, o int64) int { return cmp.Compare(e.offset, o) })
	if !ok {
		return doneEntry{}, false
	}
	return l.entries[i], true
}

// countIn is how many entries of this topic the state takes out of
// partition p's offsets [from, to).
func (d *doneSet) countIn(p int32, from, to int64) int64 {
	if d == nil {
		return 0
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	l := d.parts[p]
	if l == nil {
		return 0
	}
	at := func(o int64) int {
		i, _ := slices.BinarySearchFunc(l.entries, o, func(e doneEntry, o int64) int { return cmp.Compare(e.offset, o) })
		return i
	}
	i, _ := slices.BinarySearch(l.others, from)
	j, _ := slices.BinarySearch(l.others, to)
	return int64(at(to)-at(from)) - int64(j-i)
}

// firstRemaining is the first offset of partition p in [from, to) that
// no entry of this topic takes out, -1 when there is none.
func (d *doneSet) firstRemaining(p int32, from, to int64) int64 {
	if from >= to {
		return -1
	}
	if d == nil {
		return from
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	l := d.parts[p]
	o := from
	if l != nil {
		i, _ := slices.BinarySearchFunc(l.entries, o, func(e doneEntry, o int64) int { return cmp.Compare(e.offset, o) })
		for ; i < len(l.entries) && l.entries[i].offset == o && o < to; i++ {
			if _, other := slices.BinarySearch(l.others, o); other {
				break
			}
			o++
		}
	}
	if o >= to {
		return -1
	}
	return o
}

// getAt is what hides reads of the state record at partition:offset —
// its status, topic ID, record timestamp and (from before record
// timestamps were kept) fingerprint — without making the locator string.
func (d *doneSet) getAt(p int32, o int64) (stateRecord, bool) {
	if d == nil {
		return stateRecord{}, false
	}
	return d.lookup(p, o, false)
}

// lookup is the state record at partition:offset, with its fingerprint
// when full is set.
func (d *doneSet) lookup(p int32, o int64, full bool) (stateRecord, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	e, ok := d.find(p, o)
	if !ok {
		return stateRecord{}, false
	}
	return d.decodeDone(e.detail, full), true
}

// get is the state record of id, all of it but the event ID.
func (d *doneSet) get(id string) (stateRecord, bool) {
	if d == nil {
		return stateRecord{}, false
	}
	p, o, ok := ParseKafkaID(id)
	if !ok {
		return stateRecord{}, false
	}
	return d.lookup(p, o, true)
}

// ids lists the locators taken out of the DLQ.
func (d *doneSet) ids() []string {
	if d == nil {
		return nil
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	var out []string
	for p, l := range d.parts {
		for _, e := range l.entries {
			out = append(out, KafkaID(p, e.offset))
		}
	}
	return out
}

// intern is the number of s among the strings held once.
func (d *doneSet) intern(s string) uint64 {
	if n, ok := d.strNum[s]; ok {
		return n
	}
	n := uint64(len(d.strs))
	d.strs = append(d.strs, s)
	d.strNum[s] = n
	return n
}

// Status numbers in an encoded record.
const (
	doneRedriven = iota
	doneResolved
)

// encodeDone appends r but its event ID to b: the status, the run ID,
// destination and topic ID by number, the sequence number, the time, the
// record timestamp, the destination's locator and (only when there is no
// record timestamp, which hides would use instead) the fingerprint.
func (d *doneSet) encodeDone(b []byte, r stateRecord) []byte {
	status := byte(doneRedriven)
	if r.Status == StatusResolved {
		status = doneResolved
	}
	b = append(b, status)
	b = binary.AppendUvarint(b, d.intern(r.RunID))
	b = binary.AppendUvarint(b, d.intern(r.Dest))
	b = binary.AppendUvarint(b, d.intern(r.TopicID))
	b = binary.AppendVarint(b, r.Seq)
	b = binary.AppendVarint(b, r.At.Unix())
	b = binary.AppendUvarint(b, uint64(r.At.Nanosecond()))
	b = binary.AppendVarint(b, r.RecordTS)
	b = binary.AppendUvarint(b, uint64(len(r.DestID)))
	b = append(b, r.DestID...)
	fp := ""
	if r.RecordTS == 0 {
		fp = r.Fingerprint
	}
	b = binary.AppendUvarint(b, uint64(len(fp)))
	return append(b, fp...)
}

// decodeDone reads the record encodeDone wrote at details[at:]: all of
// it when full, else only what hides reads (no string is made then but
// a fingerprint, which only records older than record timestamps have).
func (d *doneSet) decodeDone(at uint64, full bool) stateRecord {
	b := d.details[at:]
	var r stateRecord
	r.Status = StatusRedriven
	if b[0] == doneResolved {
		r.Status = StatusResolved
	}
	b = b[1:]
	uv := func() uint64 { v, n := binary.Uvarint(b); b = b[n:]; return v }
	sv := func() int64 { v, n := binary.Varint(b); b = b[n:]; return v }
	runID, dest, topicID := uv(), uv(), uv()
	r.TopicID = d.strs[topicID]
	seq, sec, nsec := sv(), sv(), uv()
	r.RecordTS = sv()
	destID := b[:uv()]
	b = b[len(destID):]
	if fp := b[:uv()]; len(fp) > 0 {
		r.Fingerprint = string(fp)
	}
	if full {
		r.RunID, r.Dest, r.Seq = d.strs[runID], d.strs[dest], seq
		r.At = time.Unix(sec, int64(nsec)).UTC()
		r.DestID = string(destID)
	}
	return r
}
