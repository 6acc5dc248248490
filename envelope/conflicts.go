package envelope

import (
	"cmp"
	"runtime"
	"slices"
	"strings"
	"unicode/utf8"
)

// ConflictTracker finds event IDs that carry more than one fingerprint
// during a streaming scan, exactly up to hash collisions (see
// docs/decisions.md for the odds). Per distinct (event ID, fingerprint) it
// keeps 12 bytes: a 64-bit hash of the event ID and a 32-bit hash of the
// fingerprint, in append-only chunks that are sorted once, when first
// asked; never the IDs or payloads.
//
// The chunks live outside the Go heap where the platform allows (an
// anonymous memory mapping, see arena_unix.go): pointer-free data on the
// heap costs no scanning, but the collector still lets the heap grow to
// twice what is live, so a tracker of a million events there makes the
// process about 24 MiB larger than the data. Off the heap it costs what it
// holds; the mappings are returned when the tracker becomes unreachable.
type ConflictTracker struct {
	chunks    [][]eventPair
	arena     *arena
	finished  bool
	unique    int
	conflicts map[uint64]struct{}
	// scratch is sortPairs' second chunk, taken from the arena when the
	// first chunk is sorted.
	scratch []eventPair
}

// eventPair is 12 bytes with 4-byte alignment: three uint32 rather than a
// uint64 and a uint32, which Go would pad to 16.
type eventPair struct{ eventHi, eventLo, fp uint32 }

func (p eventPair) event() uint64 { return uint64(p.eventHi)<<32 | uint64(p.eventLo) }

func newPair(eventID, fingerprint string) eventPair {
	ev := hashString(eventID)
	fh := hashLower(fingerprint)
	// Folding both halves keeps every bit of the 64-bit hash in the 32 kept.
	return eventPair{uint32(ev >> 32), uint32(ev), uint32(fh>>32) ^ uint32(fh)}
}

// hashLower is hashString(strings.ToLower(s)), without making the lower
// case string when s is ASCII, as fingerprints are.
func hashLower(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return hashString(strings.ToLower(s))
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// trackerChunk entries make one chunk (768 KiB).
const trackerChunk = 1 << 16

// NewConflictTracker returns an empty tracker.
func NewConflictTracker() *ConflictTracker {
	t := &ConflictTracker{conflicts: map[uint64]struct{}{}, arena: &arena{}}
	// The arena, not the tracker, is what the cleanup holds, so the
	// tracker can still be collected.
	runtime.AddCleanup(t, func(a *arena) { a.free() }, t.arena)
	return t
}

// Add records one entry; malformed entries are ignored.
func (t *ConflictTracker) Add(e Envelope) {
	if e.Malformed != "" || e.EventID == "" {
		return
	}
	t.finished = false
	n := len(t.chunks)
	full := n == 0
	if n > 0 && len(t.chunks[n-1]) == trackerChunk {
		// A full chunk keeps each (event, fingerprint) pair once, so memory
		// follows distinct events rather than entries; a chunk that shrank
		// enough takes more entries.
		t.chunks[n-1] = t.compact(t.chunks[n-1])
		full = len(t.chunks[n-1]) > trackerChunk*3/4
	}
	if full {
		t.chunks = append(t.chunks, t.arena.chunk(trackerChunk))
		n = len(t.chunks)
	}
	// Within the chunk's capacity, so append never moves it off the arena.
	t.chunks[n-1] = append(t.chunks[n-1], newPair(e.EventID, e.Fingerprint))
}

func lessPair(a, b eventPair) int {
	if c := cmp.Compare(a.eventHi, b.eventHi); c != 0 {
		return c
	}
	if c := cmp.Compare(a.eventLo, b.eventLo); c != 0 {
		return c
	}
	return cmp.Compare(a.fp, b.fp)
}

// compact sorts c and drops repeated pairs.
func (t *ConflictTracker) compact(c []eventPair) []eventPair {
	t.sort(c)
	return slices.Compact(c)
}

// sort sorts a chunk in lessPair's order.
func (t *ConflictTracker) sort(c []eventPair) {
	if t.scratch == nil {
		t.scratch = t.arena.chunk(trackerChunk)[:trackerChunk]
	}
	sortPairs(c, t.scratch)
}

// finish sorts each chunk and walks them merged, in event order: entries
// of one event are then next to each other, and two fingerprints among
// them are a conflict.
func (t *ConflictTracker) finish() {
	if t.finished {
		return
	}
	t.finished = true
	t.unique = 0
	t.conflicts = map[uint64]struct{}{}
	for _, c := range t.chunks {
		// Most chunks were sorted when they filled: a radix sort, unlike
		// the comparison sort, would take as long again on them.
		if !slices.IsSortedFunc(c, lessPair) {
			t.sort(c)
		}
	}
	// A binary heap of the chunks by their head pair: a million events in
	// sixteen chunks take four comparisons each instead of sixteen, and
	// this runs after the scan, while nothing else does.
	m := pairMerge{chunks: t.chunks, heads: make([]int, len(t.chunks))}
	for i, c := range t.chunks {
		if len(c) > 0 {
			m.heap = append(m.heap, i)
		}
	}
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	first := true
	var prev eventPair
	for len(m.heap) > 0 {
		p := m.pop()
		switch {
		case first || p.event() != prev.event():
			t.unique++
		case p.fp != prev.fp:
			t.conflicts[p.event()] = struct{}{}
		}
		prev, first = p, false
	}
}

// pairMerge walks sorted chunks in one order.
type pairMerge struct {
	chunks [][]eventPair
	heads  []int // per chunk, its next pair
	heap   []int // chunk indices, the smallest head first
}

func (m *pairMerge) head(i int) eventPair { return m.chunks[i][m.heads[i]] }

func (m *pairMerge) less(a, b int) bool { return lessPair(m.head(m.heap[a]), m.head(m.heap[b])) < 0 }

func (m *pairMerge) down(i int) {
	for {
		l, small := 2*i+1, i
		if l < len(m.heap) && m.less(l, small) {
			small = l
		}
		if r := l + 1; r < len(m.heap) && m.less(r, small) {
			small = r
		}
		if small == i {
			return
		}
		m.heap[i], m.heap[small] = m.heap[small], m.heap[i]
		i = small
	}
}

// pop returns the smallest head and moves its chunk on.
func (m *pairMerge) pop() eventPair {
	c := m.heap[0]
	p := m.head(c)
	m.heads[c]++
	if m.heads[c] == len(m.chunks[c]) {
		last := len(m.heap) - 1
		m.heap[0] = m.heap[last]
		m.heap = m.heap[:last]
	}
	if len(m.heap) > 0 {
		m.down(0)
	}
	return p
}

// IsConflict reports whether eventID has been seen with two fingerprints.
func (t *ConflictTracker) IsConflict(eventID string) bool {
	t.finish()
	_, ok := t.conflicts[hashString(eventID)]
	return ok
}

// ConflictCount is the number of event IDs in conflict.
func (t *ConflictTracker) ConflictCount() int {
	t.finish()
	return len(t.conflicts)
}

// Unique is the number of distinct event IDs seen.
func (t *ConflictTracker) Unique() int {
	t.finish()
	return t.unique
}
