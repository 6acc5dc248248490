package inspect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dlqctl/dlqctl/envelope"
)

// DefaultRedactions are the kinds of personal data `show`, `sample` and
// the browser always redact: each is a word matched in the payload's keys
// (see Redactor), except "name", which matches a person's name only.
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
//
// The default "name" is narrower, since most names in a payload are not
// a person's (a product's, a file's, a host's): it redacts a key that
// names a person's name (first_name, lastName, fullName, surname,
// username, customerName, cardholder) and a bare "name" in an object that
// is not a thing (customer.name, recipient.name, a "name" at the root), but
// not items[].name or product.name (see thingKeys). Given with --redact,
// "name" redacts every key that contains it, as any word does.
type Redactor struct {
	words []string
	paths [][]string
	// personNames: the default "name", matched as a person's name.
	personNames bool
}

// NewRedactor builds a redactor over the default words plus extra.
func NewRedactor(extra []string) Redactor {
	var r Redactor
	add := func(w string) {
		w = strings.TrimSpace(w)
		switch {
		case w == "":
		case strings.Contains(w, "."):
			r.paths = append(r.paths, strings.Split(w, "."))
		default:
			r.words = append(r.words, normalizeKey(w))
		}
	}
	for _, w := range DefaultRedactions() {
		if w == "name" {
			r.personNames = true
			continue
		}
		add(w)
	}
	for _, w := range extra {
		add(w)
	}
	return r
}

// personWords end the part of a key before "name" when the name is a
// person's: the part of a name (first, last, …) or who it belongs to.
var personWords = []string{
	"first", "last", "full", "given", "family", "middle", "sur", "maiden", "legal", "birth", "nick", "display", "user",
	"customer", "client", "contact", "recipient", "receiver", "sender", "buyer", "payer", "payee", "owner", "holder",
	"person", "employee", "patient", "passenger", "guest", "member", "beneficiary", "driver", "consignee", "applicant",
	"account", "billing", "shipping", "shipto", "billto", "signer", "approver", "author",
}

// thingKeys are objects whose "name" is a thing's, not a person's (keys
// normalized, a plural's trailing s dropped).
var thingKeys = []string{
	"item", "lineitem", "line", "product", "article", "sku", "variant", "service", "plan", "carrier", "warehouse",
	"store", "shop", "merchant", "company", "organization", "organisation", "org", "brand", "category", "event",
	"file", "attachment", "bank", "country", "city", "region", "tag", "label", "attribute", "feature", "queue",
	"topic", "stream", "host", "app", "application", "campaign", "promotion", "promo", "coupon", "discount", "tax",
	"fee", "parcel", "package", "offer", "catalog", "course", "project", "team", "department", "currency",
	"method", "type", "status", "tenant", "option", "field", "metric", "model",
}

// personName says whether the key (normalized) names a person's name, in
// an object whose key (normalized; "" at the root) is parent.
func personName(key, parent string) bool {
	switch {
	case key == "surname" || key == "holder" || strings.HasSuffix(key, "cardholder") || strings.HasSuffix(key, "accountholder"):
		return true
	case key == "name":
		return !slices.Contains(thingKeys, strings.TrimSuffix(parent, "s")) && !slices.Contains(thingKeys, parent)
	}
	before, ok := strings.CutSuffix(key, "name")
	if !ok {
		return false
	}
	for _, w := range personWords {
		if strings.HasSuffix(before, w) {
			return true
		}
	}
	return false
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
	if r.personNames {
		parent := ""
		if len(path) > 1 {
			parent = normalizeKey(path[len(path)-2])
		}
		if personName(nk, parent) {
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
