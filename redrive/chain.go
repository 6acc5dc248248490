package redrive

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
)

// The journal's records are chained. Each write (a group of records synced
// together, such as the intents of a chunk) ends with a MAC on its last
// line: HMAC-SHA256 under the run's journal key over the MAC of the group
// before it and the SHA-256 of the group's lines as written (the last
// without its MAC). Resume believes a journal only as far as its chain
// verifies, so a hand-written journal, an edited step or a removed approval
// is refused. The journal key is derived from the approval key and the run
// ID, so lines cannot be spliced in from another run either.
//
// One MAC per group, not per line, keeps the journal small (a MAC is 85
// bytes; a group covers up to a chunk of moves). A group is one write and
// one sync before its side effect, so a crash leaves at most its own tail
// torn; lines after the last MAC are then not believed (as a torn line
// never was), and a resume cuts them off before it appends. A chain cannot
// show that whole groups were cut off its end; resume does not need them,
// since it checks every step it is missing against the backend again.

// ErrUnsigned: the journal's records carry no MACs.
var ErrUnsigned = errors.New("the journal is not signed (its records carry no MACs)")

// ErrForged: a MAC does not verify.
var ErrForged = errors.New("the journal does not verify")

const macPrefix = "hmac-sha256:"

// JournalKey is the key a run's journal is chained with.
func JournalKey(approvalKey []byte, runID string) []byte {
	m := hmac.New(sha256.New, approvalKey)
	fmt.Fprintf(m, "dlqctl.journal-key/v1\n%s\n", runID)
	return m.Sum(nil)
}

// chainState is a chain's key and the MAC of its last group.
type chainState struct {
	key  []byte
	last string
}

func (c chainState) mac(groupSum []byte) string {
	m := hmac.New(sha256.New, c.key)
	fmt.Fprintf(m, "dlqctl.journal/v1\n%s\n%x\n", c.last, groupSum)
	return macPrefix + hex.EncodeToString(m.Sum(nil))
}

// sealGroup writes the encoded record lines ("{…}\n" each) of one group,
// the last one with the group's MAC, and moves the chain on. Without a key
// the lines are written as they are.
func (c *chainState) sealGroup(buf *bytes.Buffer, lines [][]byte) {
	if c.key == nil {
		for _, l := range lines {
			buf.Write(l)
		}
		return
	}
	h := sha256.New()
	for _, l := range lines {
		h.Write(l)
	}
	mac := c.mac(h.Sum(nil))
	c.last = mac
	for _, l := range lines[:len(lines)-1] {
		buf.Write(l)
	}
	last := bytes.TrimSuffix(lines[len(lines)-1], []byte("\n"))
	buf.Write(last[:len(last)-1])
	buf.WriteString(`,"mac":"`)
	buf.WriteString(mac)
	buf.WriteString("\"}\n")
}

// Chain makes the journal sign what it appends from now on: key is the
// run's JournalKey and last the MAC at its end ("" for a new journal).
func (j *Journal) Chain(key []byte, last string) {
	j.chain = chainState{key: key, last: last}
}

// plainLine is a record line as written before its MAC was added.
func plainLine(line []byte, mac string) ([]byte, error) {
	body := bytes.TrimSuffix(line, []byte("\n"))
	if mac == "" {
		return line, nil
	}
	suffix := []byte(`,"mac":"` + mac + `"}`)
	if !bytes.HasSuffix(body, suffix) {
		return nil, fmt.Errorf("%w: the MAC is not the last field of its record", ErrForged)
	}
	plain := append(append([]byte(nil), body[:len(body)-len(suffix)]...), '}', '\n')
	return plain, nil
}

// Verified is a journal as far as its chain verifies.
type Verified struct {
	// Last is the MAC of the last verified group: appends go on from it.
	Last string
	// Size is the length of the verified part: a resume cuts the file
	// there before it appends.
	Size int64
}

