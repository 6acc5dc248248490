// Package pgtest runs a real, throwaway PostgreSQL server for tests: initdb
// into a temporary folder, then postgres on a free loopback port with fsync
// off, stopped by PID when the test ends. There is no fake: a test that
// needs PostgreSQL and cannot find its server binaries fails, so that a
// missing server is never mistaken for a passing suite.
//
// PostgreSQL refuses to run as root. When the tests run as root, initdb and
// postgres run as the unprivileged user "postgres" (the Debian package's),
// or else "nobody", in a folder that user owns.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlqctl/dlqctl/internal/testproc"
)

const (
	readyTimeout = 30 * time.Second
	stopGrace    = 10 * time.Second
	// portAttempts covers the race between closing the listener that
	// picked a free port and postgres binding it.
	portAttempts = 3
)

// NotFoundMessage is the error text when the server binaries are missing.
const NotFoundMessage = "PostgreSQL server not found: install it (apt-get install postgresql)"

// Superuser is the role initdb creates; every URL logs in as it.
const Superuser = "postgres"

// PasswordUser is the one role that must log in over TCP with a password
// (scram-sha-256); every other role is trusted. The harness does not
// create it: a test that needs a real authentication failure runs
// CREATE ROLE pgtest_password LOGIN PASSWORD '…'.
const PasswordUser = "pgtest_password"

// Server is one running postgres process and its data folder.
type Server struct {
	proc *testproc.Process
	port int
	dir  string
	log  *testproc.Log

	stopOnce sync.Once
	stopErr  error
}

// Start runs a PostgreSQL server for the test and stops it in t.Cleanup.
// It fails the test when the server cannot be found or started.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := StartProcess()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return s
}

