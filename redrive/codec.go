package redrive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// A plan file is written, read and hashed entry by entry: a million-entry
// plan is a few hundred megabytes of JSON, and holding it whole (to read
// it, to hash it, to write it) cost more memory than the plan itself.
//
// The bytes are those encoding/json wrote for the Plan struct, so that the
// digests of existing plans still verify and the file reads as before:
// the fields before the entries (planHead) and after them (planTail) go
// through encoding/json as they always did; each entry is written as
// Entry.MarshalJSON writes it, by hand when its text needs no escaping at
// all (the usual case, and the cost of the whole), else by MarshalJSON.

// planHead is Plan's fields before Entries, in the same order and names.
type planHead struct {
	Schema    string    `json:"schema"`
	Kind      string    `json:"kind"`
	Digest    string    `json:"digest"`
	Reason    string    `json:"reason"`
	PlannedBy string    `json:"planned_by"`
	PlannedAt time.Time `json:"planned_at"`
	Source    string    `json:"source"`
	Params    Params    `json:"params"`
	Selectors Selectors `json:"selectors"`
}

// planTail is Plan's fields after Entries.
type planTail struct {
	Excluded  []Excluded `json:"excluded"`
	Approvals []Approval `json:"approvals"`
}

// encode writes the plan as json.Marshal (indent false: the canonical
// form) or as a json.Encoder with two-space indent and HTML escaping off
// (indent true: the plan file) would write it.
func (p *Plan) encode(w *bufio.Writer, indent bool) error {
	head := planHead{Schema: p.Schema, Kind: p.Kind, Digest: p.Digest, Reason: p.Reason, PlannedBy: p.PlannedBy,
		PlannedAt: p.PlannedAt, Source: p.Source, Params: p.Params, Selectors: p.Selectors}
	hb, err := marshalPart(head, indent)
	if err != nil {
		return err
	}
	tb, err := marshalPart(planTail{Excluded: p.Excluded, Approvals: p.Approvals}, indent)
	if err != nil {
		return err
	}
	// The head without its closing brace, the entries, then the tail
	// without its opening one.
	if indent {
		hb = bytes.TrimSuffix(hb, []byte("\n}"))
		w.Write(hb)
		w.WriteString(",\n  \"entries\": ")
	} else {
		w.Write(hb[:len(hb)-1])
		w.WriteString(`,"entries":`)
	}
	if err := p.Entries.encode(w, indent); err != nil {
		return err
	}
	w.WriteByte(',')
	w.Write(tb[1:])
	if indent {
		w.WriteByte('\n')
	}
	return nil
}

// marshalPart is v as json.Marshal writes it, or indented as the plan file
// is (without the encoder's final newline).
func marshalPart(v any, indent bool) ([]byte, error) {
	if !indent {
		return json.Marshal(v)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// encode writes the entries array (null when absent).
func (es *Entries) encode(w *bufio.Writer, indent bool) error {
	if !es.Present() {
		w.WriteString("null")
		return nil
	}
	if es.Len() == 0 {
		w.WriteString("[]")
		return nil
	}
	w.WriteByte('[')
	var b []byte
	var err error
	for i := range es.Len() {
		if i > 0 {
			w.WriteByte(',')
		}
		if indent {
			w.WriteString("\n    ")
		}
		if b, err = appendEntry(b[:0], es.At(i), indent); err != nil {
			return err
		}
		w.Write(b)
	}
	if indent {
		w.WriteString("\n  ")
	}
	w.WriteByte(']')
	return nil
}

// MarshalJSON writes the entries as the array of Entry they stand for.
func (es Entries) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := es.encode(w, false); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// UnmarshalJSON reads an array of Entry (or null).
func (es *Entries) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	*es = Entries{}
	return es.decode(dec)
}

// appendEntry writes e as Entry.MarshalJSON does, indented as an element
// of the plan file's entries when indent is set.
func appendEntry(b []byte, e Entry, indent bool) ([]byte, error) {
	if !plainText(e.ID) || !plainText(e.EventID) || !plainText(e.Fingerprint) || !plainText(e.Key) || !plainText(e.Category) || !plainText(e.Dest) {
		one, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		if !indent {
			return append(b, one...), nil
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, one, "    ", "  "); err != nil {
			return nil, err
		}
		return append(b, buf.Bytes()...), nil
	}
	sep, colon, end := `,"`, `":`, `}`
	if indent {
		sep, colon, end = ",\n      \"", `": `, "\n    }"
	}
	if indent {
		b = append(b, "{\n      \"seq"...)
	} else {
		b = append(b, `{"seq`...)
	}
	b = append(b, colon...)
	b = strconv.AppendInt(b, e.Seq, 10)
	field := func(name, v string) {
		b = append(b, sep...)
		b = append(b, name...)
		b = append(b, colon...)
		b = append(b, '"')
		b = append(b, v...)
		b = append(b, '"')
	}
	field("id", e.ID)
	field("event_id", e.EventID)
	field("fingerprint", e.Fingerprint)
	if e.Key != "" {
		field("key", e.Key)
	}
	field("category", e.Category)
	if e.Dest != "" {
		field("dest", e.Dest)
	}
	return append(b, end...), nil
}

// plainText says whether encoding/json writes s as it is between quotes:
// printable ASCII that is neither a quote, a backslash nor one of the
// characters it escapes for HTML.
func plainText(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// entryWire is an entry as the plan file holds it.
type entryWire struct {
	Seq         int64             `json:"seq"`
	ID          string            `json:"id"`
	EventID     string            `json:"event_id"`
	Fingerprint string            `json:"fingerprint"`
	Key         string            `json:"key"`
	Category    string            `json:"category"`
	Dest        string            `json:"dest"`
	Exact       map[string]string `json:"exact_base64"`
}

// decode reads the entries array from dec, one entry at a time (for
// UnmarshalJSON; a plan file is read by readEntriesArray).
func (es *Entries) decode(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		return nil // null: absent
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("entries: want an array, got %v", tok)
	}
	es.made = true
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("entry %d: %v", es.Len()+1, err)
		}
		var e Entry
		if err := decodeEntry(raw, &e); err != nil {
			return fmt.Errorf("entry %d: %v", es.Len()+1, err)
		}
		es.Append(e)
	}
	_, err = dec.Token() // ]
	return err
}

