// Package sqstest runs a real ElasticMQ server (SQS-compatible) for tests,
// through scripts/elasticmq.sh: the server and its dependencies come from
// Maven Central once (cached in ~/.m2 and ~/.cache/dlqctl/elasticmq), and
// each server listens on a free loopback port with its queues and messages
// stored in a temporary folder. There is no fake: a test that needs SQS and
// cannot get Java or the server fails, so that a missing server is never
// mistaken for a passing suite.
//
// A server starts in about 2 s; a package starts one in its TestMain
// (StartProcess) and shares it, and tests keep apart by queue name.
package sqstest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/dlqctl/dlqctl/internal/testproc"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

const (
	fetchTimeout  = 10 * time.Minute
	startTimeout  = 2 * time.Minute
	stopTimeout   = time.Minute
	startAttempts = 3
)

// Region is the region ElasticMQ reports in queue ARNs.
const Region = "elasticmq"

// Server is one running ElasticMQ process.
type Server struct {
	script  string
	dataDir string

	mu       sync.Mutex
	endpoint string
	stopped  bool
}

// Start runs a server for the test and stops it in t.Cleanup; it fails the
// test when the server cannot be fetched or started.
func Start(t testing.TB) *Server {
	t.Helper()
	testproc.SkipJavaServerInShort(t, "ElasticMQ")
	s, err := StartProcess()
	if err != nil {
		t.Fatalf("sqstest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("sqstest: %v", err)
		}
	})
	return s
}

// StartProcess fetches the server when it is not cached, starts it in a new
// temporary folder and waits until the SQS API answers. The caller must
// call Stop; should the test binary die first, a watchdog left by the
// script stops the server.
func StartProcess() (*Server, error) {
	if _, err := exec.LookPath("java"); err != nil && os.Getenv("JAVA_HOME") == "" {
		return nil, errors.New("java not found: ElasticMQ needs a JDK 11 or newer (apt-get install openjdk-17-jre-headless) on PATH or in JAVA_HOME")
	}
	script, err := scriptPath()
	if err != nil {
		return nil, err
	}
	if _, err := runScript(fetchTimeout, script, "fetch"); err != nil {
		return nil, fmt.Errorf("fetch ElasticMQ: %w", err)
	}
	var lastErr error
	for range startAttempts {
		dir, err := os.MkdirTemp("", "sqstest-")
		if err != nil {
			return nil, err
		}
		s := &Server{script: script, dataDir: dir}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
		_, _ = runScript(stopTimeout, script, "stop", dir)
		os.RemoveAll(dir)
		if !strings.Contains(lastErr.Error(), "Address already in use") && !strings.Contains(lastErr.Error(), "BindException") {
			break
		}
	}
	return nil, lastErr
}

func (s *Server) start() error {
	if _, err := runScript(startTimeout, s.script, "start", s.dataDir); err != nil {
		return fmt.Errorf("start ElasticMQ: %w", err)
	}
	env, err := readEnv(filepath.Join(s.dataDir, "env"))
	if err != nil {
		return fmt.Errorf("start ElasticMQ: %w", err)
	}
	if env["SQS_ENDPOINT"] == "" {
		return fmt.Errorf("start ElasticMQ: %s has no SQS_ENDPOINT", filepath.Join(s.dataDir, "env"))
	}
	s.endpoint = env["SQS_ENDPOINT"]
	return nil
}

// Endpoint is the server's SQS endpoint, http://127.0.0.1:PORT.
func (s *Server) Endpoint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endpoint
}

// DataDir holds the server's config, stored queues and messages, and log.
func (s *Server) DataDir() string { return s.dataDir }

// PID is the server's process id, 0 when it is not running.
func (s *Server) PID() int {
	raw, err := os.ReadFile(filepath.Join(s.dataDir, "elasticmq.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	return pid
}

// LogTail is the end of the server's log, for a failing test's report.
func (s *Server) LogTail(lines int) string {
	raw, err := os.ReadFile(filepath.Join(s.dataDir, "elasticmq.log"))
	if err != nil {
		return fmt.Sprintf("(no server log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// Restart stops the server and starts it on the same port and data folder:
// queues and messages survive (ElasticMQ's queues- and messages-storage).
func (s *Server) Restart() error {
	if err := s.Kill(); err != nil {
		return err
	}
	return s.Resume()
}

// Kill stops the server (SIGTERM, then SIGKILL) and keeps its folder, so
// that Resume can start it again; between the two, the endpoint refuses
// connections.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("sqstest: Kill after Stop")
	}
	if _, err := runScript(stopTimeout, s.script, "stop", s.dataDir); err != nil {
		return fmt.Errorf("stop ElasticMQ: %w", err)
	}
	return nil
}

// Resume starts a server killed by Kill again.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("sqstest: Resume after Stop")
	}
	return s.start()
}

// Stop stops the server and removes its folder; safe to call twice.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	if _, err := runScript(stopTimeout, s.script, "stop", s.dataDir); err != nil {
		return fmt.Errorf("stop ElasticMQ (log in %s): %w", s.dataDir, err)
	}
	return os.RemoveAll(s.dataDir)
}

// Client is an SQS client on the server with static test credentials.
func (s *Server) Client() *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint()),
		Credentials:  aws.NewCredentialsCache(staticCreds{}),
	})
}

// Env is the environment a dlqctl process needs to reach the server
// through the standard AWS chain (test credentials, no shared config).
func Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=" + Region,
		"AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

type staticCreds struct{}

func (staticCreds) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test", Source: "sqstest"}, nil
}

// scriptPath finds scripts/elasticmq.sh from this source file, or else
// from the working folder up to the module root.
func scriptPath() (string, error) {
	const rel = "scripts/elasticmq.sh"
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok {
		p := filepath.Join(filepath.Dir(file), "..", "..", rel)
		if _, err := os.Stat(p); err == nil {
			return filepath.Clean(p), nil
		}
		tried = append(tried, p)
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			p := filepath.Join(dir, rel)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			tried = append(tried, p)
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil || filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", fmt.Errorf("sqstest: %s not found (tried %s)", rel, strings.Join(tried, ", "))
}

// runScript runs the script with bash and returns its standard output;
// ELASTICMQ_WATCH_PID ties the server to this process.
func runScript(timeout time.Duration, script string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "ELASTICMQ_WATCH_PID="+strconv.Itoa(os.Getpid()))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("timed out after %s", timeout)
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v\n%s", filepath.Base(script), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			env[k] = v
		}
	}
	return env, sc.Err()
}
