package redisstream

import (
	"sync"

	"github.com/dlqctl/dlqctl/envelope"
)

// Decoding an entry has two forms behind one seam (entryDecoder.decode):
//
//   - the plain one, envelope.DecodeFields over a map of the entry's
//     fields, which resolves the field names anew for every entry;
//   - the fast one, which keeps the fields in two slices (an entry has a
//     dozen or two), finds each field's name by one lookup per field the
//     entry holds in a table made once per stream, and, for a lean scan
//     (stats, the conflicts pass), skips what lean envelopes leave out:
//     properties (still checked, since a bad one makes the entry
//     malformed) and the payload's encoding when no payload_encoding
//     field says it (classifying it never makes an entry malformed).
//
// An entry the fast form finds malformed is decoded again the plain way,
// so that its reason and raw form are exactly the plain ones. Both give
// the same envelope (FuzzDecodeEntry, TestScanLeanIsScanLessWhatLeanLeavesOut).

// entryDecoder decodes the entries of one stream.
type entryDecoder struct {
	names envelope.FieldNames
	table envelope.NameTable
	// aliases is, for each field name, the envelope fields it is a name
	// of and its rank among each one's names (0: the first).
	aliases map[string][]alias
	// plain decodes every entry with envelope.DecodeFields (tests and
	// benchmarks compare the two).
	plain   bool
	scratch sync.Pool // of *decodeScratch
}

// decodeScratch is what decoding one entry needs besides the envelope,
// kept in a pool: with a scan's decoding a few hundred bytes each for
// every entry, it was a good part of the garbage.
type decodeScratch struct {
	keys, vals []string
	used       envelope.UsedNames
	resolved   [envelope.NumFields]int8
}

// release empties sc, so that the pool holds no entry's text, and puts
// it back.
func (sc *decodeScratch) release(pool *sync.Pool) {
	clear(sc.keys)
	clear(sc.vals)
	clear(sc.used)
	sc.keys, sc.vals, sc.used, sc.resolved = sc.keys[:0], sc.vals[:0], sc.used[:0], [envelope.NumFields]int8{}
	pool.Put(sc)
}

type alias struct {
	f    envelope.Field
	rank int
}

func newEntryDecoder(names envelope.FieldNames) *entryDecoder {
	d := &entryDecoder{names: names, table: names.Table(), aliases: map[string][]alias{}}
	for f, ns := range d.table {
		for rank, n := range ns {
			d.aliases[n] = append(d.aliases[n], alias{envelope.Field(f), rank})
		}
	}
	return d
}

// decode is the entry as an envelope; lean leaves out what
// backend.LeanScanner allows.
func (d *entryDecoder) decode(se streamEntry, lean bool) envelope.Envelope {
	if d.plain {
		return d.plainDecode(se, lean)
	}
	if len(se.Fields) > 2*127 {
		return d.plainDecode(se, lean) // past what an int8 index holds
	}
	sc, _ := d.scratch.Get().(*decodeScratch)
	if sc == nil {
		sc = new(decodeScratch)
	}
	defer sc.release(&d.scratch)
	kv := envelope.KVReader{Names: &d.table, Used: sc.used[:0]}
	kv.Fields.Keys, kv.Fields.Vals = sc.keys[:0], sc.vals[:0]
	for i := 0; i+1 < len(se.Fields); i += 2 {
		kv.Fields.Put(se.Fields[i], se.Fields[i+1]) // a repeated name: the last value
	}
	var rank [envelope.NumFields]int
	for i, k := range kv.Fields.Keys {
		for _, a := range d.aliases[k] {
			if sc.resolved[a.f] == 0 || a.rank < rank[a.f] {
				sc.resolved[a.f], rank[a.f] = int8(i+1), a.rank
			}
		}
	}
	kv.Resolved = &sc.resolved
	defer func() { sc.keys, sc.vals, sc.used = kv.Fields.Keys, kv.Fields.Vals, kv.Used }()

	e := envelope.Envelope{ID: se.ID, Origin: envelope.Origin{Backend: "redis"}}
	kv.ReadCommon(&e)
	payload, ok := kv.Get(envelope.FPayload)
	if !ok {
		return d.plainDecode(se, lean) // malformed: no payload
	}
	if lean && !kv.Present(envelope.FPayloadEncoding) {
		e.Payload = []byte(payload)
	} else {
		kv.SetPayload(&e, []byte(payload))
	}
	kv.Rest(&e, lean)
	e = kv.Finish(e, nil)
	if e.Malformed != "" {
		return d.plainDecode(se, lean)
	}
	if lean {
		e.PayloadEncoding = ""
	}
	return e
}

// plainDecode is decode through envelope.DecodeFields.
func (d *entryDecoder) plainDecode(se streamEntry, lean bool) envelope.Envelope {
	e := envelope.DecodeFields(se.ID, "redis", se.fieldMap(), d.names)
	if lean {
		e.Properties, e.PayloadEncoding, e.Raw = nil, "", nil
	}
	return e
}
