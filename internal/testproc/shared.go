package testproc

import (
	"fmt"
	"io"
	"sync"
	"testing"
)

// Server is what a test-server harness's process offers the helpers
// below.
type Server interface {
	Stop() error
	LogTail(lines int) string
}

// StartForTest starts a server that the -short tier does without (a Java
// broker, RabbitMQ, nats-server) for t alone with start, and stops it in
// t.Cleanup. Under -short it skips t, saying it needs server ("an Apache
// Kafka broker"); a server that cannot start fails t, so that a missing
// server is never taken for a passing test.
func StartForTest[S Server](t testing.TB, server string, start func() (S, error)) S {
	t.Helper()
	SkipServerInShort(t, server)
	s, err := start()
	if err != nil {
		t.Fatalf("needs %s, which did not start: %v", server, err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop %s: %v", server, err)
		}
	})
	return s
}

// Shared is one server for a whole test binary, started by the first test
// that asks for it (Get), so that the tests of a package that need no
// server run without one: the -short tier starts none of these servers.
// TestMain calls Finish after m.Run to stop it.
type Shared[S Server] struct {
	// Server names it for messages: "an Apache Kafka broker".
	Server string
	// Start starts it (the harness's StartProcess).
	Start func() (S, error)

	once    sync.Once
	srv     S
	err     error
	started bool
}

// Get is the package's server, started on the first call. Under -short it
// skips t (the fast tier starts none of these servers); a server that
// cannot start fails t, and every later test that asks, with the same
// error.
func (s *Shared[S]) Get(t testing.TB) S {
	t.Helper()
	SkipServerInShort(t, s.Server)
	s.once.Do(func() {
		s.srv, s.err = s.Start()
		s.started = s.err == nil
	})
	if s.err != nil {
		t.Fatalf("needs %s, which did not start: %v", s.Server, s.err)
	}
	return s.srv
}

// Finish stops the server if a test started it, and returns the exit code
// of the test binary: code, or 1 when the stop failed. When code says a
// test failed it writes the end of the server's log to w first.
func (s *Shared[S]) Finish(code int, w io.Writer) int {
	if !s.started {
		return code
	}
	if code != 0 {
		fmt.Fprintf(w, "log tail of %s:\n%s\n", s.Server, s.srv.LogTail(30))
	}
	if err := s.srv.Stop(); err != nil {
		fmt.Fprintf(w, "FAIL: stop %s: %v\n", s.Server, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