// ScanJournal reads the journal at path record by record, without holding
// it, and calls fn for each complete record. With a key (a JournalKey) it
// calls fn only for records whose group's MAC verified: a MAC that does
// not verify is an error wrapping ErrForged, a journal without MACs one
// wrapping ErrUnsigned. Records after the last MAC are left out when a torn
// line follows them (a crash cut their group), and refused otherwise. A
// half-written last line is always left out: its step never completed.
func ScanJournal(path string, key []byte, fn func(Record) error) (Verified, error) {
	f, err := os.Open(path)
	if err != nil {
		return Verified{}, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	chain := chainState{key: key}
	var v Verified
	var pending []Record
	var group hash.Hash
	var offset int64
	lastSigned := 0
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			// No newline: a partial last line, or the end. Unsigned whole
			// records before a torn line are the head of a group a crash
			// cut; without one they were added after the journal was
			// written, and are refused.
			if key != nil && len(pending) > 0 && len(b) == 0 {
				return v, fmt.Errorf("journal %s: %w: %d records after line %d, the last signed one, are not signed (after a power loss, cut the file after line %d and resume)",
					path, ErrForged, len(pending), lastSigned, lastSigned)
			}
			break
		}
		if err != nil {
			return v, err
		}
		offset += int64(len(b))
		var rec Record
		if err := decodeRecord(b, &rec); err != nil {
			return v, fmt.Errorf("journal %s:%d: %v", path, line, err)
		}
		if key == nil {
			if err := fn(rec); err != nil {
				return v, err
			}
			v.Size = offset
			continue
		}
		if line == 1 && rec.MAC == "" {
			return v, fmt.Errorf("journal %s: %w", path, ErrUnsigned)
		}
		plain, err := plainLine(b, rec.MAC)
		if err != nil {
			return v, fmt.Errorf("journal %s:%d: %w", path, line, err)
		}
		if group == nil {
			group = sha256.New()
		}
		group.Write(plain)
		pending = append(pending, rec)
		if rec.MAC == "" {
			continue
		}
		if want := chain.mac(group.Sum(nil)); !hmac.Equal([]byte(want), []byte(rec.MAC)) {
			return v, fmt.Errorf("journal %s:%d: %w: a record up to this line (%s) was edited, forged, removed, or signed with another key", path, line, ErrForged, rec.Type)
		}
		chain.last, group, lastSigned = rec.MAC, nil, line
		for _, p := range pending {
			if err := fn(p); err != nil {
				return v, err
			}
		}
		pending = pending[:0]
		v.Last, v.Size = chain.last, offset
	}
	return v, nil
}

// ReadRunStart reads the journal's first record, the run-start, without
// reading the rest.
func ReadRunStart(path string) (Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return Record{}, err
	}
	defer f.Close()
	b, err := bufio.NewReaderSize(f, 1<<16).ReadBytes('\n')
	if errors.Is(err, io.EOF) {
		return Record{}, fmt.Errorf("journal %s: %w", path, ErrNeverStarted)
	}
	if err != nil {
		return Record{}, err
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, fmt.Errorf("journal %s:1: %v", path, err)
	}
	if rec.Type != RecRunStart || (rec.Plan == nil && rec.PlanDigest == "") {
		return Record{}, fmt.Errorf("journal %s: does not start with a run-start record", path)
	}
	return rec, nil
}

// ReplayFile streams the journal into a State (see ScanJournal for key).
// plan is the run's plan (LoadRunPlan); the run-start, as verified, must
// name it.
func ReplayFile(path string, key []byte, plan *Plan) (*State, Verified, error) {
	rp := &replayer{plan: plan}
	v, err := ScanJournal(path, key, rp.add)
	if err != nil {
		return nil, v, err
	}
	if rp.st == nil {
		return nil, v, fmt.Errorf("journal %s: %w", path, ErrNeverStarted)
	}
	return rp.st, v, nil
}
