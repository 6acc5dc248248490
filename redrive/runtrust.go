package redrive

import (
	"errors"
	"fmt"
)

// RunTrust is how resume checks a run's journal before it believes it.
type RunTrust struct {
	// Key is the approval key the journal is chained with (see chain.go):
	// an HMAC-approved run, or a one-step run signed with the key in
	// effect then. Nil when the journal is not chained.
	Key []byte
	// Unauthenticated: the run was approved by SSH signatures, and the
	// applying host holds no secret to chain its journal with, so nothing
	// the journal says is taken on its word where believing it could lose
	// or move data: see State.Distrust.
	Unauthenticated bool
}

// ErrUnsignedApproved: an HMAC-approved run's journal carries no MACs.
var ErrUnsignedApproved = errors.New("its run has an HMAC approval: a journal made by dlqctl is then signed")

// TrustRun decides how to check the journal whose run-start record (not
// yet believed) is start. The approvals it records must verify under pol
// (signature and signer; expiry, quorum and distinct approvers are checked
// when the run goes on, against every approval it may go on under): a
// hand-written journal cannot name approvals no one gave.
func (p *Plan) TrustRun(start Record, pol ApprovalPolicy) (RunTrust, error) {
	approvals := start.RecordedApprovals()
	chained := start.MAC != ""
	// The signers are judged as they stood when the run started under
	// them (a key's valid-before may have passed since).
	sig := pol
	if !start.At.IsZero() {
		sig.Now = start.At
	}
	var t RunTrust
	for i, a := range approvals {
		if i > 0 && a.Signed() != approvals[0].Signed() {
			return t, errors.New("the run's approvals mix HMACs and signatures, which dlqctl never records together")
		}
		var v Verdict
		if why := p.credentialProblem(sig, a, &v); why != "" {
			return t, fmt.Errorf("the run's approval by %s: %s", a.By, why)
		}
	}
	switch {
	case len(approvals) > 0 && approvals[0].Signed():
		t.Unauthenticated = true
	case len(approvals) > 0:
		key, err := pol.KeyOf(approvals[0].By)
		if err != nil {
			return t, err
		}
		if !chained {
			return t, fmt.Errorf("%w, but %w", ErrUnsigned, ErrUnsignedApproved)
		}
		t.Key = key
	case chained:
		key, err := pol.KeyOf("")
		if err != nil {
			return t, fmt.Errorf("the journal is signed: %w", err)
		}
		t.Key = key
	}
	return t, nil
}

// Distrust takes back what an unauthenticated journal claims had reached
// a destination: an entry journaled as published (or, for resolve,
// archived) but not removed goes back to "outcome unknown". Resume then
// checks it against the DLQ and the destination (an atomic mover's entry
// still in the DLQ was not moved; a found copy is removed from the DLQ) or
// sends it again with the same identity, journaled as ambiguous; it never
// removes a DLQ entry on the journal's word alone. What else the journal
// claims can only make resume skip entries (they stay in the DLQ) or stop:
// entries are the plan's, whose digest the run's signed approvals cover.
func (st *State) Distrust() {
	for i, c := range st.step {
		switch stepNames[c] {
		case RecPublished, RecArchive:
			st.step[i] = codeOf(RecIntent)
		}
	}
}
