package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/internal/sshtest"
)

var t0 = time.Date(2026, 12, 3, 13, 0, 0, 123456789, time.UTC)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Every key type signs from a key file, and ssh-keygen -Y verify accepts
// what dlqctl signed over the documented message; dlqctl accepts what
// ssh-keygen -Y sign signed.
func TestSignaturesInteroperateWithSSHKeygen(t *testing.T) {
	dir := t.TempDir()
	msg := testMessage("sha256:abc", "alice@example.com")
	for _, typ := range []string{"ed25519", "ecdsa", "rsa"} {
		t.Run(typ, func(t *testing.T) {
			key := sshtest.Keygen(t, dir, typ, typ, "")
			s, err := LoadSigner(key, "")
			if err != nil {
				t.Fatal(err)
			}
			sig, err := Sign(s, Namespace, msg)
			if err != nil {
				t.Fatal(err)
			}
			allowed := filepath.Join(dir, typ+".allowed")
			writeFile(t, allowed, "alice@example.com "+sshtest.PublicKey(t, key)+"\n")
			sigFile := filepath.Join(dir, typ+".sig")
			writeFile(t, sigFile, sig)
			cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", allowed, "-I", "alice@example.com", "-n", Namespace, "-s", sigFile)
			cmd.Stdin = bytes.NewReader(msg)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("ssh-keygen -Y verify refused dlqctl's signature: %v\n%s", err, out)
			}
			// The other way round.
			msgFile := filepath.Join(dir, typ+".msg")
			writeFile(t, msgFile, string(msg))
			if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-f", key, "-n", Namespace, msgFile).CombinedOutput(); err != nil {
				t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
			}
			theirs, _ := os.ReadFile(msgFile + ".sig")
			got, err := Verify(string(theirs), Namespace, msg)
			if err != nil {
				t.Fatalf("ssh-keygen's signature refused: %v", err)
			}
			if Fingerprint(got.Key) != Fingerprint(s.PublicKey()) {
				t.Error("verified under another key")
			}
			// Another message does not verify.
			if _, err := Verify(sig, Namespace, testMessage("sha256:abd", "alice@example.com")); !errors.Is(err, ErrBadSignature) {
				t.Errorf("a signature verified over another plan: %v", err)
			}
		})
	}
}

// A git commit signature (namespace "git") is not an approval.
func TestAnotherNamespaceIsRefused(t *testing.T) {
	dir := t.TempDir()
	key := sshtest.Keygen(t, dir, "k", "ed25519", "")
	msgFile := filepath.Join(dir, "m")
	msg := testMessage("sha256:abc", "bob")
	writeFile(t, msgFile, string(msg))
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-f", key, "-n", "git", msgFile).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	sig, _ := os.ReadFile(msgFile + ".sig")
	_, err := Verify(string(sig), Namespace, msg)
	if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), `namespace "git"`) {
		t.Errorf("a git signature as an approval: %v", err)
	}
}

// A public key signs through a real ssh-agent; without the agent, or with
// an agent that lacks the key, there is no private key to sign with.
func TestSignThroughTheAgent(t *testing.T) {
	dir := t.TempDir()
	key := sshtest.Keygen(t, dir, "k", "ed25519", "")
	other := sshtest.Keygen(t, dir, "o", "rsa", "")
	sock := sshtest.Agent(t)
	if _, err := LoadSigner(key+".pub", ""); !errors.Is(err, ErrNoPrivateKey) {
		t.Errorf("a public key without an agent: %v", err)
	}
	if _, err := LoadSigner(key+".pub", sock); !errors.Is(err, ErrNoPrivateKey) {
		t.Errorf("a public key the agent does not hold: %v", err)
	}
	sshtest.Add(t, sock, key)
	sshtest.Add(t, sock, other)
	for _, k := range []string{key, other} {
		s, err := LoadSigner(k+".pub", sock)
		if err != nil {
			t.Fatal(err)
		}
		if s.Via != "ssh-agent" {
			t.Errorf("signed via %s", s.Via)
		}
		msg := testMessage("sha256:abc", "carol")
		sig, err := Sign(s, Namespace, msg)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(sig, Namespace, msg); err != nil {
			t.Errorf("%s through the agent: %v", k, err)
		}
	}
	// A passphrase-protected key file: found in the agent through its .pub.
	locked := sshtest.Keygen(t, dir, "locked", "ed25519", "")
	if out, err := exec.Command("ssh-keygen", "-q", "-p", "-P", "", "-N", "secret-passphrase", "-f", locked).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := LoadSigner(locked, ""); !errors.Is(err, ErrNoPrivateKey) || !strings.Contains(err.Error(), "passphrase-protected") {
		t.Errorf("a locked key without an agent: %v", err)
	}
	if _, err := LoadSigner(locked, sock); !errors.Is(err, ErrNoPrivateKey) || !strings.Contains(err.Error(), "ssh-add") {
		t.Errorf("a locked key the agent does not hold: %v", err)
	}
	sshtest.Add(t, sock, unlockedCopy(t, locked))
	s, err := LoadSigner(locked, sock)
	if err != nil {
		t.Fatalf("a locked key the agent holds: %v", err)
	}
	s.Close()
}

