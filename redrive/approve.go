package redrive

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Approval is one recorded approval of a plan's digest.
type Approval struct {
	By        string    `json:"by"`
	At        time.Time `json:"at"`
	ExpiresAt time.Time `json:"expires_at"`
	// HMAC is HMAC-SHA256 over the digest, approver, time and expiry, with
	// the approval key: without the key none of them can be changed.
	HMAC string `json:"hmac"`
}

func approvalMAC(key []byte, digest string, a Approval) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "dlqctl.approval/v1\n%s\n%s\n%s\n%s\n", digest, a.By,
		a.At.UTC().Format(time.RFC3339Nano), a.ExpiresAt.UTC().Format(time.RFC3339Nano))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// Approve adds an approval by `by` that expires after ttl.
func (p *Plan) Approve(key []byte, by string, now time.Time, ttl time.Duration) (Approval, error) {
	if len(key) == 0 {
		return Approval{}, errors.New("no approval key")
	}
	if !utf8.ValidString(by) {
		return Approval{}, fmt.Errorf("approver %q is not valid UTF-8", strings.ToValidUTF8(by, "\uFFFD"))
	}
	a := Approval{By: by, At: now.UTC(), ExpiresAt: now.UTC().Add(ttl)}
	a.HMAC = approvalMAC(key, p.Digest, a)
	p.Approvals = append(p.Approvals, a)
	return a, nil
}

// ApprovalPolicy is what apply and resume require of approvals.
type ApprovalPolicy struct {
	// Key verifies every approval, unless KeyFor is set.
	Key []byte
	// KeyFor, when set, gives the key of one approver (a keys folder with a
	// key per approver): an approval verifies only under the key of the
	// approver it names, so a name cannot be borrowed without that key.
	KeyFor           func(by string) ([]byte, error)
	DistinctApprover bool
	Now              time.Time
	// After, when set, refuses approvals recorded before it: going on past
	// a failed gate needs an approval given after the halt.
	After time.Time
}

// KeyOf is the key that verifies an approval by `by`.
func (pol ApprovalPolicy) KeyOf(by string) ([]byte, error) {
	if pol.KeyFor != nil {
		return pol.KeyFor(by)
	}
	if len(pol.Key) == 0 {
		return nil, errors.New("no approval key to verify with (set DLQCTL_APPROVAL_KEY, --key-file or --keys-dir)")
	}
	return pol.Key, nil
}

// CheckApproval finds a valid approval, or says why there is none: each
// approval's problem is listed (wrong key, expired, by the planner).
func (p *Plan) CheckApproval(pol ApprovalPolicy) (Approval, error) {
	if len(p.Approvals) == 0 {
		return Approval{}, errors.New("the plan has no approval (run: dlqctl redrive approve PLAN)")
	}
	if pol.KeyFor == nil && len(pol.Key) == 0 {
		return Approval{}, errors.New("no approval key to verify with (set DLQCTL_APPROVAL_KEY, --key-file or --keys-dir)")
	}
	var problems []string
	for _, a := range p.Approvals {
		if why := p.approvalProblem(pol, a); why != "" {
			problems = append(problems, why)
			continue
		}
		return a, nil
	}
	return Approval{}, errors.New(strings.Join(problems, "; "))
}

// InForce reports whether a is an approval of p that verifies with key and
// has not expired at now.
func (p *Plan) InForce(a Approval, key []byte, now time.Time) bool {
	return hmac.Equal([]byte(approvalMAC(key, p.Digest, a)), []byte(a.HMAC)) && now.Before(a.ExpiresAt)
}

func (p *Plan) approvalProblem(pol ApprovalPolicy, a Approval) string {
	key, err := pol.KeyOf(a.By)
	if err != nil {
		return fmt.Sprintf("approval by %s: %v", a.By, err)
	}
	want := approvalMAC(key, p.Digest, a)
	switch {
	case !hmac.Equal([]byte(want), []byte(a.HMAC)):
		return fmt.Sprintf("approval by %s: signature does not verify (wrong key, or the approval or plan was edited)", a.By)
	case !pol.Now.Before(a.ExpiresAt):
		return fmt.Sprintf("approval by %s expired at %s", a.By, a.ExpiresAt.UTC().Format(time.RFC3339))
	case !pol.After.IsZero() && !a.At.After(pol.After):
		return fmt.Sprintf("approval by %s was given at %s, before the run was halted at %s: going on past a gate needs a fresh approval (dlqctl %s approve PLAN --again)",
			a.By, a.At.UTC().Format(time.RFC3339), pol.After.UTC().Format(time.RFC3339), p.Kind)
	case pol.DistinctApprover && a.By == p.PlannedBy:
		return fmt.Sprintf("approval by %s: the planner cannot approve their own plan (distinct approver policy)", a.By)
	case pol.DistinctApprover && pol.KeyFor != nil:
		// With a key per approver, the policy holds by key as well: the
		// planner's own key cannot sign under another name.
		if pk, err := pol.KeyFor(p.PlannedBy); err == nil && hmac.Equal(pk, key) {
			return fmt.Sprintf("approval by %s: signed with the planner's key (distinct approver policy)", a.By)
		}
	}
	return ""
}
