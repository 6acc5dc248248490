package redrive

import (
	"encoding/hex"
	"iter"
	"math"
	"strings"
	"unsafe"
)

// Entries is a plan's entry list in a compact form. A million-entry plan
// held as []Entry is five Go strings per entry, each its own allocation
// with a header the collector scans; here every entry is one fixed-size,
// pointer-free record and its text lives in one byte arena. A fingerprint
// of the usual "sha256:<64 hex>" form is kept as its 32 bytes, the category
// and destination (a few distinct values in a whole plan) as indexes into a
// small table, and the sequence number is the entry's place unless an entry
// says otherwise.
//
// The zero Entries is an absent list (it encodes as null, as a nil slice
// did); NewEntries and Append make a present one (it encodes as [] when
// empty). Entries is append-only, which is what makes At's zero-copy
// strings safe (see at).
type Entries struct {
	arena []byte
	recs  []entryRecord
	// seqs is set only once an entry's Seq is not its place (1, 2, …);
	// bySeq then finds entries by Seq.
	seqs  []int64
	bySeq map[int64]int
	// words are the distinct categories and destinations, by index.
	words   []string
	wordIdx map[string]uint32
	made    bool
}

// entryRecord is one entry: where its text is in the arena.
type entryRecord struct {
	off                     uint64
	idLen, eventLen, keyLen uint32
	fpLen                   uint32 // fpRaw: the 32 bytes of a sha256:hex fingerprint
	category, dest          uint32 // indexes into words
}

// fpRaw marks a fingerprint stored as its 32 raw bytes.
const fpRaw = math.MaxUint32

const sha256Prefix = "sha256:"

// NewEntries is a present list holding es (an empty one when es is empty).
func NewEntries(es ...Entry) Entries {
	out := Entries{made: true}
	for _, e := range es {
		out.Append(e)
	}
	return out
}

// Len is how many entries there are.
func (es *Entries) Len() int { return len(es.recs) }

// Present says whether the list exists (see Entries).
func (es *Entries) Present() bool { return es.made || len(es.recs) > 0 }

// Append adds e at the end.
func (es *Entries) Append(e Entry) {
	es.made = true
	es.recs = append(es.recs, entryRecord{})
	es.put(len(es.recs)-1, e)
}

// Set replaces the entry at index i (an edit, as a test of tampering
// makes). Its text is appended, never written over, like Append's.
func (es *Entries) Set(i int, e Entry) {
	es.put(i, e)
}

// put writes e as the record at index i.
func (es *Entries) put(i int, e Entry) {
	if es.seqs == nil && e.Seq != int64(i+1) {
		// The first entry out of place: from now on seqs are kept.
		es.seqs = make([]int64, len(es.recs), cap(es.recs))
		es.bySeq = make(map[int64]int, len(es.recs))
		for j := range es.seqs {
			es.seqs[j] = int64(j + 1)
			if j != i {
				es.bySeq[int64(j+1)] = j
			}
		}
	}
	if es.seqs != nil {
		for len(es.seqs) < len(es.recs) {
			es.seqs = append(es.seqs, 0) // the slot Append just added
		}
		if old, ok := es.bySeq[es.seqs[i]]; ok && old == i {
			delete(es.bySeq, es.seqs[i])
		}
		es.seqs[i] = e.Seq
		if _, dup := es.bySeq[e.Seq]; !dup {
			es.bySeq[e.Seq] = i
		}
	}
	r := entryRecord{off: uint64(len(es.arena)), idLen: uint32(len(e.ID)), eventLen: uint32(len(e.EventID)), keyLen: uint32(len(e.Key))}
	es.arena = append(es.arena, e.ID...)
	es.arena = append(es.arena, e.EventID...)
	es.arena = append(es.arena, e.Key...)
	if raw, ok := rawFingerprint(e.Fingerprint); ok {
		r.fpLen = fpRaw
		es.arena = append(es.arena, raw[:]...)
	} else {
		r.fpLen = uint32(len(e.Fingerprint))
		es.arena = append(es.arena, e.Fingerprint...)
	}
	r.category, r.dest = es.word(e.Category), es.word(e.Dest)
	es.recs[i] = r
}

// rawFingerprint is the 32 bytes of a "sha256:" + 64 lowercase hex
// fingerprint; any other form is kept as text, so it reads back exactly.
func rawFingerprint(fp string) (raw [32]byte, ok bool) {
	hexPart, found := strings.CutPrefix(fp, sha256Prefix)
	if !found || len(hexPart) != 64 {
		return raw, false
	}
	for i := 0; i < 64; i++ {
		if c := hexPart[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return raw, false
		}
	}
	if _, err := hex.Decode(raw[:], []byte(hexPart)); err != nil {
		return raw, false
	}
	return raw, true
}

func (es *Entries) word(s string) uint32 {
	if i, ok := es.wordIdx[s]; ok {
		return i
	}
	if es.wordIdx == nil {
		es.wordIdx = map[string]uint32{}
	}
	i := uint32(len(es.words))
	es.words = append(es.words, s)
	es.wordIdx[s] = i
	return i
}

// At is the entry at index i (0-based).
func (es *Entries) At(i int) Entry {
	r := &es.recs[i]
	off := r.off
	e := Entry{Seq: int64(i + 1), Category: es.words[r.category], Dest: es.words[r.dest]}
	if es.seqs != nil {
		e.Seq = es.seqs[i]
	}
	e.ID, off = es.text(off, r.idLen), off+uint64(r.idLen)
	e.EventID, off = es.text(off, r.eventLen), off+uint64(r.eventLen)
	e.Key, off = es.text(off, r.keyLen), off+uint64(r.keyLen)
	if r.fpLen == fpRaw {
		var b [len(sha256Prefix) + 64]byte
		copy(b[:], sha256Prefix)
		hex.Encode(b[len(sha256Prefix):], es.arena[off:off+32])
		e.Fingerprint = string(b[:])
	} else {
		e.Fingerprint = es.text(off, r.fpLen)
	}
	return e
}

// text is n bytes of the arena at off as a string, without a copy. Bytes
// once appended are never written again (Entries only appends, and a
// grown arena is a new array), so the string cannot change under its
// holder; holding it keeps that arena array alive, nothing more.
func (es *Entries) text(off uint64, n uint32) string {
	if n == 0 {
		return ""
	}
	return unsafe.String(&es.arena[off], int(n))
}

// Index is the index of the entry whose Seq is seq.
func (es *Entries) Index(seq int64) (int, bool) {
	if es.seqs == nil {
		i := int(seq - 1)
		return i, seq >= 1 && i < len(es.recs)
	}
	i, ok := es.bySeq[seq]
	return i, ok
}

// BySeq is the entry whose Seq is seq.
func (es *Entries) BySeq(seq int64) (Entry, bool) {
	i, ok := es.Index(seq)
	if !ok {
		return Entry{}, false
	}
	return es.At(i), true
}

// All yields every entry in plan order.
func (es *Entries) All() iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		for i := range es.recs {
			if !yield(es.At(i)) {
				return
			}
		}
	}
}

// Slice copies the entries out, for code that wants a slice of a small plan.
func (es *Entries) Slice() []Entry {
	out := make([]Entry, 0, len(es.recs))
	for e := range es.All() {
		out = append(out, e)
	}
	return out
}