func TestAllowedSigners(t *testing.T) {
	dir := t.TempDir()
	a := sshtest.Keygen(t, dir, "a", "ed25519", "")
	b := sshtest.Keygen(t, dir, "b", "ecdsa", "")
	c := sshtest.Keygen(t, dir, "c", "ed25519", "")
	text := strings.Join([]string{
		"# approvers",
		"alice@example.com,\"al ice\" " + sshtest.PublicKey(t, a),
		`*@ops.example.com,!mallory@ops.example.com namespaces="git,dlqctl-approval",valid-after="20260101",valid-before="202612312359Z" ` + sshtest.PublicKey(t, b),
		`carol namespaces="git" ` + sshtest.PublicKey(t, c),
		`ca@example.com cert-authority ` + sshtest.PublicKey(t, c),
		"",
	}, "\n")
	as, err := ParseAllowedSigners(strings.NewReader(text), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if len(as.Signers) != 3 || len(as.CertAuthority) != 1 || as.CertAuthority[0] != 5 {
		t.Fatalf("parsed %d signers, cert-authority lines %v", len(as.Signers), as.CertAuthority)
	}
	key := func(p string) *KeySigner {
		s, err := LoadSigner(p, "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ka, kb, kc := key(a).PublicKey(), key(b).PublicKey(), key(c).PublicKey()
	if err := as.Check(ka, "alice@example.com", Namespace, t0); err != nil {
		t.Error(err)
	}
	if err := as.Check(kb, "bob@ops.example.com", Namespace, t0); err != nil {
		t.Error(err)
	}
	for name, err := range map[string]error{
		"another principal":  as.Check(ka, "bob", Namespace, t0),
		"excluded principal": as.Check(kb, "mallory@ops.example.com", Namespace, t0),
		"not yet valid":      as.Check(kb, "bob@ops.example.com", Namespace, time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC)),
		"no longer valid":    as.Check(kb, "bob@ops.example.com", Namespace, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)),
		"namespace":          as.Check(kc, "carol", Namespace, t0),
		"cert-authority key": as.Check(kc, "ca@example.com", Namespace, t0),
	} {
		if !errors.Is(err, ErrNotAllowed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := as.PrincipalOf(ka); got != "" {
		t.Errorf("a key listed under two names has one principal: %q", got)
	}
	if got := as.PrincipalOf(kc); got != "carol" {
		t.Errorf("PrincipalOf = %q, want carol", got)
	}
	for _, bad := range []string{
		"alice",
		"alice ssh-ed25519 AAAAnotbase64",
		`alice bogus="x" ` + sshtest.PublicKey(t, a),
		`alice valid-after="2026" ` + sshtest.PublicKey(t, a),
	} {
		if _, err := ParseAllowedSigners(strings.NewReader(bad), time.UTC); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}

func TestMatchList(t *testing.T) {
	for _, c := range []struct {
		s, list string
		want    bool
	}{
		{"alice", "alice", true},
		{"alice", "bob,alice", true},
		{"alice", "al?ce", true},
		{"alice", "a*", true},
		{"alice", "*,!alice", false},
		{"alice", "!alice,*", false},
		{"alicia", "alice", false},
		{"", "*", true},
		{"x", "", false},
	} {
		if got := MatchList(c.s, c.list); got != c.want {
			t.Errorf("MatchList(%q, %q) = %v", c.s, c.list, got)
		}
	}
}

func TestWeakKeysAndLongTTLsAreRefused(t *testing.T) {
	for _, k := range []string{"", "short", strings.Repeat(" ", 32), strings.Repeat("a", 64), strings.Repeat("ab", 20)} {
		if err := CheckHMACKey([]byte(k)); err == nil {
			t.Errorf("key %q accepted", k)
		}
	}
	if err := CheckHMACKey([]byte("0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0")); err != nil {
		t.Error(err)
	}
	if CheckTTL(0, 0) == nil || CheckTTL(25*time.Hour, DefaultMaxTTL) == nil || CheckTTL(time.Hour, DefaultMaxTTL) != nil {
		t.Error("CheckTTL")
	}
}

// unlockedCopy is the key at path without its passphrase, in another file,
// so that ssh-add can add it without asking.
func unlockedCopy(t *testing.T, path string) string {
	b, _ := os.ReadFile(path)
	cp := path + ".unlocked"
	writeFile(t, cp, string(b))
	if out, err := exec.Command("ssh-keygen", "-q", "-p", "-P", "secret-passphrase", "-N", "", "-f", cp).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return cp
}

// BenchmarkVerify is the cost apply pays per signed approval.
func BenchmarkVerify(b *testing.B) {
	for _, typ := range []string{"ed25519", "ecdsa", "rsa"} {
		b.Run(typ, func(b *testing.B) {
			key := sshtest.Keygen(b, b.TempDir(), typ, typ, "")
			s, err := LoadSigner(key, "")
			if err != nil {
				b.Fatal(err)
			}
			msg := testMessage("sha256:abc", "alice")
			sig, err := Sign(s, Namespace, msg)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := Verify(sig, Namespace, msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// testMessage is the message of an approval of digest by principal, given
// at t0 for an hour.
func testMessage(digest, principal string) []byte {
	return Message(digest, principal, NewStamp(t0).Text(), NewStamp(t0.Add(time.Hour)).Text())
}

// A stamp read keeps its text, which is what a signature is over; one made
// here, or whose instant changed, is written in UTC.
func TestStampKeepsItsText(t *testing.T) {
	for _, text := range []string{"2026-11-29T13:00:00+01:00", "2026-11-29T12:00:00.500Z", "2026-11-29T12:00:00+00:00", "2026-11-29T12:00:00,5Z"} {
		var s Stamp
		if err := json.Unmarshal([]byte(`"`+text+`"`), &s); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(s)
		if s.Text() != text || string(b) != `"`+text+`"` {
			t.Errorf("%s: text %q, written %s", text, s.Text(), b)
		}
		s.Time = s.Add(time.Second)
		if s.Text() != s.UTC().Format(time.RFC3339Nano) {
			t.Errorf("%s: a changed instant kept the old text %q", text, s.Text())
		}
	}
	if got := NewStamp(t0.In(time.FixedZone("", 3600))).Text(); got != "2026-12-03T13:00:00.123456789Z" {
		t.Errorf("a stamp made here: %q", got)
	}
	var s Stamp
	if err := json.Unmarshal([]byte(`"2026-11-29 12:00:00Z"`), &s); err == nil {
		t.Error("a time that is not RFC 3339 was read")
	}
}

// A key of hex digits holds half as many bytes as it has digits.
func TestKeyBytes(t *testing.T) {
	for key, want := range map[string]int{
		strings.Repeat("0f", 32): 32, strings.Repeat("0f", 16): 16, "k-one-0123456789abcdef0123456789": 32, "0123456789ABCDEF": 8,
	} {
		if n, _ := KeyBytes([]byte(key)); n != want {
			t.Errorf("KeyBytes(%q) = %d, want %d", key, n, want)
		}
	}
	if err := CheckHMACKey([]byte("0f1e2d3c4b5a69788796a5b4c3d2e1f0")); !errors.Is(err, ErrShortKey) || !strings.Contains(err.Error(), "32 hex digits are 16 bytes") {
		t.Errorf("openssl rand -hex 16: %v", err)
	}
	for d, want := range map[time.Duration]string{24 * time.Hour: "24h", 90 * time.Minute: "1h30m", 5 * time.Minute: "5m", 87672 * time.Hour: "87672h", 90 * time.Second: "1m30s"} {
		if got := FormatTTL(d); got != want {
			t.Errorf("FormatTTL(%s) = %q, want %q", d, got, want)
		}
	}
}
