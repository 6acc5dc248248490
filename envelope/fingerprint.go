package envelope

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Fingerprint verification results (the canonical envelope form, docs/json.md, dlqctl.show/v1).
const (
	FingerprintMatch        = "match"
	FingerprintMismatch     = "mismatch"
	FingerprintUnverifiable = "unverifiable"
	FingerprintComputed     = "computed"
)

const sha256Prefix = "sha256:"

// ComputeFingerprint is "sha256:" and the lowercase hex SHA-256 of payload.
func ComputeFingerprint(payload []byte) string {
	sum := sha256.Sum256(payload)
	return sha256Prefix + hex.EncodeToString(sum[:])
}

// FillFingerprint computes the fingerprint when the entry carries none.
func (e *Envelope) FillFingerprint() {
	if e.Fingerprint == "" {
		e.Fingerprint = ComputeFingerprint(e.Payload)
		e.FingerprintComputed = true
	}
}

// CarriedFingerprint is the fingerprint as the entry carried it: empty when
// dlqctl computed it. Export and moves write this one, so that a computed
// fingerprint never passes for one the producer vouched for.
func (e Envelope) CarriedFingerprint() string {
	if e.FingerprintComputed {
		return ""
	}
	return e.Fingerprint
}

// VerifyFingerprint checks a carried sha256 fingerprint against the payload.
func (e Envelope) VerifyFingerprint() string {
	switch {
	case e.FingerprintComputed:
		return FingerprintComputed
	case !strings.HasPrefix(strings.ToLower(e.Fingerprint), sha256Prefix):
		return FingerprintUnverifiable
	case strings.EqualFold(e.Fingerprint, ComputeFingerprint(e.Payload)):
		return FingerprintMatch
	}
	return FingerprintMismatch
}
