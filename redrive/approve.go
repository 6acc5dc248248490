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

	"golang.org/x/crypto/ssh"

	"github.com/dlqctl/dlqctl/approval"
)

// Approval is one recorded approval of a plan's digest. It carries either
// an HMAC (one shared key: the weaker mode, for a single operator) or an
// SSH signature (the approver's own key; the applying host holds only the
// public half and cannot make one).
type Approval struct {
	By        string    `json:"by"`
	At        time.Time `json:"at"`
	ExpiresAt time.Time `json:"expires_at"`
	// HMAC is HMAC-SHA256 over the digest, approver, time and expiry, with
	// the approval key: without the key none of them can be changed.
	HMAC string `json:"hmac,omitempty"`
	// Signature is an armored SSH signature (ssh-keygen -Y sign, namespace
	// dlqctl-approval) over approval.Message of the digest, Principal, At
	// and ExpiresAt. Principal is who signed as listed in allowed_signers
	// (By repeats it), Key the signing key's SHA256 fingerprint.
	Signature string `json:"signature,omitempty"`
	Principal string `json:"principal,omitempty"`
	Key       string `json:"key,omitempty"`
}

// Signed says the approval is an SSH signature.
func (a Approval) Signed() bool { return a.Signature != "" }

// Message is the text the approval's signature is over.
func (p *Plan) Message(a Approval) []byte {
	return approval.Message(p.Digest, a.Principal, a.At, a.ExpiresAt)
}

func approvalMAC(key []byte, digest string, a Approval) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "dlqctl.approval/v1\n%s\n%s\n%s\n%s\n", digest, a.By,
		a.At.UTC().Format(time.RFC3339Nano), a.ExpiresAt.UTC().Format(time.RFC3339Nano))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

func validApprover(by string) error {
	if !utf8.ValidString(by) {
		return fmt.Errorf("approver %q is not valid UTF-8", strings.ToValidUTF8(by, "\uFFFD"))
	}
	if by == "" || strings.ContainsAny(by, "\n\r") {
		return fmt.Errorf("approver %q: a name on one line is needed", by)
	}
	return nil
}

// Approve adds an HMAC approval by `by` that expires after ttl.
func (p *Plan) Approve(key []byte, by string, now time.Time, ttl time.Duration) (Approval, error) {
	if len(key) == 0 {
		return Approval{}, errors.New("no approval key")
	}
	if err := validApprover(by); err != nil {
		return Approval{}, err
	}
	a := Approval{By: by, At: now.UTC(), ExpiresAt: now.UTC().Add(ttl)}
	a.HMAC = approvalMAC(key, p.Digest, a)
	p.Approvals = append(p.Approvals, a)
	return a, nil
}

// ApproveSigned adds an approval signed by s as principal, expiring after
// ttl. The plan itself is not changed when the signature fails.
func (p *Plan) ApproveSigned(s ssh.Signer, principal string, now time.Time, ttl time.Duration) (Approval, error) {
	if err := validApprover(principal); err != nil {
		return Approval{}, err
	}
	a := Approval{By: principal, Principal: principal, At: now.UTC(), ExpiresAt: now.UTC().Add(ttl), Key: approval.Fingerprint(s.PublicKey())}
	sig, err := approval.Sign(s, approval.Namespace, p.Message(a))
	if err != nil {
		return Approval{}, err
	}
	a.Signature = sig
	p.Approvals = append(p.Approvals, a)
	return a, nil
}

// ApprovalPolicy is what apply and resume require of approvals.
type ApprovalPolicy struct {
	// Key verifies every HMAC approval, unless KeyFor is set.
	Key []byte
	// KeyFor, when set, gives the key of one approver (a keys folder with a
	// key per approver): an approval verifies only under the key of the
	// approver it names, so a name cannot be borrowed without that key.
	KeyFor func(by string) ([]byte, error)
	// Signers verifies signed approvals: whose keys count, as whom.
	Signers *approval.AllowedSigners
	// SignaturesOnly refuses HMAC approvals.
	SignaturesOnly bool
	// Required is how many approvals by distinct approvers it takes (0
	// means 1).
	Required int
	// DistinctApprover: neither the planner nor Applier may approve.
	DistinctApprover bool
	Applier          string
	Now              time.Time
	// After, when set, refuses approvals recorded before it: going on past
	// a failed gate needs approvals given after the halt.
	After time.Time
}

