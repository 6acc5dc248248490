package redrive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dlqctl/dlqctl/envelope"
)

// Journal record types, in the order a run writes them (docs/journal.md).
const (
	RecRunStart   = "run-start" // plan, approval, who applies
	RecResume     = "resume"    // a resume began
	RecBatchStart = "batch-start"
	RecIntent     = "intent"    // about to publish (or, resolve: archive)
	RecArchive    = "archive"   // resolve: the full envelope, before removal
	RecPublished  = "published" // the destination confirmed; dest_id
	RecAmbiguous  = "ambiguous" // outcome unknown; resent with the same identity
	RecRemoved    = "removed"   // gone from the DLQ
	RecGone       = "gone"      // the entry had left the DLQ before we moved it
	RecSkipped    = "skipped"   // not moved: its fingerprint changed since the plan
	RecFailed     = "failed"    // this entry could not be moved; it is still in the DLQ
	RecBatchEnd   = "batch-end" // the batch report and its gate
	RecRunEnd     = "run-end"   // completed / halted / interrupted / failed
)

// Record is one line of the journal.
type Record struct {
	Type string `json:"type"`
	// At is when the record's write began. An entry's step record that is
	// not the first of its write (the records synced together) leaves it
	// out: the write's first record holds the time for all of them, and
	// repeating it cost a fifth of a large journal's bytes.
	At time.Time `json:"at,omitzero"`
	// RunID names the run; an entry's step records leave it out (their
	// journal holds one run), as they leave out what the plan says of the
	// entry: they name it by Seq and carry only what is new.
	RunID string `json:"run_id,omitempty"`

	// run-start. A run-start names its plan by digest (and path); journals
	// of earlier versions embed the plan instead (see runplan.go).
	Plan       *Plan     `json:"plan,omitempty"`
	PlanDigest string    `json:"plan_digest,omitempty"`
	PlanPath   string    `json:"plan_path,omitempty"`
	Source     string    `json:"source,omitempty"`
	AppliedBy  string    `json:"applied_by,omitempty"`
	Approval   *Approval `json:"approval,omitempty"`
	// Approvals holds the approvals a run went on under when a policy
	// needs more than one (Approval holds a single one).
	Approvals []Approval `json:"approvals,omitempty"`

	// entry steps
	Seq         int64              `json:"seq,omitempty"`
	ID          string             `json:"id,omitempty"`
	EventID     string             `json:"event_id,omitempty"`
	Fingerprint string             `json:"fingerprint,omitempty"`
	Dest        string             `json:"dest,omitempty"`
	DestID      string             `json:"dest_id,omitempty"`
	Envelope    *envelope.Envelope `json:"envelope,omitempty"`
	Note        string             `json:"note,omitempty"`

	// batches
	Batch *BatchReport `json:"batch,omitempty"`
	Seqs  []int64      `json:"seqs,omitempty"`
	// Watermark is the DLQ's newest entry when the batch started (batch-start):
	// entries after it that carry a batch event came back.
	Watermark string `json:"watermark,omitempty"`

	// run-end
	Status   string `json:"status,omitempty"`
	HaltedBy string `json:"halted_by,omitempty"`
	Moved    int    `json:"moved,omitempty"`

	// MAC chains the record to the one before it (see chain.go); always the
	// last field of its line.
	MAC string `json:"mac,omitempty"`
}

// Journal appends records to a file, each synced to disk before Append
// returns, so that no side effect ever runs ahead of its record.
type Journal struct {
	path string
	f    *os.File
	now  func() time.Time
	// chain is the record chain's key and last MAC; a nil key writes
	// records without MACs (a one-step run without an approval key).
	chain chainState
	// text, lines and out are AppendAll's buffers, kept from one write
	// to the next: a redrive writes up to three records per entry of a
	// chunk per write, and making them afresh was most of what its
	// journal allocated.
	text  []byte
	lines [][]byte
	out   bytes.Buffer
}

// CreateJournal starts a new journal; it refuses to overwrite one, since a
// journal is the audit trail of a run that happened.
func CreateJournal(path string, now func() time.Time) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("journal %s exists already: resume that run (dlqctl redrive resume %s) or give another --journal", path, path)
		}
		return nil, err
	}
	if err := syncDir(path); err != nil {
		f.Close()
		return nil, err
	}
	return &Journal{path: path, f: f, now: now}, nil
}

