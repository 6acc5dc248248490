package redrive

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
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
	a := Approval{By: by, At: now.UTC(), ExpiresAt: now.UTC().Add(ttl)}
	a.HMAC = approvalMAC(key, p.Digest, a)
	p.Approvals = append(p.Approvals, a)
	return a, nil
}

// ApprovalPolicy is what apply requires of approvals.
type ApprovalPolicy struct {
	Key              []byte
	DistinctApprover bool
	Now              time.Time
}

// CheckApproval finds a valid approval, or says why there is none: each
// approval's problem is listed (wrong key, expired, by the planner).
func (p *Plan) CheckApproval(pol ApprovalPolicy) (Approval, error) {
	if len(p.Approvals) == 0 {
		return Approval{}, errors.New("the plan has no approval (run: dlqctl redrive approve PLAN)")
	}
	if len(pol.Key) == 0 {
		return Approval{}, errors.New("no approval key to verify with (set DLQCTL_APPROVAL_KEY or --key-file)")
	}
	var problems []string
	for _, a := range p.Approvals {
		want := approvalMAC(pol.Key, p.Digest, a)
		switch {
		case !hmac.Equal([]byte(want), []byte(a.HMAC)):
			problems = append(problems, fmt.Sprintf("approval by %s: signature does not verify (wrong key, or the approval or plan was edited)", a.By))
		case !pol.Now.Before(a.ExpiresAt):
			problems = append(problems, fmt.Sprintf("approval by %s expired at %s", a.By, a.ExpiresAt.UTC().Format(time.RFC3339)))
		case pol.DistinctApprover && a.By == p.PlannedBy:
			problems = append(problems, fmt.Sprintf("approval by %s: the planner cannot approve their own plan (distinct approver policy)", a.By))
		default:
			return a, nil
		}
	}
	return Approval{}, errors.New(strings.Join(problems, "; "))
}