func (pol ApprovalPolicy) required() int { return max(pol.Required, 1) }

// KeyOf is the HMAC key that verifies an approval by `by`.
func (pol ApprovalPolicy) KeyOf(by string) ([]byte, error) {
	if pol.KeyFor != nil {
		return pol.KeyFor(by)
	}
	if len(pol.Key) == 0 {
		return nil, errors.New("no approval key to verify with (set DLQCTL_APPROVAL_KEY, --key-file or --keys-dir)")
	}
	return pol.Key, nil
}

// Verdict is one approval as a policy sees it.
type Verdict struct {
	Approval Approval
	// Problem says why it does not count ("" when it is valid).
	Problem string
	// Counted: valid and by an approver not counted already.
	Counted bool
	// signer is who it counts as: the principal and key for a signature,
	// the name (or the shared key) for an HMAC.
	who, key string
}

// Judge gives every approval of p its verdict under pol and says how many
// more approvals the policy needs.
func (p *Plan) Judge(pol ApprovalPolicy) (verdicts []Verdict, needed int) {
	principals, keys := map[string]bool{}, map[string]bool{}
	counted := 0
	for _, a := range p.Approvals {
		v := p.judge(pol, a)
		// Once enough are counted, a further valid approval is valid and
		// simply not needed; before, a repeat is named as such.
		if v.Problem == "" && counted < pol.required() {
			switch {
			case principals[v.who]:
				v.Problem = fmt.Sprintf("approval by %s: %s already approved; one approver counts once", a.By, v.who)
			case keys[v.key]:
				v.Problem = fmt.Sprintf("approval by %s: made with a key (%s) that another counted approval used; one key counts once", a.By, v.key)
			default:
				principals[v.who], keys[v.key], v.Counted = true, true, true
				counted++
			}
		}
		verdicts = append(verdicts, v)
	}
	return verdicts, max(pol.required()-counted, 0)
}

// CheckApprovals returns the approvals that meet the policy (as many as it
// requires, by distinct approvers), or says why there are not enough: each
// approval's problem is listed.
func (p *Plan) CheckApprovals(pol ApprovalPolicy) ([]Approval, error) {
	if len(p.Approvals) == 0 {
		return nil, fmt.Errorf("the plan has no approval (run: dlqctl %s approve PLAN)", p.kindOr())
	}
	verdicts, needed := p.Judge(pol)
	var ok []Approval
	var problems []string
	for _, v := range verdicts {
		if v.Counted && len(ok) < pol.required() {
			ok = append(ok, v.Approval)
		}
		if v.Problem != "" {
			problems = append(problems, v.Problem)
		}
	}
	if needed == 0 {
		return ok, nil
	}
	msg := strings.Join(problems, "; ")
	if pol.required() > 1 || msg == "" {
		if msg != "" {
			msg += "; "
		}
		msg += fmt.Sprintf("%d of the %d approvals required by distinct approvers (policy.approvals_required); %d more needed", len(ok), pol.required(), needed)
	}
	return nil, errors.New(msg)
}

// CheckApproval is CheckApprovals for callers that need one approval.
func (p *Plan) CheckApproval(pol ApprovalPolicy) (Approval, error) {
	ok, err := p.CheckApprovals(pol)
	if err != nil {
		return Approval{}, err
	}
	return ok[0], nil
}

func (p *Plan) kindOr() string {
	if p.Kind == "" {
		return KindRedrive
	}
	return p.Kind
}

// InForce reports whether a is an HMAC approval of p that verifies with
// key and has not expired at now.
func (p *Plan) InForce(a Approval, key []byte, now time.Time) bool {
	return !a.Signed() && hmac.Equal([]byte(approvalMAC(key, p.Digest, a)), []byte(a.HMAC)) && now.Before(a.ExpiresAt)
}

