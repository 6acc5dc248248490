// Package testproc holds what the test harnesses that run real servers
// share: a free loopback port and a log that the server's output
// goroutines write to while tests read it (redistest, pgtest); the Java
// servers' lifecycle through their scripts (JavaServer: kafkatest,
// pulsartest, sqstest); and one server per test binary, started by the
// first test that needs it (Shared).
package testproc

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
)

// FreePort asks the kernel for a free loopback TCP port. Another process
// can take it before the server binds it; harnesses retry on that.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}

// Log collects a server's output from the exec goroutines.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Log) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Log) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Tail is the last max bytes of the log, for a failing test's message.
func (b *Log) Tail(max int) string {
	s := b.String()
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return s
}

// SkipJavaServerInShort skips t in the fast tier (go test -short, i.e.
// scripts/test -short): tests that need a Java server (Pulsar, Kafka,
// ElasticMQ) run only in the full run, which is README's test command.
// It says so, so that no skip is silent.
func SkipJavaServerInShort(t testing.TB, server string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s, a Java server, and the -short tier starts none (the full run, scripts/test, runs it)", server)
	}
}
