package approval

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// KeySigner signs approvals; Close lets go of the agent connection, if any.
type KeySigner struct {
	ssh.Signer
	// Via says where the private key is: "key file PATH" or "ssh-agent".
	Via   string
	close func() error
}

// Close ends the agent connection.
func (k *KeySigner) Close() error {
	if k.close == nil {
		return nil
	}
	return k.close()
}

// ErrNoPrivateKey: there is nothing to sign with.
var ErrNoPrivateKey = errors.New("no private key to sign with")

// LoadSigner opens the key at path, as ssh-keygen -Y sign -f does: an
// unencrypted private key file signs by itself; a public key (or a private
// key file that is passphrase-protected, through its PATH.pub) signs
// through the ssh-agent at agentSocket (SSH_AUTH_SOCK), which must hold its
// private half. Hardware keys (sk-ssh-ed25519@openssh.com and the like)
// sign through the agent when it can sign with them.
func LoadSigner(path, agentSocket string) (*KeySigner, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--sign-with: %w", err)
	}
	what := "a public key"
	pub, _, _, _, perr := ssh.ParseAuthorizedKey(b)
	if perr != nil {
		what = "passphrase-protected (dlqctl asks for no passphrase)"
		s, err := ssh.ParsePrivateKey(b)
		var missing *ssh.PassphraseMissingError
		switch {
		case err == nil:
			return &KeySigner{Signer: s, Via: "key file " + path}, nil
		case errors.As(err, &missing) && missing.PublicKey != nil:
			pub = missing.PublicKey
		case errors.As(err, &missing):
			if pb, rerr := os.ReadFile(path + ".pub"); rerr == nil {
				pub, _, _, _, perr = ssh.ParseAuthorizedKey(pb)
			}
			if pub == nil {
				return nil, fmt.Errorf("--sign-with %s: the key is passphrase-protected and has no %s.pub to find it in ssh-agent with: add it to the agent (ssh-add %s) and give the .pub", path, path, path)
			}
		default:
			return nil, fmt.Errorf("--sign-with %s: neither an SSH private key nor a public key: %v", path, err)
		}
	}
	if _, ok := pub.(*ssh.Certificate); ok {
		return nil, fmt.Errorf("--sign-with %s: a certificate; dlqctl approvals are signed with plain keys", path)
	}
	return agentSigner(path, what, pub, agentSocket)
}

func agentSigner(path, what string, pub ssh.PublicKey, socket string) (*KeySigner, error) {
	fp := Fingerprint(pub)
	if socket == "" {
		return nil, fmt.Errorf("%w: %s is %s (%s) and SSH_AUTH_SOCK is not set, so no ssh-agent can sign with its private half (ssh-add it)", ErrNoPrivateKey, path, what, fp)
	}
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("%w: ssh-agent at SSH_AUTH_SOCK=%s: %v", ErrNoPrivateKey, socket, err)
	}
	ag := agent.NewClient(conn)
	signers, err := ag.Signers()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ssh-agent: %w", err)
	}
	want := pub.Marshal()
	for _, s := range signers {
		if bytes.Equal(s.PublicKey().Marshal(), want) {
			return &KeySigner{Signer: s, Via: "ssh-agent", close: conn.Close}, nil
		}
	}
	conn.Close()
	return nil, fmt.Errorf("%w: the ssh-agent at SSH_AUTH_SOCK holds %d keys, none of them %s (%s); add it with ssh-add", ErrNoPrivateKey, len(signers), fp, strings.TrimSpace(path))
}
