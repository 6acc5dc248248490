package redrive

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendStep writes an entry's step record (intent, published, removed …)
// as JSON, the same fields encoding/json would write for it. A run writes
// three of these per entry, and reflection made them a fifth of apply's
// CPU; every other record goes through encoding/json. It reports false for
// a record it does not handle.
func appendStep(b []byte, r Record) ([]byte, bool) {
	if r.Plan != nil || r.Approval != nil || r.Approvals != nil || r.Envelope != nil || r.Batch != nil || r.Seqs != nil ||
		r.PlanPath != "" || r.PlanDigest != "" || r.Source != "" || r.Watermark != "" || r.AppliedBy != "" || r.Status != "" || r.HaltedBy != "" || r.Moved != 0 {
		return b, false
	}
	b = append(b, `{"type":`...)
	b = appendString(b, r.Type)
	if !r.At.IsZero() {
		b = append(b, `,"at":"`...)
		b = r.At.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if r.RunID != "" {
		b = append(b, `,"run_id":`...)
		b = appendString(b, r.RunID)
	}
	if r.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, r.Seq, 10)
	}
	for _, f := range [...]struct{ name, value string }{
		{"id", r.ID}, {"event_id", r.EventID}, {"fingerprint", r.Fingerprint},
		{"dest", r.Dest}, {"dest_id", r.DestID}, {"note", r.Note},
	} {
		if f.value != "" {
			b = append(b, ',', '"')
			b = append(b, f.name...)
			b = append(b, '"', ':')
			b = appendString(b, f.value)
		}
	}
	return append(b, '}', '\n'), true
}

// appendString writes s as a JSON string. Text that is not valid UTF-8
// goes through encoding/json, which replaces the bad bytes as it always has.
func appendString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		q, _ := json.Marshal(s) // a string always marshals
		return append(b, q...)
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
