// Package testproc holds what the test harnesses that run real servers
// share: a free loopback port and a log that the server's output
// goroutines write to while tests read it; the lifecycle of a server
// process a harness runs itself (Process: redistest, natstest, pgtest);
// the Java servers' lifecycle through their scripts (JavaServer:
// kafkatest, pulsartest, sqstest); and one server per test binary,
// started by the first test that needs it (Shared: those, natstest and
// rabbitmqtest).
package testproc

import (
	"bytes"
	"fmt"
	"net"
	"strings"
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

// SkipServerInShort skips t in the fast tier (go test -short): tests that
// need a server slower to start than a test should wait for (a Java
// broker, RabbitMQ, nats-server) run only in the full run, which is
// README's test command. It says so, so that no skip is silent.
func SkipServerInShort(t testing.TB, server string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s, which the -short tier does not start (the full run, scripts/test, runs it)", server)
	}
}

// LastLines is the last n lines of text, for a failing test's report.
func LastLines(text string, n int) string {
	all := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return strings.Join(all, "\n")
}

// Lines is the last n lines of the log.
func (b *Log) Lines(n int) string { return LastLines(b.String(), n) }
