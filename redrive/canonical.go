package redrive

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// A plan's canonical form must be byte-stable for any input: encoding/json
// writes the bytes of a string that is not valid UTF-8 as U+FFFD, so read
// back it would hash differently and an honest plan would look tampered
// with. Event IDs, keys and destinations come from the DLQ and may be any
// bytes, so an entry carries every such field twice: readable (bad bytes as
// U+FFFD) under its own name, and exact, base64, in exact_base64.

// exactField is one string field of an entry or exclusion that may hold
// bytes that are not UTF-8.
type exactField struct {
	name string
	ptr  *string
}

// toExact replaces every field that is not valid UTF-8 by its readable
// form and returns the exact bytes, base64, by field name (nil when all
// are valid).
func toExact(fields []exactField) map[string]string {
	var exact map[string]string
	for _, f := range fields {
		if utf8.ValidString(*f.ptr) {
			continue
		}
		if exact == nil {
			exact = map[string]string{}
		}
		exact[f.name] = base64.StdEncoding.EncodeToString([]byte(*f.ptr))
		*f.ptr = strings.ToValidUTF8(*f.ptr, "\uFFFD")
	}
	return exact
}

// fromExact puts the exact bytes back.
func fromExact(what string, fields []exactField, exact map[string]string) error {
	for name, b64 := range exact {
		found := false
		for _, f := range fields {
			if f.name != name {
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				return fmt.Errorf("%s: exact_base64.%s: %v", what, name, err)
			}
			if strings.ToValidUTF8(string(raw), "\uFFFD") != *f.ptr {
				return fmt.Errorf("%s: exact_base64.%s does not match %s", what, name, name)
			}
			*f.ptr, found = string(raw), true
		}
		if !found {
			return fmt.Errorf("%s: exact_base64 names an unknown field %q", what, name)
		}
	}
	return nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func (e *Entry) exactFields() []exactField {
	return []exactField{{"id", &e.ID}, {"event_id", &e.EventID}, {"fingerprint", &e.Fingerprint},
		{"key", &e.Key}, {"category", &e.Category}, {"dest", &e.Dest}}
}

// MarshalJSON writes the entry with exact_base64 for fields that are not UTF-8.
func (e Entry) MarshalJSON() ([]byte, error) {
	type plain Entry
	out := struct {
		plain
		Exact map[string]string `json:"exact_base64,omitempty"`
	}{plain: plain(e)}
	p := Entry(out.plain)
	out.Exact = toExact(p.exactFields())
	out.plain = plain(p)
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON wrote, exact bytes included.
func (e *Entry) UnmarshalJSON(b []byte) error {
	type plain Entry
	var in struct {
		plain
		Exact map[string]string `json:"exact_base64"`
	}
	if err := strictUnmarshal(b, &in); err != nil {
		return err
	}
	*e = Entry(in.plain)
	return fromExact(fmt.Sprintf("entry %d", e.Seq), e.exactFields(), in.Exact)
}

func (x *Excluded) exactFields() []exactField {
	return []exactField{{"id", &x.ID}, {"event_id", &x.EventID}, {"why", &x.Why}}
}

// MarshalJSON writes the exclusion with exact_base64 for fields that are not UTF-8.
func (x Excluded) MarshalJSON() ([]byte, error) {
	type plain Excluded
	out := struct {
		plain
		Exact map[string]string `json:"exact_base64,omitempty"`
	}{plain: plain(x)}
	p := Excluded(out.plain)
	out.Exact = toExact(p.exactFields())
	out.plain = plain(p)
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON wrote, exact bytes included.
func (x *Excluded) UnmarshalJSON(b []byte) error {
	type plain Excluded
	var in struct {
		plain
		Exact map[string]string `json:"exact_base64"`
	}
	if err := strictUnmarshal(b, &in); err != nil {
		return err
	}
	*x = Excluded(in.plain)
	return fromExact("excluded entry "+x.ID, x.exactFields(), in.Exact)
}

// checkText refuses plan text that the operator typed (reason, selectors,
// parameters) when it is not UTF-8: it has no exact form in the plan, and
// hashing a lossy copy would make the digest unstable.
func (p *Plan) checkText() error {
	fields := map[string]string{"kind": p.Kind, "reason": p.Reason, "planned_by": p.PlannedBy, "source": p.Source,
		"params.to": p.Params.To, "params.effects": p.Params.Effects, "params.effects_query": p.Params.EffectsQuery,
		"selectors.error": p.Selectors.Error, "selectors.older_than": p.Selectors.OlderThan, "selectors.newer_than": p.Selectors.NewerThan}
	for _, list := range []struct {
		name string
		vals []string
	}{{"selectors.categories", p.Selectors.Categories}, {"selectors.origins", p.Selectors.Origins},
		{"selectors.event_ids", p.Selectors.EventIDs}, {"selectors.owners", p.Selectors.Owners}} {
		for _, v := range list.vals {
			if !utf8.ValidString(v) {
				fields[list.name] = v
			}
		}
	}
	for name, v := range fields {
		if !utf8.ValidString(v) {
			return fmt.Errorf("plan %s %q is not valid UTF-8", name, strings.ToValidUTF8(v, "\uFFFD"))
		}
	}
	return nil
}
