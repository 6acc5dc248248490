package redisstream

import (
	"bytes"
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Reading a page of the stream has two forms behind one seam (pager):
//
//   - the plain one, go-redis's XRangeN, which parses the reply into a
//     map[string]any per entry: a string, an interface box and a map
//     slot per field, then stringFields copies the map again;
//   - the fast one, which has go-redis copy the reply's raw RESP bytes
//     into a buffer the pager keeps from page to page, and parses them
//     here: an entry's text is copied once, into one string that its
//     names and values are slices of, and a reader that needs only an
//     entry's id and fingerprint copies only those.
//
// The fast form is what the scans use: parsing go-redis's reply was most
// of the client's CPU in `stats` and in an apply's staleness read. Both
// give the same entries (TestXRangeFastEqualsPlain on a real server,
// FuzzParseXRange for the parser); a reply the fast parser does not
// recognise (an error reply, which go-redis acts on: MOVED, LOADING) and a
// failed round trip are read again the plain way, so whatever is unusual
// behaves as before.

// streamEntry is one stream entry: its id and its fields in the order the
// server holds them, names and values alternating. A name may repeat (XADD
// accepts it); readers take the last value, as go-redis's map does.
type streamEntry struct {
	ID     string
	Fields []string
}

// fieldMap is the entry's fields by name, the last value of a repeated
// name winning.
func (e streamEntry) fieldMap() map[string]string {
	m := make(map[string]string, len(e.Fields)/2)
	for i := 0; i+1 < len(e.Fields); i += 2 {
		m[e.Fields[i]] = e.Fields[i+1]
	}
	return m
}

// pager reads one range of the stream page by page; it is not safe for
// concurrent use (each reader of a range has its own).
type pager struct {
	s     *Stream
	buf   bytes.Buffer // the last page's raw reply
	page  rawPage
	plain []streamEntry // the last page, when it was read the plain way
}

// next reads up to count entries from start to end (XRANGE key start end
// COUNT count) and returns how many; id, lookup and entry read the i-th
// of them until the next call.
func (pg *pager) next(ctx context.Context, start, end string, count int64) (int, error) {
	pg.plain = nil
	if !pg.s.plainPages {
		pg.buf.Reset()
		cmd := redis.NewRawWriteToCmd(ctx, &pg.buf, "xrange", pg.s.key, start, end, "count", count)
		if err := pg.s.rdb.Process(ctx, cmd); err == nil {
			if err := pg.page.parse(pg.buf.Bytes()); err == nil {
				return pg.page.len(), nil
			}
		} else if ctx.Err() != nil {
			return 0, err
		}
	}
	plain, err := pg.s.xrangePlain(ctx, start, end, count)
	if err != nil {
		return 0, err
	}
	pg.plain = plain
	return len(plain), nil
}

// id is the i-th entry's id, copied.
func (pg *pager) id(i int) string {
	if pg.plain != nil {
		return pg.plain[i].ID
	}
	return string(pg.page.id(i))
}

// lookup is the last value of the i-th entry's field name, copied.
func (pg *pager) lookup(i int, name string) (string, bool) {
	if pg.plain != nil {
		for j := len(pg.plain[i].Fields) - 2; j >= 0; j -= 2 {
			if pg.plain[i].Fields[j] == name {
				return pg.plain[i].Fields[j+1], true
			}
		}
		return "", false
	}
	v, ok := pg.page.lookup(i, name)
	return string(v), ok
}

// entry is the i-th entry with its text copied once.
func (pg *pager) entry(i int) streamEntry {
	if pg.plain != nil {
		return pg.plain[i]
	}
	return pg.page.entry(i)
}

// xrangePlain is a page through go-redis's own parser.
func (s *Stream) xrangePlain(ctx context.Context, start, end string, count int64) ([]streamEntry, error) {
	msgs, err := s.rdb.XRangeN(ctx, s.key, start, end, count).Result()
	if err != nil {
		return nil, err
	}
	out := make([]streamEntry, len(msgs))
	for i, m := range msgs {
		out[i] = plainEntry(m)
	}
	return out, nil
}

// plainEntry is a go-redis message as a streamEntry: its fields come from
// a map, so in no particular order and without repeated names.
func plainEntry(m redis.XMessage) streamEntry {
	e := streamEntry{ID: m.ID, Fields: make([]string, 0, 2*len(m.Values))}
	for k, v := range stringFields(m.Values) {
		e.Fields = append(e.Fields, k, v)
	}
	return e
}

var errUnexpectedReply = errors.New("unexpected XRANGE reply")

// rawPage is a parsed XRANGE reply: where each entry's id, names and
// values are in the reply's bytes. Its slices are kept from page to page.
type rawPage struct {
	b []byte
	// entries[i] is the i-th entry: the start and end of its text in b,
	// and its strings' places in spans.
	entries []rawEntry
	// spans are from,to pairs into b: an entry's id, then its names and
	// values alternating.
	spans []int
}

type rawEntry struct{ from, to, first, last int }

func (p *rawPage) len() int { return len(p.entries) }

func (p *rawPage) str(k int) []byte { return p.b[p.spans[2*k]:p.spans[2*k+1]] }

func (p *rawPage) id(i int) []byte { return p.str(p.entries[i].first) }

// lookup is the last value of the i-th entry's field name, in b.
func (p *rawPage) lookup(i int, name string) ([]byte, bool) {
	e := p.entries[i]
	for k := e.last - 2; k > e.first; k -= 2 {
		if string(p.str(k)) == name {
			return p.str(k + 1), true
		}
	}
	return nil, false
}

// entry copies the i-th entry's text into one string; its names and
// values are slices of it, so that what a reader keeps of an entry keeps
// that entry alive, not the page. The id is a string of its own: it is
// what readers keep of every entry (discover's groups keep the id of each
// entry they count), and as a slice of the text it kept every entry's
// payload alive too: 1.7 GB at 1,000,000 entries instead of 245 MiB.
func (p *rawPage) entry(i int) streamEntry {
	e := p.entries[i]
	text := string(p.b[e.from:e.to])
	at := func(k int) string { return text[p.spans[2*k]-e.from : p.spans[2*k+1]-e.from] }
	out := streamEntry{ID: string(p.id(i))}
	if n := e.last - e.first - 1; n > 0 {
		out.Fields = make([]string, n)
		for k := range n {
			out.Fields[k] = at(e.first + 1 + k)
		}
	}
	return out
}

// parse reads the raw RESP2 or RESP3 reply of XRANGE: an array of
// entries, each an array of the id and an array (or RESP3 map) of names
// and values. Anything else, an error reply included, is an error.
func (p *rawPage) parse(b []byte) error {
	*p = rawPage{b: b, entries: p.entries[:0], spans: p.spans[:0]}
	r := respReader{b: b}
	n, err := r.aggregate('*')
	if err != nil {
		return err
	}
	for range max(n, 0) {
		if err := p.parseEntry(&r); err != nil {
			return err
		}
	}
	if r.i != len(b) {
		return errUnexpectedReply
	}
	return nil
}

// parseEntry reads one [id, [name, value, …]].
func (p *rawPage) parseEntry(r *respReader) error {
	if n, err := r.aggregate('*'); err != nil || n != 2 {
		return errUnexpectedReply
	}
	e := rawEntry{from: r.i, first: len(p.spans) / 2}
	from, to, err := r.str()
	if err != nil {
		return err
	}
	p.spans = append(p.spans, from, to)
	k, err := r.aggregate('*')
	k = max(k, 0) // a null: an entry without fields
	if err != nil || k%2 != 0 || k > len(r.b)-r.i {
		return errUnexpectedReply
	}
	for range k {
		from, to, err := r.str()
		if err != nil {
			return err
		}
		p.spans = append(p.spans, from, to)
	}
	e.to, e.last = r.i, len(p.spans)/2
	p.entries = append(p.entries, e)
	return nil
}

// respReader reads RESP values from b, from i on.
type respReader struct {
	b []byte
	i int
}

// header reads a type byte and the number after it (a length or a count;
// -1 for a null).
func (r *respReader) header() (typ byte, n int, err error) {
	if r.i >= len(r.b) {
		return 0, 0, errUnexpectedReply
	}
	typ = r.b[r.i]
	j := r.i + 1
	neg := j < len(r.b) && r.b[j] == '-'
	if neg {
		j++
	}
	digits := 0
	for ; j < len(r.b) && r.b[j] >= '0' && r.b[j] <= '9'; j++ {
		if digits == 10 {
			return 0, 0, errUnexpectedReply
		}
		n = n*10 + int(r.b[j]-'0')
		digits++
	}
	switch {
	case typ == '_' && digits == 0 && !neg:
		n = -1 // RESP3 null
	case digits == 0 || neg && n != 1:
		return 0, 0, errUnexpectedReply
	case neg:
		n = -1
	}
	if j+1 >= len(r.b) || r.b[j] != '\r' || r.b[j+1] != '\n' {
		return 0, 0, errUnexpectedReply
	}
	r.i = j + 2
	return typ, n, nil
}

// aggregate reads the header of an array, or of a RESP3 map (its pairs
// counted as two elements): the number of elements, -1 for a null.
func (r *respReader) aggregate(want byte) (int, error) {
	typ, n, err := r.header()
	switch {
	case err != nil:
		return 0, err
	case typ == '_' || n < 0 && (typ == '*' || typ == '%'):
		return -1, nil
	case typ == want:
		return n, nil
	case typ == '%' && want == '*':
		if n > (len(r.b)-r.i)/2 {
			return 0, errUnexpectedReply
		}
		return 2 * n, nil
	}
	return 0, errUnexpectedReply
}

// str reads a bulk or simple string and gives where its bytes are.
func (r *respReader) str() (from, to int, err error) {
	if r.i < len(r.b) && r.b[r.i] == '+' {
		end := bytes.Index(r.b[r.i:], []byte("\r\n"))
		if end < 0 {
			return 0, 0, errUnexpectedReply
		}
		from, to = r.i+1, r.i+end
		r.i = to + 2
		return from, to, nil
	}
	typ, n, err := r.header()
	if err != nil || typ != '$' || n < 0 || n > len(r.b)-r.i-2 {
		return 0, 0, errUnexpectedReply
	}
	from, to = r.i, r.i+n
	if r.b[to] != '\r' || r.b[to+1] != '\n' {
		return 0, 0, errUnexpectedReply
	}
	r.i = to + 2
	return from, to, nil
}
