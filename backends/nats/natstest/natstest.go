// Package natstest runs a real nats-server with JetStream for tests: the
// binary is built once from its Go module by scripts/nats.sh (cached in
// ~/.cache/dlqctl), and each server listens on a free loopback port with
// its JetStream store in a temporary folder. There is no fake: a test that
// needs NATS and cannot get the server fails.
//
// Down kills the process (SIGKILL) and Up starts it again on the same port
// and store, so tests can lose the server mid-run and see what survives.
package natstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dlqctl/dlqctl/internal/testproc"
)

const (
	fetchTimeout = 10 * time.Minute
	readyTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
)

// Server is one running nats-server process.
type Server struct {
	bin     string
	dataDir string
	port    int

	mu      sync.Mutex
	proc    *testproc.Process // nil while Down
	log     *testproc.Log
	stopped bool
}

// serverName names the server in the messages of a test that needs it.
const serverName = "a nats-server"

// Start runs a server for the test alone and stops it in t.Cleanup. It is
// not for the -short tier. Tests of a package share one: see Shared.
func Start(t testing.TB) *Server {
	t.Helper()
	return testproc.StartForTest(t, serverName, StartProcess)
}

// Shared is one server for a package's tests, started by the first test
// that calls its Get and stopped by TestMain's Finish; under -short, Get
// skips the test and nothing starts.
func Shared() *testproc.Shared[*Server] {
	return &testproc.Shared[*Server]{Server: serverName, Start: StartProcess}
}

// Binary builds nats-server when it is not cached and returns its path.
func Binary() (string, error) {
	script, err := testproc.FindScript("scripts/nats.sh")
	if err != nil {
		return "", err
	}
	out, err := testproc.RunScript(fetchTimeout, nil, "NATS_WATCH_PID", script, "fetch")
	if err != nil {
		return "", fmt.Errorf("build nats-server: %w", err)
	}
	return strings.TrimSpace(out), nil
}

// StartProcess starts a server in a new temporary folder and waits until
// JetStream answers. The caller must call Stop.
func StartProcess() (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 {
		dir, err := os.MkdirTemp("", "natstest-")
		if err != nil {
			return nil, err
		}
		port, err := testproc.FreePort()
		if err != nil {
			return nil, err
		}
		s := &Server{bin: bin, dataDir: dir, port: port}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
		os.RemoveAll(dir)
	}
	return nil, lastErr
}

func (s *Server) start() error {
	s.log = &testproc.Log{}
	cmd := exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js",
		"-sd", filepath.Join(s.dataDir, "jetstream"), "--server_name", "dlqctl-test")
	cmd.SysProcAttr = sysProcAttr()
	proc, err := testproc.Launch(cmd, s.log)
	if err != nil {
		return fmt.Errorf("start nats-server: %w", err)
	}
	s.proc = proc
	if err := proc.WaitReady("nats-server", readyTimeout, 50*time.Millisecond, s.ready); err != nil {
		s.kill()
		return err
	}
	return nil
}

// ready: the server accepts a client and JetStream answers.
func (s *Server) ready() error {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return err
	}
	c.Close()
	nc, err := nats.Connect(s.URL(), nats.Timeout(time.Second), nats.MaxReconnects(0))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

func (s *Server) kill() {
	if s.proc == nil {
		return
	}
	s.proc.Kill()
	s.proc = nil
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is nats://127.0.0.1:PORT.
func (s *Server) URL() string { return "nats://" + s.Addr() }

// PID is the server's process id, 0 when it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// LogTail is the end of the server's output, for a failing test's report.
func (s *Server) LogTail(lines int) string { return s.log.Lines(lines) }

// Down kills the server (SIGKILL): what it had not synced is lost, as in
// a crash.
func (s *Server) Down() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("natstest: Down after Stop")
	}
	s.kill()
	return nil
}

// Up starts a server killed by Down again, on the same port and store.
func (s *Server) Up() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("natstest: Up after Stop")
	}
	if s.proc != nil {
		return nil
	}
	return s.start()
}

// Stop stops the server (TERM, then KILL) and removes its folder; safe to
// call twice.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	if s.proc != nil {
		_ = s.proc.Stop("nats-server", os.Interrupt, stopTimeout)
		s.proc = nil
	}
	return os.RemoveAll(s.dataDir)
}

// JetStream connects a client to the server; it is closed in t.Cleanup.
func (s *Server) JetStream(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}
