// Package sshtest makes SSH keys with the real ssh-keygen and runs a real
// ssh-agent, for the tests of approval signatures.
package sshtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Keygen makes a key of type typ ("ed25519", "ecdsa", "rsa") at dir/name
// (and dir/name.pub) with ssh-keygen, without a passphrase unless one is
// given, and returns the private key's path.
func Keygen(t testing.TB, dir, name, typ, passphrase string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	args := []string{"-q", "-t", typ, "-N", passphrase, "-C", name, "-f", path}
	if typ == "rsa" {
		args = append(args, "-b", "2048")
	}
	if out, err := exec.Command("ssh-keygen", args...).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen %v: %v\n%s", args, err, out)
	}
	return path
}

// PublicKey is the authorized_keys line of the key at path (path.pub).
func PublicKey(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Agent starts an ssh-agent on a fresh socket, stopped by PID when the
// test ends, and returns its socket.
func Agent(t testing.TB) string {
	t.Helper()
	// A short path: unix socket paths are limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "agent")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s")
	cmd := exec.Command("ssh-agent", "-D", "-a", sock)
	// The socket file appears at bind(2), before the agent listens: a
	// client then is refused. The agent prints its environment lines once
	// it listens, so its first line of output is the readiness signal.
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ssh-agent: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
	})
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && !strings.HasPrefix(line, "SSH_AUTH_SOCK=") {
			err = fmt.Errorf("unexpected first line %q", line)
		}
		ready <- err
		io.Copy(io.Discard, out)
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("ssh-agent on %s: %v", sock, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("ssh-agent did not listen on %s within 10s", sock)
	}
	return sock
}

// Add adds the private key at path to the agent at sock with ssh-add.
func Add(t testing.TB, sock, path string) {
	t.Helper()
	cmd := exec.Command("ssh-add", "-q", path)
	cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add %s: %v\n%s", path, err, out)
	}
}
