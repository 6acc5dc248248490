package redrive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// Readers of a million-entry plan or journal spent most of their time in
// encoding/json's reflection, once per entry or record. Nearly all of
// those are flat objects of plain strings and integers, written by dlqctl
// itself; a small parser takes exactly that subset and hands anything else
// (an escape, a nested object, a key it does not know, text that is not
// UTF-8, any syntax it does not expect) to encoding/json, so the result is
// always what encoding/json would give, and so are the errors.

// flatValue is one value of a flat object: a string's bytes between its
// quotes (raw, the quotes included), or an integer.
type flatValue struct {
	str   []byte
	raw   []byte
	num   int64
	isNum bool
}

// parseFlat calls fn for each member of the flat object b (whitespace
// allowed around tokens), and reports false, having stopped, as soon as b
// is not such an object or fn returns false.
func parseFlat(b []byte, fn func(key []byte, v flatValue) bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for {
		key, next, ok := plainString(b, i)
		if !ok {
			return false
		}
		i = skipSpace(b, next)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		var v flatValue
		if i < len(b) && b[i] == '"' {
			s, next, ok := plainString(b, i)
			if !ok {
				return false
			}
			v.str, v.raw = s, b[i:next]
			i = next
		} else {
			j := i
			if j < len(b) && b[j] == '-' {
				j++
			}
			start := j
			for j < len(b) && '0' <= b[j] && b[j] <= '9' {
				j++
			}
			if j == start || (b[start] == '0' && j > start+1) {
				return false // not an integer JSON would take as one
			}
			n, err := strconv.ParseInt(string(b[i:j]), 10, 64)
			if err != nil {
				return false
			}
			v.num, v.isNum = n, true
			i = j
		}
		if !fn(key, v) {
			return false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString is the JSON string at b[i] when it has no escapes, no
// control characters and only valid UTF-8 (what encoding/json would read
// as its bytes unchanged), and where it ends.
func plainString(b []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	ascii := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s = b[i+1 : j]
			if !ascii && !utf8.Valid(s) {
				return nil, 0, false
			}
			return s, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, 0, false
}

// decodeRecord reads one journal line into rec: an entry's step record
// by the flat parser, anything else (and anything it does not take) by
// encoding/json.
func decodeRecord(b []byte, rec *Record) error {
	if fastRecord(b, rec) {
		return nil
	}
	*rec = Record{}
	return json.Unmarshal(b, rec)
}

func fastRecord(b []byte, rec *Record) bool {
	*rec = Record{}
	first := true
	return parseFlat(b, func(key []byte, v flatValue) bool {
		if first {
			// Only step records: the type comes first, as dlqctl writes it.
			first = false
			if string(key) != "type" || v.isNum || !isStep(string(v.str)) {
				return false
			}
			rec.Type = string(v.str)
			return true
		}
		if string(key) == "seq" {
			rec.Seq = v.num
			return v.isNum
		}
		if v.isNum {
			return false
		}
		switch string(key) {
		case "at":
			return rec.At.UnmarshalJSON(v.raw) == nil // as encoding/json reads a time
		case "run_id":
			rec.RunID = string(v.str)
		case "id":
			rec.ID = string(v.str)
		case "event_id":
			rec.EventID = string(v.str)
		case "fingerprint":
			rec.Fingerprint = string(v.str)
		case "dest":
			rec.Dest = string(v.str)
		case "dest_id":
			rec.DestID = string(v.str)
		case "note":
			rec.Note = string(v.str)
		case "mac":
			rec.MAC = string(v.str)
		default:
			return false
		}
		return true
	})
}

// fastEntry reads a plan entry that the flat parser takes.
func fastEntry(b []byte, e *Entry) bool {
	*e = Entry{}
	return parseFlat(b, func(key []byte, v flatValue) bool {
		if string(key) == "seq" {
			e.Seq = v.num
			return v.isNum
		}
		if v.isNum {
			return false
		}
		switch string(key) {
		case "id":
			e.ID = string(v.str)
		case "event_id":
			e.EventID = string(v.str)
		case "fingerprint":
			e.Fingerprint = string(v.str)
		case "key":
			e.Key = string(v.str)
		case "category":
			e.Category = string(v.str)
		case "dest":
			e.Dest = string(v.str)
		default:
			return false
		}
		return true
	})
}

// decodeEntry reads one plan entry object, as the plan file holds it.
func decodeEntry(b []byte, e *Entry) error {
	if fastEntry(b, e) {
		return nil
	}
	var w entryWire
	if err := strictUnmarshal(b, &w); err != nil {
		return err
	}
	*e = Entry{Seq: w.Seq, ID: w.ID, EventID: w.EventID, Fingerprint: w.Fingerprint, Key: w.Key, Category: w.Category, Dest: w.Dest}
	if w.Exact != nil {
		return fromExact(fmt.Sprintf("entry %d", e.Seq), e.exactFields(), w.Exact)
	}
	return nil
}

// readEntriesArray reads, from r, the rest of an "entries" member whose
// key a json.Decoder just returned: the colon, then null or an array of
// entry objects, each cut out whole (strings and nesting respected) and
// decoded on its own. It reports whether the list was present.
func readEntriesArray(r *bufio.Reader, add func(Entry)) (present bool, err error) {
	c, err := nextNonSpace(r)
	if err != nil {
		return false, err
	}
	if c != ':' {
		return false, fmt.Errorf("entries: want ':', got %q", c)
	}
	if c, err = nextNonSpace(r); err != nil {
		return false, err
	}
	if c == 'n' {
		rest := make([]byte, 3)
		if _, err := io.ReadFull(r, rest); err != nil || string(rest) != "ull" {
			return false, errors.New("entries: want an array or null")
		}
		return false, nil
	}
	if c != '[' {
		return false, fmt.Errorf("entries: want an array, got %q", c)
	}
	var obj []byte
	for n := 1; ; n++ {
		if c, err = nextNonSpace(r); err != nil {
			return true, err
		}
		if c == ']' && n == 1 {
			return true, nil
		}
		if c != '{' {
			return true, fmt.Errorf("entry %d: want an object, got %q", n, c)
		}
		if obj, err = readObject(r, obj[:0]); err != nil {
			return true, fmt.Errorf("entry %d: %v", n, err)
		}
		var e Entry
		if err := decodeEntry(obj, &e); err != nil {
			return true, fmt.Errorf("entry %d: %v", n, err)
		}
		add(e)
		if c, err = nextNonSpace(r); err != nil {
			return true, err
		}
		switch c {
		case ',':
		case ']':
			return true, nil
		default:
			return true, fmt.Errorf("after entry %d: want ',' or ']', got %q", n, c)
		}
	}
}

func nextNonSpace(r *bufio.Reader) (byte, error) {
	for {
		c, err := r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if c != ' ' && c != '\n' && c != '\t' && c != '\r' {
			return c, nil
		}
	}
}

// readObject appends to dst the object whose '{' was just read, up to and
// including its matching '}'. It scans what r has buffered in place, not a
// byte per call: this loop is most of reading a large plan.
func readObject(r *bufio.Reader, dst []byte) ([]byte, error) {
	dst = append(dst, '{')
	depth, inString, escaped := 1, false, false
	for depth > 0 {
		if r.Buffered() == 0 {
			if _, err := r.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return nil, err
			}
		}
		buf, _ := r.Peek(r.Buffered())
		i := 0
		for ; i < len(buf) && depth > 0; i++ {
			c := buf[i]
			switch {
			case inString && escaped:
				escaped = false
			case inString && c == '\\':
				escaped = true
			case inString && c == '"':
				inString = false
			case inString:
			case c == '"':
				inString = true
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				depth--
			}
		}
		dst = append(dst, buf[:i]...)
		if _, err := r.Discard(i); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// withOpenBrace makes the rest of an object, after a member, readable by
// a fresh json.Decoder as an object of its own: the ',' before the next
// member becomes '{'. It reports false at the object's closing brace.
func withOpenBrace(r *bufio.Reader) (io.Reader, bool, error) {
	c, err := nextNonSpace(r)
	if err != nil {
		return nil, false, err
	}
	switch c {
	case '}':
		return nil, false, nil
	case ',':
		return io.MultiReader(bytes.NewReader([]byte{'{'}), r), true, nil
	}
	return nil, false, fmt.Errorf("after entries: want ',' or '}', got %q", c)
}