// StartProcess runs a PostgreSQL server without a testing.TB, for TestMain
// and testscript setups; the caller must call Stop.
func StartProcess() (*Server, error) {
	bins, err := findBinaries("/usr/lib/postgresql/*/bin", exec.LookPath)
	if err != nil {
		return nil, err
	}
	as, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := makeDir(as)
	if err != nil {
		return nil, err
	}
	if err := initdb(bins.initdb, dir, as); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var lastErr error
	for range portAttempts {
		s, err := start(bins.postgres, dir, as)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

type binaries struct{ postgres, initdb string }

// findBinaries picks the highest version under the Debian layout
// (/usr/lib/postgresql/VERSION/bin), then looks in PATH.
func findBinaries(pattern string, lookPath func(string) (string, error)) (binaries, error) {
	dirs, _ := filepath.Glob(pattern)
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		b := binaries{postgres: filepath.Join(d, "postgres"), initdb: filepath.Join(d, "initdb")}
		if executable(b.postgres) && executable(b.initdb) {
			return b, nil
		}
	}
	var b binaries
	var err1, err2 error
	b.postgres, err1 = lookPath("postgres")
	b.initdb, err2 = lookPath("initdb")
	if err1 != nil || err2 != nil {
		return b, errors.New(NotFoundMessage)
	}
	return b, nil
}

// versionOf reads 15 from /usr/lib/postgresql/15/bin (9.6 as 9.6).
func versionOf(binDir string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	if err != nil {
		return -1
	}
	return v
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
}

// runAs is the unprivileged user the server runs as; nil means the tests'
// own user.
type runAs struct {
	name     string
	uid, gid uint32
}

func serverUser() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	// The Debian package's user first; nobody exists nearly everywhere.
	candidates := []string{"postgres", "nobody"}
	for _, name := range candidates {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		return &runAs{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("the tests run as root and PostgreSQL refuses to run as root, but there is no unprivileged user to run it as (tried %s): create one (useradd --system --user-group postgres) or run the tests as another user",
		strings.Join(candidates, ", "))
}

// makeDir makes the server's folder, owned by the user it runs as, in a
// temporary folder that user can reach.
func makeDir(as *runAs) (string, error) {
	base := os.TempDir()
	if as != nil && !reachable(base) {
		if !reachable("/tmp") {
			return "", fmt.Errorf("neither %s nor /tmp can be reached by user %s (every folder on the way needs o+x): set TMPDIR to a folder it can reach", base, as.name)
		}
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "pgtest-")
	if err != nil {
		return "", err
	}
	if err := os.Mkdir(filepath.Join(dir, "sock"), 0o700); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if as != nil {
		for _, d := range []string{dir, filepath.Join(dir, "sock")} {
			if err := os.Chown(d, int(as.uid), int(as.gid)); err != nil {
				os.RemoveAll(dir)
				return "", fmt.Errorf("give %s to user %s: %w", d, as.name, err)
			}
		}
	}
	return dir, nil
}

// reachable says whether every folder from / to dir lets others through.
func reachable(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

// command runs bin as the server's user, in dir, without the PG*
// variables of the tests' environment.
func command(bin, dir string, as *runAs, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	env := []string{"HOME=" + dir, "LC_ALL=C"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr(as)
	return cmd
}

const hba = `# pgtest: trust, except for the role that tests password errors
local all all                     trust
host  all ` + PasswordUser + ` 127.0.0.1/32 scram-sha-256
host  all all     127.0.0.1/32    trust
`

func initdb(bin, dir string, as *runAs) error {
	data := filepath.Join(dir, "data")
	cmd := command(bin, dir, as, "-D", data, "-U", Superuser, "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	out, err := cmd.CombinedOutput()
	if err != nil {
		who := ""
		if as != nil {
			who = " as user " + as.name
		}
		return fmt.Errorf("initdb%s: %v:\n%s", who, err, tail(string(out)))
	}
	// Rewriting the file in place keeps its owner, the server's user.
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return fmt.Errorf("write pg_hba.conf: %w", err)
	}
	return nil
}

var errPortTaken = errors.New("port taken")

func start(bin, dir string, as *runAs) (*Server, error) {
	port, err := testproc.FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{port: port, dir: dir, log: &testproc.Log{}}
	cmd := command(bin, dir, as,
		"-D", filepath.Join(dir, "data"),
		"-p", strconv.Itoa(port),
		"-k", filepath.Join(dir, "sock"),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "shared_buffers=16MB",
		"-c", "max_connections=40",
		"-c", "password_encryption=scram-sha-256",
	)
	if s.proc, err = testproc.Launch(cmd, s.log); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if err := s.waitReady(); err != nil {
		s.proc.Kill()
		if strings.Contains(s.log.String(), "Address already in use") {
			return nil, fmt.Errorf("%w: %v", errPortTaken, err)
		}
		return nil, err
	}
	return s, nil
}

// waitReady connects until the server accepts connections: it listens a
// moment before it has finished starting up.
func (s *Server) waitReady() error {
	return s.proc.WaitReady("postgres on "+s.Addr(), readyTimeout, 50*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			err = conn.Ping(ctx)
			_ = conn.Close(ctx)
		}
		return err
	})
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's TCP port.
func (s *Server) Port() int { return s.port }

// PID is the postmaster's process ID.
func (s *Server) PID() int { return s.proc.PID() }

// URL is a postgres:// URL for database db, as the superuser, without a
// password (trusted) and without TLS.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", Superuser, s.Addr(), url.PathEscape(db))
}

// Exec runs sql in the database "postgres". Without args it may hold
// several statements.
func (s *Server) Exec(sql string, args ...any) error { return s.ExecIn("postgres", sql, args...) }

// ExecIn runs sql in database db, on a connection of its own.
func (s *Server) ExecIn(db, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("%s: %w", firstLine(sql), err)
	}
	return nil
}

// Stop asks for a fast shutdown (SIGINT), kills the server if it has not
// exited after a grace period, waits for it and removes its folder. It is
// safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.stopErr = s.stop()
		os.RemoveAll(s.dir)
	})
	return s.stopErr
}

func (s *Server) stop() error {
	return s.proc.Stop("postgres", syscall.SIGINT, stopGrace)
}

// Log is what the server has written so far, for a failing test's report.
func (s *Server) Log() string { return s.log.String() }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}

func tail(s string) string {
	const max = 3000
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return s
}
