// Package redistest runs a real redis-server for tests: on a free loopback
// port, with persistence off and its files in a temporary folder, stopped by
// PID when the test ends. There is no fake: a test that needs Redis and
// cannot find redis-server fails, so that a missing server is never mistaken
// for a passing suite.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/dlqctl/dlqctl/internal/testproc"
)

const (
	readyTimeout = 10 * time.Second
	stopGrace    = 5 * time.Second
	// portAttempts covers the race between closing the listener that
	// picked a free port and redis-server binding it.
	portAttempts = 3
)

// NotFoundMessage is the error text when redis-server is not installed.
const NotFoundMessage = "redis-server not found: install it (apt-get install redis-server)"

// Server is one running redis-server process.
type Server struct {
	proc     *testproc.Process
	addr     string
	dir      string
	password string // from --requirepass, for Client
	log      *testproc.Log

	mu     sync.Mutex
	client *redis.Client

	stopOnce sync.Once
	stopErr  error
}

// Down saves the data set and stops the server, keeping its folder, so
// that Up can bring the same data back on the same port: a Redis restart
// in the middle of a test.
func (s *Server) Down() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Client().Save(ctx).Err(); err != nil {
		return fmt.Errorf("save before restart: %w", err)
	}
	s.mu.Lock()
	if s.client != nil {
		_ = s.client.Close()
		s.client = nil
	}
	s.mu.Unlock()
	return s.proc.Stop("redis-server", syscall.SIGTERM, stopGrace)
}

// Up starts the server again after Down, on the same port, folder and
// arguments, and waits until it answers.
func (s *Server) Up() error {
	args := s.proc.Args()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = sysProcAttr()
	proc, err := testproc.Launch(cmd, s.log)
	if err != nil {
		return fmt.Errorf("restart redis-server: %w", err)
	}
	s.proc = proc
	return s.waitReady()
}

// Start runs a redis-server for the test and stops it in t.Cleanup. Extra
// args go to redis-server after the harness's own, so they can override
// them or add --requirepass, ACL users (--user alice on >secret ~* &* +@all)
// and so on. It fails the test when redis-server cannot be found or started.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	s, err := StartProcess(args...)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("redistest: %v", err)
		}
	})
	return s
}

// StartProcess runs a redis-server without a testing.TB, for TestMain and
// testscript setups; the caller must call Stop.
func StartProcess(args ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New(NotFoundMessage)
	}
	var lastErr error
	for range portAttempts {
		s, err := start(bin, args)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	return nil, lastErr
}

var errPortTaken = errors.New("port taken")

func start(bin string, extra []string) (*Server, error) {
	port, err := testproc.FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
		"--logfile", "",
	}
	args = append(args, extra...)
	s := &Server{
		addr:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		dir:      dir,
		password: argValue(extra, "--requirepass"),
		log:      &testproc.Log{},
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = sysProcAttr()
	if s.proc, err = testproc.Launch(cmd, s.log); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	if err := s.waitReady(); err != nil {
		_ = s.Stop()
		if strings.Contains(s.log.String(), "Address already in use") {
			return nil, fmt.Errorf("%w: %v", errPortTaken, err)
		}
		return nil, err
	}
	return s, nil
}

// waitReady polls with a raw PING until the server answers. NOAUTH counts
// as an answer: a server started with --requirepass is up all the same.
func (s *Server) waitReady() error {
	return s.proc.WaitReady("redis-server on "+s.addr, readyTimeout, 20*time.Millisecond, func() error {
		reply, err := rawPing(s.addr)
		if err == nil && (reply == "+PONG" || strings.HasPrefix(reply, "-NOAUTH")) {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("PING answered %q", reply)
		}
		return err
	})
}

func rawPing(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// URL is a dlqctl source URL for the stream key in database db, without
// credentials.
func (s *Server) URL(db int, stream string) string {
	return fmt.Sprintf("redis://%s/%d?stream=%s", s.addr, db, url.QueryEscape(stream))
}

// Client is a go-redis client on database 0 for seeding and inspecting
// data, authenticated with --requirepass when the server was started with
// it. It is closed by Stop.
func (s *Server) Client() *redis.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		s.client = redis.NewClient(&redis.Options{
			Addr:                     s.addr,
			Password:                 s.password,
			DisableIdentity:          true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
	}
	return s.client
}

// Stop sends SIGTERM, then SIGKILL if the server has not exited after a
// grace period, waits for it and removes its folder. It is safe to call
// more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop() })
	return s.stopErr
}

func (s *Server) stop() error {
	s.mu.Lock()
	if s.client != nil {
		_ = s.client.Close()
		s.client = nil
	}
	s.mu.Unlock()
	defer os.RemoveAll(s.dir)
	return s.proc.Stop("redis-server", syscall.SIGTERM, stopGrace)
}

// Log is what the server has written so far, for a failing test's report.
func (s *Server) Log() string { return s.log.String() }

// PID is the server's process ID.
func (s *Server) PID() int { return s.proc.PID() }

func argValue(args []string, name string) string {
	v := ""
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			v = args[i+1]
		}
	}
	return v
}
