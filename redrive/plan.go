// Package redrive holds what moves DLQ entries: plans and their approvals,
// the journal, and the engine that runs a plan in rate-limited batches and
// reconciles every batch before it widens.
package redrive

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/internal/atomicfile"
)

// Plan kinds.
const (
	KindRedrive = "redrive"
	KindResolve = "resolve"
)

// PlanSchema is the plan file's schema.
const PlanSchema = "dlqctl.plan/v1"

// Plan is a reviewed, approvable list of entries to move (dlqctl.plan/v1).
// Everything but Digest and Approvals is covered by Digest.
type Plan struct {
	Schema    string     `json:"schema"`
	Kind      string     `json:"kind"`
	Digest    string     `json:"digest"`
	Reason    string     `json:"reason"`
	PlannedBy string     `json:"planned_by"`
	PlannedAt time.Time  `json:"planned_at"`
	Source    string     `json:"source"`
	Params    Params     `json:"params"`
	Selectors Selectors  `json:"selectors"`
	Entries   Entries    `json:"entries"`
	Excluded  []Excluded `json:"excluded"`
	Approvals []Approval `json:"approvals"`
}

// Params are the run's parameters (the command contract redrive plan).
type Params struct {
	To                 string   `json:"to,omitempty"`
	Rate               float64  `json:"rate"`
	Burst              int      `json:"burst"`
	Ramp               []int    `json:"ramp"`
	Max                int      `json:"max"`
	Effects            string   `json:"effects,omitempty"`
	EffectsQuery       string   `json:"effects_query,omitempty"`
	Settle             Duration `json:"settle"`
	MaxFailedRatio     float64  `json:"max_failed_ratio"`
	IncludeQuarantined bool     `json:"include_quarantined"`
	UnverifiedOK       bool     `json:"unverified_ok"`
	// AllowDispositions are the dispositions the planner was told to take
	// besides the kind's own (redrive, or resolve); the approver sees them.
	AllowDispositions []string `json:"allow_dispositions,omitempty"`
}

// Selectors records how the entries were chosen, for the audit trail.
type Selectors struct {
	Categories   []string `json:"categories,omitempty"`
	Dispositions []string `json:"dispositions,omitempty"`
	Origins      []string `json:"origins,omitempty"`
	Error        string   `json:"error,omitempty"`
	EventIDs     []string `json:"event_ids,omitempty"`
	Owners       []string `json:"owners,omitempty"`
	Overdue      bool     `json:"overdue,omitempty"`
	OlderThan    string   `json:"older_than,omitempty"`
	NewerThan    string   `json:"newer_than,omitempty"`
	MinAttempt   int      `json:"min_attempts,omitempty"`
	Limit        int      `json:"limit,omitempty"`
}

// Entry is one planned entry; Seq is its 1-based place in the plan.
type Entry struct {
	Seq         int64  `json:"seq"`
	ID          string `json:"id"`
	EventID     string `json:"event_id"`
	Fingerprint string `json:"fingerprint"`
	Key         string `json:"key,omitempty"`
	Category    string `json:"category"`
	Dest        string `json:"dest,omitempty"`
}

// Excluded is a selected entry the plan left out, and why.
type Excluded struct {
	ID          string `json:"id"`
	EventID     string `json:"event_id"`
	Why         string `json:"why"`
	Disposition string `json:"disposition,omitempty"`
	// HeldBy is the older entry of the same key that stays in the DLQ and
	// holds this one back, when that is why it was left out.
	HeldBy string `json:"held_by,omitempty"`
}

// Duration is a time.Duration written as a Go duration string.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ComputeDigest is the SHA-256 over the plan's canonical form: its JSON
// encoding with Digest and Approvals emptied, as json.Marshal writes it
// (struct fields in declaration order, map keys sorted), so the form is
// stable. The bytes are streamed into the hash entry by entry, never held
// whole (see codec.go).
//
// Entries and exclusions carry bytes that are not UTF-8 exactly (see
// canonical.go); other text that is not UTF-8 is refused.
func (p Plan) ComputeDigest() (string, error) {
	if err := p.checkText(); err != nil {
		return "", err
	}
	p.Digest = ""
	p.Approvals = nil
	p.PlannedAt = p.PlannedAt.UTC()
	h := sha256.New()
	w := bufio.NewWriterSize(h, 1<<16)
	if err := p.encode(w, false); err != nil {
		return "", err
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Seal sets the digest; call it once the plan is complete.
func (p *Plan) Seal() error {
	d, err := p.ComputeDigest()
	p.Digest = d
	return err
}

// ErrTampered: the plan's content no longer matches its digest.
var ErrTampered = errors.New("plan was changed after it was made (digest mismatch)")

// Verify checks the digest against the content.
func (p Plan) Verify() error {
	d, err := p.ComputeDigest()
	if err != nil {
		return err
	}
	if d != p.Digest {
		return fmt.Errorf("%w: recorded %s, content hashes to %s", ErrTampered, short(p.Digest), short(d))
	}
	return nil
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19] + "…"
	}
	return d
}

// ReadPlan loads a plan file, streamed (see codec.go). It refuses unknown
// fields: a plan is a contract, and an edited one should not half-parse.
func ReadPlan(path string) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := decodePlan(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return nil, fmt.Errorf("%s: not a plan: %v", path, err)
	}
	if p.Schema != PlanSchema {
		return nil, fmt.Errorf("%s: schema %q is not %s", path, p.Schema, PlanSchema)
	}
	return p, nil
}

// WritePlan writes the plan atomically (temp file + rename), mode 0600,
// entry by entry: indented as json.Encoder indents it, HTML left as is.
func WritePlan(path string, p *Plan) error {
	return atomicfile.WriteFunc(path, 0o600, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<16)
		if err := p.encode(bw, true); err != nil {
			return err
		}
		return bw.Flush()
	})
}

// DefaultJournalPath is next to the plan: plan.json → plan.journal.
func DefaultJournalPath(planPath string) string {
	return strings.TrimSuffix(planPath, filepath.Ext(planPath)) + ".journal"
}

// entries is "1 entry" or "N entries": plural would write "entrys".
func entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
