package redisstream

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/envelope/envelopetest"
	"github.com/redis/go-redis/v9"
)

// appendXRange writes entries as Redis answers XRANGE in RESP2, each name
// and value a bulk string: the fuzz test's reference encoder.
func appendXRange(b []byte, entries []streamEntry) []byte {
	bulk := func(b []byte, s string) []byte {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, "\r\n"...)
		b = append(b, s...)
		return append(b, "\r\n"...)
	}
	b = fmt.Appendf(b, "*%d\r\n", len(entries))
	for _, e := range entries {
		b = append(b, "*2\r\n"...)
		b = bulk(b, e.ID)
		b = fmt.Appendf(b, "*%d\r\n", len(e.Fields))
		for _, f := range e.Fields {
			b = bulk(b, f)
		}
	}
	return b
}

// parseXRange is rawPage.parse with every entry copied out.
func parseXRange(b []byte) ([]streamEntry, error) {
	var p rawPage
	if err := p.parse(b); err != nil {
		return nil, err
	}
	out := make([]streamEntry, p.len())
	for i := range out {
		out[i] = p.entry(i)
	}
	return out, nil
}

// readPage reads one page with the pager, every entry copied out.
func readPage(ctx context.Context, pg *pager, start, end string, count int64) ([]streamEntry, error) {
	n, err := pg.next(ctx, start, end, count)
	if err != nil {
		return nil, err
	}
	out := make([]streamEntry, n)
	for i := range out {
		out[i] = pg.entry(i)
		if pg.id(i) != out[i].ID {
			return nil, fmt.Errorf("id(%d) = %q, entry's %q", i, pg.id(i), out[i].ID)
		}
		for k := 0; k < len(out[i].Fields); k += 2 {
			if v, ok := pg.lookup(i, out[i].Fields[k]); !ok || v != out[i].fieldMap()[out[i].Fields[k]] {
				return nil, fmt.Errorf("entry %s: lookup(%q) = %q, %v", out[i].ID, out[i].Fields[k], v, ok)
			}
		}
	}
	return out, nil
}

// sameEntries says where two pages differ, by id and by fields as a map
// (the plain form's fields come from a map: no order, no repeats).
func sameEntries(fast, plain []streamEntry) string {
	if len(fast) != len(plain) {
		return fmt.Sprintf("%d entries, plain %d", len(fast), len(plain))
	}
	for i := range fast {
		if fast[i].ID != plain[i].ID {
			return fmt.Sprintf("entry %d: id %q, plain %q", i, fast[i].ID, plain[i].ID)
		}
		if f, p := fast[i].fieldMap(), plain[i].fieldMap(); !maps.Equal(f, p) {
			return fmt.Sprintf("entry %s: fields %q, plain %q", fast[i].ID, f, p)
		}
	}
	return ""
}

// TestXRangeFastEqualsPlain holds the two page readers equal on a real
// server, over both protocols go-redis speaks, on entries chosen to trip a
// hand-written parser: repeated names, empty and binary values, CRLF and
// RESP type bytes inside values, values longer than the client's read
// buffer, and a page boundary in the middle.
func TestXRangeFastEqualsPlain(t *testing.T) {
	ctx := context.Background()
	k := key(t, "dlq")
	rdb := shared.Client()
	values := [][]any{
		{"event_id", "E1", "payload", `{"a":1}`},
		{"event_id", "E2", "event_id", "E2-again", "payload", "p"},
		{"empty", "", "payload", ""},
		{"bin", "\x00\xff\r\n*2\r\n$3\r\n", "payload", "+OK\r\n-ERR\r\n"},
		{"big", strings.Repeat("x", 100_000), "payload", strings.Repeat("é", 40_000)},
		{"n", 42, "f", 1.5},
		{"ünïcode ключ", "значение", "payload", "🙂"},
	}
	for i := range 2500 {
		values = append(values, []any{"event_id", "E" + strconv.Itoa(i), "fingerprint", fmt.Sprintf("sha256:%064x", i), "payload", strings.Repeat("p", i%300)})
	}
	for _, v := range values {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: k, Values: v}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			s := openStream(t, shared.URL(0, k), Options{PageSize: 1000})
			s.rdb.Close()
			s.rdb = redis.NewClient(&redis.Options{Addr: shared.Addr(), Protocol: proto, DisableIdentity: true})
			var all int
			pg := &pager{s: s}
			for _, r := range []idRange{{"-", "+"}, {"-", "(0-1"}} {
				start := r.start
				for {
					fast, err := readPage(ctx, pg, start, r.end, 1000)
					if err != nil {
						t.Fatal(err)
					}
					if pg.plain != nil {
						t.Fatalf("from %s: the fast reader fell back to the plain one", start)
					}
					plain, err := s.xrangePlain(ctx, start, r.end, 1000)
					if err != nil {
						t.Fatal(err)
					}
					if d := sameEntries(fast, plain); d != "" {
						t.Fatalf("from %s: %s", start, d)
					}
					all += len(fast)
					if len(fast) < 1000 {
						break
					}
					start = "(" + fast[len(fast)-1].ID
				}
			}
			if all != len(values) {
				t.Fatalf("read %d entries, want %d", all, len(values))
			}
		})
	}
}

