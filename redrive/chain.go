package redrive

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// The journal's records are chained: each line ends with a MAC,
// HMAC-SHA256 under the run's journal key over the MAC of the line before
// it and the SHA-256 of this line as written without its MAC. Resume
// believes a journal only when the whole chain verifies, so a hand-written
// journal, an edited step or a removed approval is refused. The journal key
// is derived from the approval key and the run ID, so a journal cannot be
// spliced from another run's lines either. A chain cannot show that lines
// were cut off the end; resume never needs them to be there, since every
// step it is missing is checked against the backend again.

// ErrUnsigned: the journal's records carry no MACs.
var ErrUnsigned = errors.New("the journal is not signed (its records carry no MACs)")

// ErrForged: a record's MAC does not verify.
var ErrForged = errors.New("the journal does not verify")

const macPrefix = "hmac-sha256:"

// JournalKey is the key a run's journal is chained with.
func JournalKey(approvalKey []byte, runID string) []byte {
	m := hmac.New(sha256.New, approvalKey)
	fmt.Fprintf(m, "dlqctl.journal-key/v1\n%s\n", runID)
	return m.Sum(nil)
}

// chainState is a chain's key and the MAC of its last record.
type chainState struct {
	key  []byte
	last string
}

func (c chainState) mac(bodySum [32]byte) string {
	m := hmac.New(sha256.New, c.key)
	fmt.Fprintf(m, "dlqctl.journal/v1\n%s\n%x\n", c.last, bodySum)
	return macPrefix + hex.EncodeToString(m.Sum(nil))
}

// seal adds the MAC to one encoded record line ("{…}\n") and moves the
// chain on; without a key the line is written as it is.
func (c *chainState) seal(line []byte) []byte {
	if c.key == nil {
		return line
	}
	body := bytes.TrimSuffix(line, []byte("\n"))
	mac := c.mac(sha256.Sum256(body))
	c.last = mac
	out := make([]byte, 0, len(body)+len(mac)+12)
	out = append(out, body[:len(body)-1]...)
	out = append(out, `,"mac":"`...)
	out = append(out, mac...)
	return append(out, '"', '}', '\n')
}

// sumBody records the hash of the line as it was before its MAC was added.
func (r *Record) sumBody(line []byte) error {
	body := bytes.TrimSuffix(line, []byte("\n"))
	if r.MAC == "" {
		r.bodySum = sha256.Sum256(body)
		return nil
	}
	suffix := []byte(`,"mac":"` + r.MAC + `"}`)
	if !bytes.HasSuffix(body, suffix) {
		return fmt.Errorf("%w: the MAC is not the last field of its record", ErrForged)
	}
	plain := append(append([]byte(nil), body[:len(body)-len(suffix)]...), '}')
	r.bodySum = sha256.Sum256(plain)
	return nil
}

// Signed says whether the journal's records carry MACs.
func Signed(recs []Record) bool { return len(recs) > 0 && recs[0].MAC != "" }

// VerifyChain checks every record's MAC under key (a JournalKey) and
// returns the last MAC, from which appends go on.
func VerifyChain(recs []Record, key []byte) (string, error) {
	if !Signed(recs) {
		return "", ErrUnsigned
	}
	c := chainState{key: key}
	for i, r := range recs {
		if r.MAC == "" {
			return "", fmt.Errorf("%w: record %d (%s) carries no MAC", ErrForged, i+1, r.Type)
		}
		if want := c.mac(r.bodySum); !hmac.Equal([]byte(want), []byte(r.MAC)) {
			return "", fmt.Errorf("%w: record %d (%s) was edited, forged, or signed with another key", ErrForged, i+1, r.Type)
		}
		c.last = r.MAC
	}
	return c.last, nil
}

// Chain makes the journal sign what it appends from now on: key is the
// run's JournalKey and last the MAC of the record already at its end ("" for
// a new journal).
func (j *Journal) Chain(key []byte, last string) {
	j.chain = chainState{key: key, last: last}
}