// decodePlan reads a plan field by field. The entries are read by
// readEntriesArray, one object at a time into the compact form, never as
// one value: at the "entries" key the json.Decoder hands over what it
// buffered and the rest of the input, and a fresh one takes the members
// after the array.
func decodePlan(src io.Reader) (*Plan, error) {
	dec, err := openObject(src)
	if err != nil {
		return nil, err
	}
	p := &Plan{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		if name == "entries" {
			rest, more, err := p.decodeEntries(dec, src)
			if err != nil {
				return nil, err
			}
			if !more {
				return p, nil
			}
			src = rest
			if dec, err = openObject(src); err != nil {
				return nil, err
			}
			continue
		}
		dst := p.headField(name)
		if dst == nil {
			return nil, fmt.Errorf("json: unknown field %q", name)
		}
		if err := dec.Decode(dst); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the plan's closing brace")
	}
	return p, nil
}

// openObject is a strict decoder of r past the "{" that opens an object.
func openObject(r io.Reader) (*json.Decoder, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("want a JSON object, got %v", tok)
	}
	return dec, nil
}

// headField is where the plan member name is decoded to; nil for a name
// a plan does not have. "entries" is read by decodeEntries.
func (p *Plan) headField(name string) any {
	switch name {
	case "schema":
		return &p.Schema
	case "kind":
		return &p.Kind
	case "digest":
		return &p.Digest
	case "reason":
		return &p.Reason
	case "planned_by":
		return &p.PlannedBy
	case "planned_at":
		return &p.PlannedAt
	case "source":
		return &p.Source
	case "params":
		return &p.Params
	case "selectors":
		return &p.Selectors
	case "excluded":
		return &p.Excluded
	case "approvals":
		return &p.Approvals
	}
	return nil
}

// decodeEntries reads the "entries" array, whose key dec has just read,
// from what dec buffered and the rest of src. more says members follow
// it: rest then reads them as an object of their own. Without more the
// plan ended with the array, and nothing may follow its closing brace.
func (p *Plan) decodeEntries(dec *json.Decoder, src io.Reader) (rest io.Reader, more bool, err error) {
	br := bufio.NewReaderSize(io.MultiReader(dec.Buffered(), src), 1<<16)
	p.Entries = Entries{}
	present, err := readEntriesArray(br, p.Entries.Append)
	if err != nil {
		return nil, false, err
	}
	p.Entries.made = present
	rest, more, err = withOpenBrace(br)
	if err != nil {
		return nil, false, err
	}
	if !more {
		if _, err := nextNonSpace(br); !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, false, errors.New("data after the plan's closing brace")
		}
	}
	return rest, more, nil
}
