package inspect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dlqctl/dlqctl/envelope"
)

// DefaultRedactions are the field names `sample` always redacts.
func DefaultRedactions() []string {
	return []string{"email", "phone", "name", "address", "card", "ssn", "password", "token"}
}

// Redacted is what replaces a redacted value.
const Redacted = "[redacted]"

// Redactor hides personal data in payloads before they are shown.
//
// A bare word (email) redacts every object key that contains it, ignoring
// case, "_" and "-" (customer_email, emailAddress); a dotted path (a.b)
// redacts exactly that path from the payload's root. Payloads that are not
// JSON cannot be redacted field by field, so they are replaced whole.
type Redactor struct {
	words []string
	paths [][]string
}

// NewRedactor builds a redactor over the default words plus extra.
func NewRedactor(extra []string) Redactor {
	var r Redactor
	for _, w := range append(DefaultRedactions(), extra...) {
		w = strings.TrimSpace(w)
		switch {
		case w == "":
		case strings.Contains(w, "."):
			r.paths = append(r.paths, strings.Split(w, "."))
		default:
			r.words = append(r.words, normalizeKey(w))
		}
	}
	return r
}

func normalizeKey(k string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(k))
}

// Envelope returns e with its payload redacted.
func (r Redactor) Envelope(e envelope.Envelope) envelope.Envelope {
	e.Raw = nil
	if e.PayloadEncoding != envelope.EncodingJSON {
		e.Payload = []byte(fmt.Sprintf("%s (%d bytes of %s, not JSON: hidden whole)", Redacted, len(e.Payload), e.PayloadEncoding))
		e.PayloadEncoding = envelope.EncodingUTF8
		return e
	}
	dec := json.NewDecoder(bytes.NewReader(e.Payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		e.Payload = []byte(Redacted)
		e.PayloadEncoding = envelope.EncodingUTF8
		return e
	}
	v = r.walk(v, nil)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // values decoded from JSON always encode
	e.Payload = bytes.TrimRight(buf.Bytes(), "\n")
	return e
}

func (r Redactor) walk(v any, path []string) any {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			p := append(path[:len(path):len(path)], k)
			if r.hides(k, p) {
				t[k] = Redacted
				continue
			}
			t[k] = r.walk(child, p)
		}
	case []any:
		for i, child := range t {
			t[i] = r.walk(child, path)
		}
	}
	return v
}

func (r Redactor) hides(key string, path []string) bool {
	nk := normalizeKey(key)
	for _, w := range r.words {
		if strings.Contains(nk, w) {
			return true
		}
	}
	for _, p := range r.paths {
		if slices.Equal(p, path) {
			return true
		}
	}
	return false
}
