package redrive

import (
	"cmp"
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
	By string `json:"by"`
	// At and ExpiresAt keep the text they were written as: a signature
	// is over that text (approval.Stamp).
	At        approval.Stamp `json:"at"`
	ExpiresAt approval.Stamp `json:"expires_at"`
	// HMAC is HMAC-SHA256 over the digest, approver, time and expiry, with
	// the approval key: without the key none of them can be changed.
	HMAC string `json:"hmac,omitempty"`
	// Signature is an armored SSH signature (ssh-keygen -Y sign, namespace
	// dlqctl-approval) over approval.Message of the digest, Principal, At
	// and ExpiresAt (as written). Principal is who signed as listed in
	// allowed_signers (By repeats it), Key the signing key's SHA256
	// fingerprint.
	Signature string `json:"signature,omitempty"`
	Principal string `json:"principal,omitempty"`
	Key       string `json:"key,omitempty"`
}

// Signed says the approval is an SSH signature.
func (a Approval) Signed() bool { return a.Signature != "" }

// Message is the text the approval's signature is over.
func (p *Plan) Message(a Approval) []byte {
	return approval.Message(p.Digest, a.Principal, a.At.Text(), a.ExpiresAt.Text())
}

// approvalMAC is over the instants of the approval's times, not their
// text: no one checks an HMAC by hand, and its key-holder could rewrite
// any of it anyway.
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
	a := Approval{By: by, At: approval.NewStamp(now), ExpiresAt: approval.NewStamp(now.Add(ttl))}
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
	a := Approval{By: principal, Principal: principal, At: approval.NewStamp(now), ExpiresAt: approval.NewStamp(now.Add(ttl)), Key: approval.Fingerprint(s.PublicKey())}
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
	// means 1). Toward two or more only signatures count.
	Required int
	// MaxTTL is the longest an approval may last, from its time to its
	// expiry (0: approval.DefaultMaxTTL).
	MaxTTL time.Duration
	// DistinctApprover: neither the planner nor Applier may approve.
	DistinctApprover bool
	Applier          string
	Now              time.Time
	// After, when set, refuses approvals recorded before it: going on past
	// a failed gate needs approvals given after the halt.
	After time.Time
}

func (pol ApprovalPolicy) required() int { return max(pol.Required, 1) }

func (pol ApprovalPolicy) maxTTL() time.Duration { return cmp.Or(pol.MaxTTL, approval.DefaultMaxTTL) }

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
	// Problem says why it is not valid ("" when it is).
	Problem string
	// Uncounted says why an approval that is not refused does not count
	// toward the quorum: its approver or key counted already, or it is an
	// HMAC and the quorum is of two or more. "" when it counts, or is
	// valid and simply not needed.
	Uncounted string
	// Counted: valid and by an approver not counted already.
	Counted bool
	// who and key are whom it counts as and with which key: the principal
	// and the key's fingerprint for a signature, the name and the key
	// (or the shared key) for an HMAC.
	who, key string
}

// Why is what the verdict holds against the approval, for a person:
// "approval by NAME: why", or "" when it counts or is simply not needed.
func (v Verdict) Why() string {
	switch {
	case v.Problem != "":
		return fmt.Sprintf("approval by %s: %s", v.Approval.By, v.Problem)
	case v.Uncounted != "":
		return fmt.Sprintf("approval by %s: not counted: %s", v.Approval.By, v.Uncounted)
	}
	return ""
}

// Judge gives every approval of p its verdict under pol and says how many
// more approvals the policy needs. One approver counts once whatever
// kinds of approval they gave (a principal's signature and an HMAC under
// the same name are one approver), one key counts once, and toward a
// quorum of two or more an HMAC approval never counts: whoever holds the
// HMAC key, as the applying host does, can make one under any name.
func (p *Plan) Judge(pol ApprovalPolicy) (verdicts []Verdict, needed int) {
	people, keys := map[string]bool{}, map[string]bool{}
	counted := 0
	for _, a := range p.Approvals {
		v := p.judge(pol, a)
		// Once enough are counted, a further valid approval is valid and
		// simply not needed; before, a repeat is named as such.
		if v.Problem == "" && v.Uncounted == "" && counted < pol.required() {
			switch {
			case people[v.who]:
				v.Uncounted = fmt.Sprintf("%s already approved; one approver counts once, whatever kinds of approval they gave", v.who)
			case keys[v.key]:
				v.Uncounted = fmt.Sprintf("made with a key (%s) that another counted approval used; one key counts once", v.key)
			default:
				people[v.who], keys[v.key], v.Counted = true, true, true
				counted++
			}
		}
		verdicts = append(verdicts, v)
	}
	return verdicts, max(pol.required()-counted, 0)
}

