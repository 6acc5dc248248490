// Package approval holds what makes an approval something the applying host
// cannot forge: SSH signatures in the format `ssh-keygen -Y sign` writes
// (SSHSIG), the allowed_signers file that says whose keys count, the
// canonical message an approver signs, and the floor under HMAC keys and
// approval lifetimes. It knows nothing of plans: callers pass plain values.
package approval

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Namespace is the SSHSIG namespace of every dlqctl approval: a signature
// made for another purpose (a git commit's, namespace "git") never verifies
// as an approval, and an approval never as a commit.
const Namespace = "dlqctl-approval"

const (
	sigMagic   = "SSHSIG"
	sigVersion = 1
	armorBegin = "-----BEGIN SSH SIGNATURE-----"
	armorEnd   = "-----END SSH SIGNATURE-----"
)

// ErrBadSignature: the signature is not over this message, in this
// namespace, by the key it carries.
var ErrBadSignature = errors.New("signature does not verify")

// envelope is the SSHSIG blob (openssh PROTOCOL.sshsig).
type envelope struct {
	Version   uint32
	PublicKey []byte
	Namespace string
	Reserved  []byte
	HashAlg   string
	Signature []byte
}

// signedData is what the key actually signs: the namespace and a hash of
// the message, behind the magic preamble.
func signedData(namespace, hashAlg string, digest []byte) []byte {
	return append([]byte(sigMagic), ssh.Marshal(struct {
		Namespace string
		Reserved  []byte
		HashAlg   string
		Hash      []byte
	}{namespace, nil, hashAlg, digest})...)
}

func hashOf(alg string) (hash.Hash, error) {
	switch alg {
	case "sha512":
		return sha512.New(), nil
	case "sha256":
		return sha256.New(), nil
	}
	return nil, fmt.Errorf("hash algorithm %q is not sha256 or sha512", alg)
}

// Sign signs message in namespace with s and returns the armored signature,
// byte for byte what `ssh-keygen -Y sign -n NAMESPACE` writes. RSA keys sign
// with rsa-sha2-512, as ssh-keygen does; SHA-1 RSA signatures are never made.
func Sign(s ssh.Signer, namespace string, message []byte) (string, error) {
	if namespace == "" {
		return "", errors.New("an SSH signature needs a namespace")
	}
	if k, ok := s.(*KeySigner); ok {
		s = k.Signer
	}
	h := sha512.Sum512(message)
	data := signedData(namespace, "sha512", h[:])
	var sig *ssh.Signature
	var err error
	if s.PublicKey().Type() == ssh.KeyAlgoRSA {
		as, ok := s.(ssh.AlgorithmSigner)
		if !ok {
			return "", errors.New("this RSA key cannot sign with rsa-sha2-512")
		}
		sig, err = as.SignWithAlgorithm(rand.Reader, data, ssh.KeyAlgoRSASHA512)
	} else {
		sig, err = s.Sign(rand.Reader, data)
	}
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	blob := append([]byte(sigMagic), ssh.Marshal(envelope{
		Version: sigVersion, PublicKey: s.PublicKey().Marshal(), Namespace: namespace,
		HashAlg: "sha512", Signature: ssh.Marshal(sig),
	})...)
	return armor(blob), nil
}

func armor(blob []byte) string {
	enc := base64.StdEncoding.EncodeToString(blob)
	var b strings.Builder
	b.WriteString(armorBegin + "\n")
	for len(enc) > 70 {
		b.WriteString(enc[:70] + "\n")
		enc = enc[70:]
	}
	b.WriteString(enc + "\n" + armorEnd + "\n")
	return b.String()
}

func unarmor(text string) ([]byte, error) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, armorBegin) || !strings.HasSuffix(text, armorEnd) {
		return nil, errors.New("not an SSH signature (no BEGIN/END SSH SIGNATURE lines)")
	}
	body := strings.Join(strings.Fields(text[len(armorBegin):len(text)-len(armorEnd)]), "")
	blob, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("SSH signature: %v", err)
	}
	return blob, nil
}

// Signed is what a verified signature says: the key that made it.
type Signed struct {
	Key ssh.PublicKey
}

// Fingerprint is the key's SHA256 fingerprint as ssh-keygen -l prints it.
func Fingerprint(k ssh.PublicKey) string { return ssh.FingerprintSHA256(k) }

// Verify checks an armored signature over message in namespace, and returns
// the key that made it. It checks only that the signature is sound; whether
// that key may approve is the allowed_signers file's to say.
func Verify(armored, namespace string, message []byte) (Signed, error) {
	blob, err := unarmor(armored)
	if err != nil {
		return Signed{}, err
	}
	if !bytes.HasPrefix(blob, []byte(sigMagic)) {
		return Signed{}, errors.New("SSH signature: no SSHSIG preamble")
	}
	var env envelope
	if err := ssh.Unmarshal(blob[len(sigMagic):], &env); err != nil {
		return Signed{}, fmt.Errorf("SSH signature: %v", err)
	}
	if env.Version != sigVersion {
		return Signed{}, fmt.Errorf("SSH signature: version %d, only %d is known", env.Version, sigVersion)
	}
	if env.Namespace != namespace {
		return Signed{}, fmt.Errorf("%w: made for namespace %q, not %q (a signature made for something else, such as a git commit)", ErrBadSignature, env.Namespace, namespace)
	}
	key, err := ssh.ParsePublicKey(env.PublicKey)
	if err != nil {
		return Signed{}, fmt.Errorf("SSH signature: its key: %v", err)
	}
	if _, isCert := key.(*ssh.Certificate); isCert {
		return Signed{}, errors.New("SSH signature made with a certificate: certificates (cert-authority) are not supported; list the key itself in allowed_signers")
	}
	var sig ssh.Signature
	if err := ssh.Unmarshal(env.Signature, &sig); err != nil {
		return Signed{}, fmt.Errorf("SSH signature: %v", err)
	}
	if sig.Format == ssh.KeyAlgoRSA {
		return Signed{}, fmt.Errorf("%w: an RSA signature with SHA-1 (ssh-rsa) is refused; sign with rsa-sha2-512", ErrBadSignature)
	}
	h, err := hashOf(env.HashAlg)
	if err != nil {
		return Signed{}, fmt.Errorf("SSH signature: %v", err)
	}
	h.Write(message)
	if err := key.Verify(signedData(env.Namespace, env.HashAlg, h.Sum(nil)), &sig); err != nil {
		return Signed{}, fmt.Errorf("%w: the signed message differs (an approval or plan edited, or copied from another plan)", ErrBadSignature)
	}
	return Signed{Key: key}, nil
}
