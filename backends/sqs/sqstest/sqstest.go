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
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqctl/dlqctl/internal/testproc"
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
	release, err := testproc.LockJavaStart()
	if err != nil {
		return err
	}
	defer release()
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

func scriptPath() (string, error) { return testproc.FindScript("scripts/elasticmq.sh") }

func readEnv(path string) (map[string]string, error) { return testproc.ReadEnv(path) }

func runScript(timeout time.Duration, script string, args ...string) (string, error) {
	return testproc.RunScript(timeout, nil, "ELASTICMQ_WATCH_PID", script, args...)
}