// CheckApprovals returns the approvals that meet the policy (as many as it
// requires, by distinct approvers), or says why there are not enough: each
// approval's problem is listed once.
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
		if why := v.Why(); why != "" {
			problems = append(problems, why)
		}
	}
	if needed == 0 {
		return ok, nil
	}
	msg := strings.Join(problems, "; ")
	if pol.required() > 1 {
		if msg != "" {
			msg += "; "
		}
		msg += fmt.Sprintf("%d of the %d approvals required by distinct approvers (policy.approvals_required; SSH signatures only); %d more needed", len(ok), pol.required(), needed)
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
	return !a.Signed() && hmac.Equal([]byte(approvalMAC(key, p.Digest, a)), []byte(a.HMAC)) && now.Before(a.ExpiresAt.Time)
}

// judge checks one approval on its own: who made it and with what key,
// then its times and its approver against the policy.
func (p *Plan) judge(pol ApprovalPolicy, a Approval) Verdict {
	v := Verdict{Approval: a}
	if !a.Signed() && !pol.SignaturesOnly && pol.required() > 1 {
		v.Uncounted = fmt.Sprintf("an HMAC approval; toward a quorum of %d (policy.approvals_required) only SSH signatures count, since whoever holds the HMAC key, as the applying host does, can make one under any name", pol.required())
		return v
	}
	v.Problem = p.credentialProblem(pol, a, &v)
	if v.Problem == "" {
		v.Problem = p.timeAndPersonProblem(pol, a)
	}
	return v
}

// credentialProblem checks that the approval was made by whom it names,
// with a key that may approve: its signature and signer, or its HMAC.
func (p *Plan) credentialProblem(pol ApprovalPolicy, a Approval, v *Verdict) string {
	if a.Signed() {
		return p.signatureProblem(pol, a, v)
	}
	return p.hmacProblem(pol, a, v)
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
	v.who, v.key = a.Principal, fp
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
	v.who = a.By
	v.key = "hmac:" + a.By
	if pol.KeyFor == nil {
		// One shared key writes any name: however many names it signed
		// under, it is one approval.
		v.key = "the shared approval key"
	}
	return ""
}

// timeAndPersonProblem judges an approval's times whenever it is checked,
// whoever wrote it: a hand-signed approval is held to the lifetime cap and
// to the clock as one made by approve is.
func (p *Plan) timeAndPersonProblem(pol ApprovalPolicy, a Approval) string {
	at, exp := a.At.Time, a.ExpiresAt.Time
	switch {
	case at.After(pol.Now.Add(approval.ClockSkew)):
		return fmt.Sprintf("given at %s, later than this host's clock (%s) by more than the %s clock skew allowed", stamp(at), stamp(pol.Now), approval.FormatTTL(approval.ClockSkew))
	case !exp.After(at):
		return fmt.Sprintf("expires at %s, not after it was given (%s)", stamp(exp), stamp(at))
	case exp.Sub(at) > pol.maxTTL():
		return fmt.Sprintf("valid for %s (%s to %s), longer than an approval may last, %s (policy.max_approval_ttl)",
			approval.FormatTTL(exp.Sub(at)), stamp(at), stamp(exp), approval.FormatTTL(pol.maxTTL()))
	case !pol.Now.Before(exp):
		return fmt.Sprintf("expired at %s", stamp(exp))
	case !pol.After.IsZero() && at.Before(pol.After):
		given, halted := stamp(at), stamp(pol.After)
		if given == halted {
			given, halted = at.UTC().Format(time.RFC3339Nano), pol.After.UTC().Format(time.RFC3339Nano)
		}
		return fmt.Sprintf("given at %s, before the run was halted at %s", given, halted)
	case pol.DistinctApprover && a.By == p.PlannedBy:
		return "the planner cannot approve their own plan (distinct approver policy)"
	case pol.DistinctApprover && pol.Applier != "" && a.By == pol.Applier:
		return "the applier cannot approve the run they apply (distinct approver policy)"
	}
	return ""
}

// stamp is a time as refusals print it: RFC 3339 in UTC, to the second.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
