// Package rabbitmqtest runs a real RabbitMQ broker for tests, through
// scripts/rabbitmq.sh: Debian's rabbitmq-server, as the current user, on
// free loopback ports, with its database, logs and Erlang cookie in a
// temporary folder, stopped by PID. There is no fake: a test that needs
// RabbitMQ and cannot start it fails, so that a missing broker is never
// mistaken for a passing suite. It never starts under -short.
//
// A broker takes 5 to 30 s to boot (the management plugin is most of it),
// so a test binary shares one (Shared) and tests keep apart by queue name.
// DLQCTL_TEST_AMQP_URL (with DLQCTL_TEST_AMQP_ADMIN for the management API)
// names a broker that is already running instead, for quick local runs;
// tests that restart the broker always start their own.
package rabbitmqtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/dlqctl/dlqctl/internal/testproc"
)

const (
	startTimeout = 3 * time.Minute
	stopTimeout  = time.Minute
)

// Server is one running broker.
type Server struct {
	script  string
	dataDir string // "" for a broker named by DLQCTL_TEST_AMQP_URL

	mu       sync.Mutex
	amqpURL  string
	adminURL string
	stopped  bool
}

// serverName names the broker in the messages of a test that needs it.
const serverName = "a RabbitMQ broker"

// Start runs a broker of the test's own and stops it in t.Cleanup. It
// never starts under -short.
func Start(t testing.TB) *Server {
	t.Helper()
	return testproc.StartForTest(t, serverName, StartProcess)
}

// Shared is a broker that a test binary starts on the first test that
// asks for it (Get) and stops in TestMain (Finish). DLQCTL_TEST_AMQP_URL,
// when set, names a running broker to use instead.
func Shared() *testproc.Shared[*Server] {
	return &testproc.Shared[*Server]{Server: serverName, Start: func() (*Server, error) {
		if u := os.Getenv("DLQCTL_TEST_AMQP_URL"); u != "" {
			return &Server{amqpURL: u, adminURL: os.Getenv("DLQCTL_TEST_AMQP_ADMIN")}, nil
		}
		return StartProcess()
	}}
}

// StartProcess starts a broker in a new temporary folder and waits until
// it answers. The caller must call Stop; should the test binary die first,
// a watchdog left by the script stops the broker.
func StartProcess() (*Server, error) {
	script, err := testproc.FindScript("scripts/rabbitmq.sh")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rabbitmqtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{script: script, dataDir: dir}
	if err := s.start(); err != nil {
		_, _ = testproc.RunScript(stopTimeout, nil, "RABBITMQ_WATCH_PID", script, "stop", dir)
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	if _, err := testproc.RunScript(startTimeout, nil, "RABBITMQ_WATCH_PID", s.script, "start", s.dataDir); err != nil {
		return fmt.Errorf("start RabbitMQ: %w", err)
	}
	env, err := testproc.ReadEnv(filepath.Join(s.dataDir, "env"))
	if err != nil {
		return fmt.Errorf("start RabbitMQ: %w", err)
	}
	if env["AMQP_URL"] == "" {
		return fmt.Errorf("start RabbitMQ: %s has no AMQP_URL", filepath.Join(s.dataDir, "env"))
	}
	s.amqpURL, s.adminURL = env["AMQP_URL"], env["ADMIN_URL"]
	return nil
}

// URL is the broker's AMQP URL with the guest credentials and the default
// vhost: amqp://guest:guest@127.0.0.1:PORT/.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.amqpURL
}

// AdminURL is the management API's base URL, "" when it is not running.
func (s *Server) AdminURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.adminURL
}

// Source is a dlqctl source URL for queue on this broker, with admin= when
// the management API runs.
func (s *Server) Source(queue string) string {
	q := url.Values{"queue": {queue}}
	if a := s.AdminURL(); a != "" {
		q.Set("admin", a)
	}
	return strings.TrimSuffix(s.URL(), "/") + "/?" + q.Encode()
}

// Dial opens a connection to the broker.
func (s *Server) Dial() (*amqp.Connection, error) { return amqp.Dial(s.URL()) }

// Channel opens a connection and a channel for t, closed in t.Cleanup.
func (s *Server) Channel(t testing.TB) *amqp.Channel {
	t.Helper()
	c, err := s.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// Down stops the broker and keeps its folder, so that Up can start it
// again on the same ports with the same queues and persistent messages.
func (s *Server) Down() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dataDir == "" {
		return errors.New("rabbitmqtest: Down on a broker this test did not start")
	}
	if s.stopped {
		return errors.New("rabbitmqtest: Down after Stop")
	}
	if _, err := testproc.RunScript(stopTimeout, nil, "RABBITMQ_WATCH_PID", s.script, "stop", s.dataDir); err != nil {
		return fmt.Errorf("stop RabbitMQ: %w", err)
	}
	return nil
}

