package approval

import (
	"encoding/json"
	"time"
)

// Stamp is one of an approval's times (its `at` or `expires_at`) with
// the text it was written as. A signed approval's message holds that text
// exactly as written, so that anyone can rebuild the message from the
// file with jq and check it with `ssh-keygen -Y verify`; the instant is
// what the rules (expiry, lifetime, after a halt) compare. A stamp made
// here, not read, is written in UTC with as many fraction digits as it
// needs (RFC 3339, as Go's time.RFC3339Nano writes it).
type Stamp struct {
	time.Time
	// text is the time as read ("" for a stamp made here).
	text string
}

// NewStamp is t as dlqctl writes an approval time: in UTC.
func NewStamp(t time.Time) Stamp { return Stamp{Time: t.UTC()} }

// Text is the stamp as written: the text it was read as, or, for a stamp
// made here (or whose instant was changed since it was read), its UTC
// RFC 3339 form.
func (s Stamp) Text() string {
	if s.text != "" {
		var t time.Time
		if t.UnmarshalText([]byte(s.text)) == nil && t.Equal(s.Time) {
			return s.text
		}
	}
	return s.UTC().Format(time.RFC3339Nano)
}

// MarshalJSON writes the stamp as it was read, so that rewriting a plan
// (a second approver's approval added to it) or recording an approval in
// a journal never changes the text a signature is over.
func (s Stamp) MarshalJSON() ([]byte, error) {
	return json.Marshal(s.Text())
}

// UnmarshalJSON reads an RFC 3339 time, as time.Time does, and keeps its
// text.
func (s *Stamp) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var text string
	if err := json.Unmarshal(b, &text); err != nil {
		return err
	}
	if err := s.Time.UnmarshalText([]byte(text)); err != nil {
		return err
	}
	s.text = text
	return nil
}