func (p *Plan) judge(pol ApprovalPolicy, a Approval) Verdict {
	v := Verdict{Approval: a}
	var why string
	if a.Signed() {
		why = p.signatureProblem(pol, a, &v)
	} else {
		why = p.hmacProblem(pol, a, &v)
	}
	if why == "" {
		why = p.timeAndPersonProblem(pol, a)
	}
	if why != "" {
		v.Problem = fmt.Sprintf("approval by %s: %s", a.By, why)
	}
	return v
}

// SignatureOK checks a signed approval's signature and signer only (not
// its expiry or who planned): what makes a journal's record of it
// believable after it has expired.
func (p *Plan) SignatureOK(pol ApprovalPolicy, a Approval) error {
	if !a.Signed() {
		return errors.New("not a signed approval")
	}
	var v Verdict
	if why := p.signatureProblem(pol, a, &v); why != "" {
		return fmt.Errorf("approval by %s: %s", a.By, why)
	}
	return nil
}

func (p *Plan) signatureProblem(pol ApprovalPolicy, a Approval, v *Verdict) string {
	if a.HMAC != "" {
		return "carries both an hmac and a signature (edited)"
	}
	if pol.Signers == nil {
		return "signed, and there is no allowed_signers file to verify it with (--allowed-signers or policy.allowed_signers)"
	}
	if a.Principal == "" || a.By != a.Principal {
		return fmt.Sprintf("by %q differs from the principal %q it was signed as (edited)", a.By, a.Principal)
	}
	got, err := approval.Verify(a.Signature, approval.Namespace, p.Message(a))
	if err != nil {
		return err.Error()
	}
	fp := approval.Fingerprint(got.Key)
	if a.Key != fp {
		return fmt.Sprintf("records key %s but was signed with %s (edited)", a.Key, fp)
	}
	if err := pol.Signers.Check(got.Key, a.Principal, approval.Namespace, pol.Now); err != nil {
		return err.Error()
	}
	v.who, v.key = "principal "+a.Principal, fp
	return ""
}

func (p *Plan) hmacProblem(pol ApprovalPolicy, a Approval, v *Verdict) string {
	if pol.SignaturesOnly {
		return "an HMAC approval, and policy.signatures_only accepts SSH signatures only (approve with --sign-with KEY)"
	}
	if a.HMAC == "" {
		return "carries neither an hmac nor a signature"
	}
	key, err := pol.KeyOf(a.By)
	if err != nil {
		return err.Error()
	}
	if !hmac.Equal([]byte(approvalMAC(key, p.Digest, a)), []byte(a.HMAC)) {
		return "signature does not verify (wrong key, or the approval or plan was edited)"
	}
	if pol.DistinctApprover && pol.KeyFor != nil {
		// With a key per approver, the policy holds by key as well: the
		// planner's own key cannot sign under another name.
		if pk, err := pol.KeyFor(p.PlannedBy); err == nil && hmac.Equal(pk, key) {
			return "signed with the planner's key (distinct approver policy)"
		}
	}
	v.who = "approver " + a.By
	v.key = "hmac:" + a.By
	if pol.KeyFor == nil {
		// One shared key writes any name: however many names it signed
		// under, it is one approval.
		v.key = "the shared approval key"
	}
	return ""
}

func (p *Plan) timeAndPersonProblem(pol ApprovalPolicy, a Approval) string {
	switch {
	case !pol.Now.Before(a.ExpiresAt):
		return fmt.Sprintf("expired at %s", a.ExpiresAt.UTC().Format(time.RFC3339))
	case !pol.After.IsZero() && a.At.Before(pol.After):
		return fmt.Sprintf("given at %s, before the run was halted at %s: going on past a gate needs a fresh approval (dlqctl %s approve PLAN --again)",
			a.At.UTC().Format(time.RFC3339Nano), pol.After.UTC().Format(time.RFC3339Nano), p.Kind)
	case pol.DistinctApprover && a.By == p.PlannedBy:
		return "the planner cannot approve their own plan (distinct approver policy)"
	case pol.DistinctApprover && pol.Applier != "" && a.By == pol.Applier:
		return "the applier cannot approve the run they apply (distinct approver policy)"
	}
	return ""
}
