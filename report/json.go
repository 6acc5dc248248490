package report

import (
	"encoding/json"
	"io"
)

// WriteJSON writes v as one JSON document indented by two spaces, with a
// trailing newline. HTML escaping is off so that "<", ">" and "&" in payloads
// and errors come out as written, not as \u003c.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteNDJSON writes v as one compact JSON line (export, streaming), HTML
// escaping off as in WriteJSON.
func WriteNDJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
