package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ImportedFromProperty marks a message or entry written by dlqctl import;
// its value is the envelope's id where it came from.
const ImportedFromProperty = "dlqctl_source_id"

// EventIDSource says where an entry's event ID is read from
// (--event-id-from property:NAME | json:PATH | key; a backend may spell
// property as header or attribute and parse its own forms into this).
type EventIDSource struct {
	Kind string // "property" (default, names event_id then eventId), "json" or "key"
	Name string // property name or dotted JSON path
}

// ParseEventIDSource parses --event-id-from.
func ParseEventIDSource(s string) (EventIDSource, error) {
	if s == "" {
		return EventIDSource{Kind: "property"}, nil
	}
	if s == "key" {
		return EventIDSource{Kind: "key"}, nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if ok && name != "" && (kind == "property" || kind == "json") {
		return EventIDSource{Kind: kind, Name: name}, nil
	}
	return EventIDSource{}, fmt.Errorf("--event-id-from %q: want property:NAME, json:PATH or key", s)
}

func (s EventIDSource) EventID(key string, props FieldStore, payload []byte, names FieldNames) (string, error) {
	switch s.Kind {
	case "key":
		if key == "" {
			return "", fmt.Errorf("no message key to take the event ID from")
		}
		if !utf8.ValidString(key) {
			return "", fmt.Errorf("message key: invalid UTF-8")
		}
		return key, nil
	case "json":
		return EventIDAtJSONPath(payload, s.Name)
	}
	candidates := names[FieldEventID]
	if s.Name != "" {
		candidates = []string{s.Name}
	}
	for _, n := range candidates {
		if v, _ := props.Lookup(n); v != "" {
			return v, nil
		}
	}
	return "", fmt.Errorf("no event ID property (looked for %s)", strings.Join(candidates, ", "))
}

// EventIDAtJSONPath reads an event ID, a string or a number, at a dotted
// path in a JSON payload (--event-id-from json:PATH); decoders share it.
func EventIDAtJSONPath(payload []byte, path string) (string, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber() // a large numeric ID keeps every digit
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("event ID path %q: payload is not JSON", path)
	}
	for _, part := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return "", fmt.Errorf("event ID path %q: %q is not inside an object", path, part)
		}
		if v, ok = obj[part]; !ok {
			return "", fmt.Errorf("event ID path %q: no field %q", path, part)
		}
	}
	switch t := v.(type) {
	case string:
		if t != "" {
			return t, nil
		}
	case json.Number:
		return t.String(), nil
	}
	return "", fmt.Errorf("event ID path %q: not a string or number", path)
}

// SetProperty sets one property of e, making the map when it has none.
func SetProperty(e *Envelope, k, v string) {
	if e.Properties == nil {
		e.Properties = map[string]string{}
	}
	e.Properties[k] = v
}