// Kill crashes the broker: SIGKILL to its process group, with no chance
// to write anything it holds in memory (what a power cut or an OOM kill
// does to it), then stops what the broker leaves behind (its epmd and the
// watchdog), so that Up can start it again on the same ports and
// database.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dataDir == "" {
		return errors.New("rabbitmqtest: Kill on a broker this test did not start")
	}
	if s.stopped {
		return errors.New("rabbitmqtest: Kill after Stop")
	}
	raw, err := os.ReadFile(filepath.Join(s.dataDir, "rabbitmq.pid"))
	if err != nil {
		return fmt.Errorf("kill RabbitMQ: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return fmt.Errorf("kill RabbitMQ: bad pid %q", raw)
	}
	// The broker leads its own session (setsid): the group is its shell
	// wrapper, beam and beam's children.
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill RabbitMQ: %w", err)
	}
	deadline := time.Now().Add(stopTimeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("kill RabbitMQ: pid %d still alive after SIGKILL", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := testproc.RunScript(stopTimeout, nil, "RABBITMQ_WATCH_PID", s.script, "stop", s.dataDir); err != nil {
		return fmt.Errorf("kill RabbitMQ: clean up: %w", err)
	}
	return nil
}

// alive says whether pid runs and is not a zombie (the broker's parent,
// the script's subshell, is gone: init reaps it, eventually).
func alive(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	_, rest, _ := strings.Cut(string(raw), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// Up starts a broker stopped by Down again.
func (s *Server) Up() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("rabbitmqtest: Up after Stop")
	}
	return s.start()
}

// Stop stops the broker and removes its folder; safe to call twice. A
// broker named by DLQCTL_TEST_AMQP_URL is left running.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.dataDir == "" {
		return nil
	}
	s.stopped = true
	if _, err := testproc.RunScript(stopTimeout, nil, "RABBITMQ_WATCH_PID", s.script, "stop", s.dataDir); err != nil {
		return fmt.Errorf("stop RabbitMQ (logs in %s): %w", s.dataDir, err)
	}
	return os.RemoveAll(s.dataDir)
}

// LogTail is the end of the broker's log, for a failing test's report.
func (s *Server) LogTail(lines int) string {
	if s.dataDir == "" {
		return "(broker not started by this test)"
	}
	matches, _ := filepath.Glob(filepath.Join(s.dataDir, "log", "dlqctl-*@localhost.log"))
	if len(matches) == 0 {
		return "(no broker log)"
	}
	raw, err := os.ReadFile(matches[0])
	if err != nil {
		return fmt.Sprintf("(no broker log: %v)", err)
	}
	return testproc.LastLines(string(raw), lines)
}

// DeclareDLX declares, on ch, a dead-letter setup: the DLQ (classic, or
// quorum when quorum is set), a fanout exchange dlx bound to it, and the
// origin queue (classic, or quorum with deliveryLimit when that is > 0)
// whose dead letters go through dlx.
func DeclareDLX(ctx context.Context, ch *amqp.Channel, origin, dlq string, quorum bool, deliveryLimit int) error {
	dlx := dlq + ".dlx"
	if err := ch.ExchangeDeclare(dlx, "fanout", true, false, false, false, nil); err != nil {
		return err
	}
	dargs := amqp.Table{}
	if quorum {
		dargs["x-queue-type"] = "quorum"
	}
	if _, err := ch.QueueDeclare(dlq, true, false, false, false, dargs); err != nil {
		return err
	}
	if err := ch.QueueBind(dlq, "", dlx, false, nil); err != nil {
		return err
	}
	oargs := amqp.Table{"x-dead-letter-exchange": dlx}
	if deliveryLimit > 0 {
		oargs["x-queue-type"] = "quorum"
		oargs["x-delivery-limit"] = int32(deliveryLimit)
	}
	_, err := ch.QueueDeclare(origin, true, false, false, false, oargs)
	return err
}

// DeclareOrigin declares, on ch, a classic origin queue whose dead
// letters go to the fanout exchange dlx (declared too), and no DLQ: dlqctl
// dlq init makes one.
func DeclareOrigin(ctx context.Context, ch *amqp.Channel, origin, dlx string) error {
	if err := ch.ExchangeDeclare(dlx, "fanout", true, false, false, false, nil); err != nil {
		return err
	}
	_, err := ch.QueueDeclare(origin, true, false, false, false, amqp.Table{"x-dead-letter-exchange": dlx})
	return err
}