// OpenJournal reopens a journal to append to it (resume).
func OpenJournal(path string, now func() time.Time) (*Journal, error) {
	if err := truncatePartialLine(path); err != nil {
		return nil, err
	}
	return openForAppend(path, now)
}

// OpenVerifiedJournal reopens a signed journal to append to it, cut to
// what verified: lines after the last MAC are not believed, and the next
// group's MAC must follow the last one.
func OpenVerifiedJournal(path string, now func() time.Time, key []byte, v Verified) (*Journal, error) {
	if err := os.Truncate(path, v.Size); err != nil {
		return nil, err
	}
	j, err := openForAppend(path, now)
	if err != nil {
		return nil, err
	}
	j.Chain(key, v.Last)
	return j, nil
}

func openForAppend(path string, now func() time.Time) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &Journal{path: path, f: f, now: now}, nil
}

// Path is where the journal is.
func (j *Journal) Path() string { return j.path }

// Append writes one record and syncs it.
func (j *Journal) Append(r Record) error { return j.AppendAll([]Record{r}) }

// AppendAll writes several records with one sync: a group of steps that
// all come before the same side effect (the intents of a chunk).
func (j *Journal) AppendAll(rs []Record) error {
	if len(rs) == 0 {
		return nil
	}
	text, ends := j.text[:0], make([]int, 0, len(rs))
	now := j.now().UTC()
	for i, r := range rs {
		if r.At.IsZero() && (i == 0 || !isStep(r.Type)) {
			r.At = now
		}
		r.MAC = ""
		var ok bool
		if text, ok = appendStep(text, r); !ok {
			var one bytes.Buffer
			enc := json.NewEncoder(&one)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(r); err != nil {
				return err
			}
			text = append(text, one.Bytes()...)
		}
		ends = append(ends, len(text))
	}
	// The lines are cut from text only now: appending may have moved it.
	lines := j.lines[:0]
	start := 0
	for _, end := range ends {
		lines = append(lines, text[start:end:end])
		start = end
	}
	j.text, j.lines = text, lines
	buf := &j.out
	buf.Reset()
	chain := j.chain
	chain.sealGroup(buf, lines)
	if _, err := j.f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	j.chain = chain
	return nil
}

// isStep says whether typ is one of an entry's step records.
func isStep(typ string) bool {
	switch typ {
	case RecIntent, RecArchive, RecPublished, RecAmbiguous, RecRemoved, RecGone, RecSkipped, RecFailed:
		return true
	}
	return false
}

// Close closes the file.
func (j *Journal) Close() error { return j.f.Close() }

// ErrNeverStarted: the journal holds no complete record. Its run-start
// record, written and synced before anything moves, was torn by a crash
// (or the file is empty): the run never started and nothing was moved, so
// starting it again with apply is safe.
var ErrNeverStarted = errors.New("the run never started: its journal has no complete run-start record (a crash tore it before anything was moved); it is safe to start again with apply")

// ReadJournal reads every complete record. A crash can leave the last line
// half-written; that line is ignored, since its step never completed.
func ReadJournal(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var recs []Record
	r := bufio.NewReader(bytes.NewReader(data))
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // no newline: a partial last line
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("journal %s:%d: %v", path, line, err)
		}
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("journal %s: %w", path, ErrNeverStarted)
	}
	if recs[0].Type != RecRunStart || (recs[0].Plan == nil && recs[0].PlanDigest == "") {
		return nil, fmt.Errorf("journal %s: does not start with a run-start record", path)
	}
	return recs, nil
}

// NeverStarted says whether the journal at path holds no complete record
// (see ErrNeverStarted). It reads only as far as the first line's end.
func NeverStarted(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		_, err := r.ReadSlice('\n')
		if err == nil {
			return false, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // a long first line: read on to its end
		}
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		return false, err
	}
}

// truncatePartialLine cuts a half-written last line so appends start
// clean. It reads the file backwards from its end, not whole.
func truncatePartialLine(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	end := fi.Size()
	buf := make([]byte, 1<<16)
	for pos := end; pos > 0; {
		n := int64(len(buf))
		if pos < n {
			n = pos
		}
		pos -= n
		if _, err := f.ReadAt(buf[:n], pos); err != nil {
			return err
		}
		if pos+n == end && buf[n-1] == '\n' {
			return nil // ends with a whole line
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return os.Truncate(path, pos+int64(i)+1)
		}
	}
	if end == 0 {
		return nil
	}
	return os.Truncate(path, 0)
}

func syncDir(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