// TestXRangeParsesRepeatedNamesInOrder: the fast form keeps every field
// as the server sent it, and the last value of a name is the one read.
// TestKeptIDsLeaveEntriesGo keeps the id of every entry of a page, as
// discover's groups do, and checks that the entries' text goes: an id that
// was a slice of its entry's text kept each payload alive.
func TestKeptIDsLeaveEntriesGo(t *testing.T) {
	const entries, payload = 200, 64 << 10
	keep := func() []string {
		in := make([]streamEntry, entries)
		for i := range in {
			in[i] = streamEntry{ID: fmt.Sprintf("1700000000000-%d", i), Fields: []string{"payload", strings.Repeat("x", payload)}}
		}
		var p rawPage
		if err := p.parse(appendXRange(nil, in)); err != nil {
			t.Fatal(err)
		}
		ids := make([]string, p.len())
		for i := range ids {
			ids[i] = p.entry(i).ID
		}
		return ids
	}
	ids, grew := envelopetest.Retained(keep)
	if grew > 1<<20 {
		t.Errorf("keeping %d ids kept %d bytes on the heap; the entries' %d-byte payloads stayed with them", len(ids), grew, payload)
	}
}

func TestXRangeParsesRepeatedNamesInOrder(t *testing.T) {
	in := []streamEntry{{ID: "1-0", Fields: []string{"a", "1", "b", "2", "a", "3"}}}
	got, err := parseXRange(appendXRange(nil, in))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(in) {
		t.Fatalf("got %q, want %q", got, in)
	}
	var p rawPage
	if err := p.parse(appendXRange(nil, in)); err != nil {
		t.Fatal(err)
	}
	if v, _ := p.lookup(0, "a"); string(v) != "3" || got[0].fieldMap()["a"] != "3" {
		t.Fatalf("a = %q / %q, want the last value 3", v, got[0].fieldMap()["a"])
	}
}

// TestParseXRangeRefusesWhatItDoesNotKnow: error replies, truncated
// replies, wrong shapes and trailing bytes are errors (the caller then
// reads the page the plain way), never a panic or a short page.
func TestParseXRangeRefusesWhatItDoesNotKnow(t *testing.T) {
	good := appendXRange(nil, []streamEntry{{ID: "1-0", Fields: []string{"a", "b"}}})
	for _, b := range []string{
		"-ERR wrong\r\n",
		"-MOVED 3999 127.0.0.1:6381\r\n",
		string(good[:len(good)-1]),
		string(good) + "x",
		"*1\r\n*3\r\n$3\r\n1-0\r\n*0\r\n:1\r\n",
		"*1\r\n*2\r\n$3\r\n1-0\r\n*1\r\n$1\r\na\r\n",
		"*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n:1\r\n:2\r\n",
		"*1\r\n*2\r\n$9\r\n1-0\r\n*0\r\n",
		"*99999999999\r\n",
		"*-2\r\n",
		"",
	} {
		if got, err := parseXRange([]byte(b)); err == nil {
			t.Errorf("parseXRange(%q) = %q, want an error", b, got)
		}
	}
	// Nulls and RESP3 forms it does know.
	for b, want := range map[string]int{
		"*0\r\n":  0,
		"*-1\r\n": 0,
		"_\r\n":   0,
		"*1\r\n*2\r\n+1-0\r\n%1\r\n$1\r\na\r\n$1\r\nb\r\n": 1,
		"*1\r\n*2\r\n$3\r\n1-0\r\n*-1\r\n":                 1,
	} {
		got, err := parseXRange([]byte(b))
		if err != nil || len(got) != want {
			t.Errorf("parseXRange(%q) = %q, %v; want %d entries", b, got, err, want)
		}
	}
}

// FuzzParseXRange: whatever the bytes, the parser does not panic; and
// entries encoded as Redis encodes them read back exactly.
func FuzzParseXRange(f *testing.F) {
	f.Add([]byte("1-0"), []byte("event_id"), []byte("E1"), uint8(2), []byte("*1\r\n*2\r\n$3\r\n1-0\r\n*0\r\n"))
	f.Add([]byte("99-7"), []byte("\r\n"), []byte("$5\r\n"), uint8(9), []byte("_\r\n"))
	f.Fuzz(func(t *testing.T, id, name, value []byte, n uint8, arbitrary []byte) {
		_, _ = parseXRange(arbitrary)
		var in []streamEntry
		for i := range int(n % 8) {
			e := streamEntry{ID: string(id) + strconv.Itoa(i)}
			for j := range i % 4 {
				e.Fields = append(e.Fields, string(name)+strconv.Itoa(j), strings.Repeat(string(value), j))
			}
			in = append(in, e)
		}
		got, err := parseXRange(appendXRange(nil, in))
		if err != nil {
			t.Fatalf("parseXRange of %q: %v", in, err)
		}
		if len(got) != len(in) {
			t.Fatalf("%d entries, want %d", len(got), len(in))
		}
		for i := range in {
			if got[i].ID != in[i].ID || fmt.Sprint(got[i].Fields) != fmt.Sprint(in[i].Fields) || len(got[i].Fields) != len(in[i].Fields) {
				t.Fatalf("entry %d: %q, want %q", i, got[i], in[i])
			}
		}
	})
}
