package redrive

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// The run-start record holds the whole plan, so that the journal is an
// audit trail of its own. Written as the plan file writes it, a plan entry
// is mostly field names; the run-start writes each entry as an array
// instead, [id, event_id, fingerprint, key, category, dest], its seq being
// its position (1, 2, …). A plan that does not fit that form (a seq out of
// place, text that is not UTF-8 and needs exact_base64) is written as the
// plan file writes it. Both forms read back to the same Plan, whose digest
// then verifies as before.

// planAlias is Plan without its methods, so that journalPlan's Entries
// takes the place of Plan's.
type planAlias Plan

type journalPlan struct {
	planAlias
	Entries journalEntries `json:"entries"`
}

type journalEntries []Entry

// compactable says whether every entry fits the array form.
func (es journalEntries) compactable() bool {
	for i, e := range es {
		if e.Seq != int64(i+1) {
			return false
		}
		for _, s := range [...]string{e.ID, e.EventID, e.Fingerprint, e.Key, e.Category, e.Dest} {
			if !utf8.ValidString(s) {
				return false
			}
		}
	}
	return true
}

func (es journalEntries) MarshalJSON() ([]byte, error) {
	if !es.compactable() {
		return json.Marshal([]Entry(es))
	}
	b := make([]byte, 0, 160*len(es)+2)
	b = append(b, '[')
	for i, e := range es {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for j, s := range [...]string{e.ID, e.EventID, e.Fingerprint, e.Key, e.Category, e.Dest} {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		b = append(b, ']')
	}
	return append(b, ']'), nil
}

func (es *journalEntries) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make([]Entry, len(raw))
	for i, r := range raw {
		if len(r) == 0 || r[0] != '[' {
			// The plan file's form (and every journal of earlier versions).
			if err := json.Unmarshal(r, &out[i]); err != nil {
				return err
			}
			continue
		}
		var f []string
		if err := json.Unmarshal(r, &f); err != nil {
			return fmt.Errorf("plan entry %d: %v", i+1, err)
		}
		if len(f) != 6 {
			return fmt.Errorf("plan entry %d: %d fields, want 6 (id, event_id, fingerprint, key, category, dest)", i+1, len(f))
		}
		out[i] = Entry{Seq: int64(i + 1), ID: f[0], EventID: f[1], Fingerprint: f[2], Key: f[3], Category: f[4], Dest: f[5]}
	}
	*es = out
	return nil
}

// recordAlias is Record without its methods.
type recordAlias Record

// recordJSON is a Record as a line of the journal: its plan, when it has
// one, in the journal's form.
type recordJSON struct {
	recordAlias
	Plan *journalPlan `json:"plan,omitempty"`
}

// MarshalJSON writes the record with its plan's entries compact.
func (r Record) MarshalJSON() ([]byte, error) {
	w := recordJSON{recordAlias: recordAlias(r)}
	if r.Plan != nil {
		w.Plan = &journalPlan{planAlias: planAlias(*r.Plan), Entries: journalEntries(r.Plan.Entries.Slice())}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// UnmarshalJSON reads a record in either form of its plan's entries.
func (r *Record) UnmarshalJSON(b []byte) error {
	var w recordJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = Record(w.recordAlias)
	if w.Plan != nil {
		p := Plan(w.Plan.planAlias)
		p.Entries = NewEntries(w.Plan.Entries...)
		r.Plan = &p
	}
	return nil
}
