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
// pointer-free record and its text lives in a few large byte blocks. A fingerprint
// of the usual "sha256:<64 hex>" form is kept as its 32 bytes, the category
// and destination (a few distinct values in a whole plan) as indexes into a
// small table, and the sequence number is the entry's place unless an entry
// says otherwise.
//
// The zero Entries is an absent list (it encodes as null, as a nil slice
// did); NewEntries and Append make a present one (it encodes as [] when
// empty). Entries is append-only, which is what makes At's zero-copy
// strings safe (see text).
type Entries struct {
	// blocks hold the text, each filled up to its capacity and never
	// moved: growing one big slice would copy it and leave the old array
	// as garbage, which at a million entries was the reader's peak.
	blocks [][]byte
	// recs are the records in groups of recGroup, for the same reason.
	recs [][]entryRecord
	n    int
	// seqs is set only once an entry's Seq is not its place (1, 2, …);
	// bySeq then finds entries by Seq.
	seqs  []int64
	bySeq map[int64]int
	// words are the distinct categories and destinations, by index.
	words   []string
	wordIdx map[string]uint32
	made    bool
}

// entryRecord is one entry: where its text is (block and offset), the
// length of each field, and its category and destination by index.
type entryRecord struct {
	block, off              uint32
	idLen, eventLen, keyLen uint32
	fpLen                   uint32 // fpRaw: the 32 bytes of a sha256:hex fingerprint
	category, dest          uint32 // indexes into words
}

// fpRaw marks a fingerprint stored as its 32 raw bytes.
const fpRaw = math.MaxUint32

const (
	blockSize = 1 << 20 // text block, once a plan is large (small plans start at 4 KiB)
	recGroup  = 1 << 12 // records per group
)

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
func (es *Entries) Len() int { return es.n }

// Present says whether the list exists (see Entries).
func (es *Entries) Present() bool { return es.made || es.n > 0 }

func (es *Entries) rec(i int) *entryRecord { return &es.recs[i/recGroup][i%recGroup] }

// Append adds e at the end.
func (es *Entries) Append(e Entry) {
	es.made = true
	if es.n%recGroup == 0 {
		es.recs = append(es.recs, make([]entryRecord, recGroup))
	}
	es.n++
	es.put(es.n-1, e)
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
		es.seqs = make([]int64, es.n)
		es.bySeq = make(map[int64]int, es.n)
		for j := range es.seqs {
			es.seqs[j] = int64(j + 1)
			if j != i {
				es.bySeq[int64(j+1)] = j
			}
		}
	}
	if es.seqs != nil {
		for len(es.seqs) < es.n {
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
	r := entryRecord{idLen: uint32(len(e.ID)), eventLen: uint32(len(e.EventID)), keyLen: uint32(len(e.Key))}
	raw, isRaw := rawFingerprint(e.Fingerprint)
	size := len(e.ID) + len(e.EventID) + len(e.Key)
	if isRaw {
		r.fpLen = fpRaw
		size += len(raw)
	} else {
		r.fpLen = uint32(len(e.Fingerprint))
		size += len(e.Fingerprint)
	}
	b := es.room(size)
	r.block, r.off = uint32(len(es.blocks)-1), uint32(len(*b))
	*b = append(*b, e.ID...)
	*b = append(*b, e.EventID...)
	*b = append(*b, e.Key...)
	if isRaw {
		*b = append(*b, raw[:]...)
	} else {
		*b = append(*b, e.Fingerprint...)
	}
	r.category, r.dest = es.word(e.Category), es.word(e.Dest)
	*es.rec(i) = r
}

// room is the last block, a new one when it has no room for size bytes
// (one of its own for text longer than a block).
func (es *Entries) room(size int) *[]byte {
	if k := len(es.blocks); k > 0 && cap(es.blocks[k-1])-len(es.blocks[k-1]) >= size {
		return &es.blocks[k-1]
	}
	next := min(blockSize, 4096<<len(es.blocks))
	es.blocks = append(es.blocks, make([]byte, 0, max(next, size)))
	return &es.blocks[len(es.blocks)-1]
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
	r := es.rec(i)
	off := r.off
	e := Entry{Seq: int64(i + 1), Category: es.words[r.category], Dest: es.words[r.dest]}
	if es.seqs != nil {
		e.Seq = es.seqs[i]
	}
	e.ID, off = es.text(r.block, off, r.idLen), off+r.idLen
	e.EventID, off = es.text(r.block, off, r.eventLen), off+r.eventLen
	e.Key = es.text(r.block, off, r.keyLen)
	e.Fingerprint = es.Fingerprint(i)
	return e
}

// ID is the locator of the entry at index i, without the rest.
func (es *Entries) ID(i int) string {
	r := es.rec(i)
	return es.text(r.block, r.off, r.idLen)
}

// HasFingerprint says whether fp is the fingerprint of the entry at index
// i, exactly as Fingerprint(i) == fp, without making that string: an
// apply's staleness check asks it of every entry.
func (es *Entries) HasFingerprint(i int, fp string) bool {
	r := es.rec(i)
	off := r.off + r.idLen + r.eventLen + r.keyLen
	if r.fpLen != fpRaw {
		return es.text(r.block, off, r.fpLen) == fp
	}
	const digits = "0123456789abcdef"
	if len(fp) != len(sha256Prefix)+64 || fp[:len(sha256Prefix)] != sha256Prefix {
		return false
	}
	hexed := fp[len(sha256Prefix):]
	for k, c := range es.blocks[r.block][off : off+32] {
		if hexed[2*k] != digits[c>>4] || hexed[2*k+1] != digits[c&0xf] {
			return false
		}
	}
	return true
}

// EventID is the event ID of the entry at index i, without the rest.
func (es *Entries) EventID(i int) string {
	r := es.rec(i)
	return es.text(r.block, r.off+r.idLen, r.eventLen)
}

// Fingerprint is the fingerprint of the entry at index i, without the rest.
func (es *Entries) Fingerprint(i int) string {
	r := es.rec(i)
	off := r.off + r.idLen + r.eventLen + r.keyLen
	if r.fpLen != fpRaw {
		return es.text(r.block, off, r.fpLen)
	}
	var b [len(sha256Prefix) + 64]byte
	copy(b[:], sha256Prefix)
	hex.Encode(b[len(sha256Prefix):], es.blocks[r.block][off:off+32])
	return string(b[:])
}

// text is n bytes of a block at off as a string, without a copy. Bytes
// once appended are never written again (Entries only appends, within a
// block's capacity, so a block never moves), so the string cannot change
// under its holder; holding it keeps that block alive, nothing more.
func (es *Entries) text(block, off, n uint32) string {
	if n == 0 {
		return ""
	}
	return unsafe.String(&es.blocks[block][off], int(n))
}

// Index is the index of the entry whose Seq is seq.
func (es *Entries) Index(seq int64) (int, bool) {
	if es.seqs == nil {
		i := int(seq - 1)
		return i, seq >= 1 && i < es.n
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
		for i := range es.n {
			if !yield(es.At(i)) {
				return
			}
		}
	}
}

// Slice copies the entries out, for code that wants a slice of a small plan.
func (es *Entries) Slice() []Entry {
	out := make([]Entry, 0, es.n)
	for e := range es.All() {
		out = append(out, e)
	}
	return out
}
