// Package pulsartest runs a real Apache Pulsar standalone broker for tests,
// through scripts/pulsar-standalone.sh: the distribution comes from Maven
// Central once (cached in ~/.m2 and ~/.cache/dlqctl/pulsar), and each
// broker listens on free loopback ports with its data in a temporary
// folder. There is no fake: a test that needs Pulsar and cannot get Java or
// the distribution fails, so that a missing broker is never mistaken for a
// passing suite.
//
// A broker takes several seconds to start, so a package starts one in its
// TestMain (StartProcess) and shares it; tests keep apart by topic name.
package pulsartest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/internal/testproc"
)

const (
	fetchTimeout = 20 * time.Minute // a cold fetch downloads about 240 MB
	startTimeout = 5 * time.Minute  // the script itself gives up after 180 s
	stopTimeout  = 3 * time.Minute  // the script kills after 30 s (90 s while it writes the class archive)
	// startAttempts covers the race between the script picking free ports
	// and the broker binding them.
	startAttempts = 3
)

// JavaNotFoundMessage is the error text when no java can be found.
const JavaNotFoundMessage = "java not found: the Pulsar broker needs a JDK 17 or newer (apt-get install openjdk-17-jre-headless) on PATH or in JAVA_HOME"

// Broker is one running Pulsar standalone process.
type Broker struct {
	script  string
	dataDir string

	mu         sync.Mutex
	serviceURL string
	adminURL   string
	stopped    bool // Stop was called; the data folder is gone
}

// Start runs a broker for the test and stops it in t.Cleanup. It fails the
// test when the broker cannot be fetched or started. Prefer one broker per
// package, from TestMain with StartProcess.
func Start(t testing.TB) *Broker {
	t.Helper()
	testproc.SkipJavaServerInShort(t, "an Apache Pulsar broker")
	b, err := StartProcess()
	if err != nil {
		t.Fatalf("pulsartest: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Errorf("pulsartest: %v", err)
		}
	})
	return b
}

// StartProcess fetches the distribution when it is not cached yet, starts a
// broker in a new temporary folder and waits until its admin API answers
// and lists public/default. The caller must call Stop. Should the test
// binary die without calling Stop, a watchdog left by the script stops the
// broker.
func StartProcess() (*Broker, error) {
	if err := checkJava(); err != nil {
		return nil, err
	}
	script, err := scriptPath()
	if err != nil {
		return nil, err
	}
	if _, err := runScript(fetchTimeout, os.Stderr, script, "fetch"); err != nil {
		return nil, fmt.Errorf("fetch the Pulsar distribution: %w", err)
	}
	var lastErr error
	for range startAttempts {
		b, err := startIn(script)
		if err == nil {
			return b, nil
		}
		lastErr = err
		if !portTaken(err) {
			break
		}
	}
	return nil, lastErr
}

func startIn(script string) (*Broker, error) {
	dir, err := os.MkdirTemp("", "pulsartest-")
	if err != nil {
		return nil, err
	}
	b := &Broker{script: script, dataDir: dir}
	if err := b.start(); err != nil {
		_, _ = runScript(stopTimeout, nil, script, "stop", dir)
		os.RemoveAll(dir)
		return nil, err
	}
	return b, nil
}

func portTaken(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Address already in use") || strings.Contains(msg, "BindException")
}

func (b *Broker) start() error {
	release, err := testproc.LockJavaStart()
	if err != nil {
		return err
	}
	defer release()
	out, err := runScript(startTimeout, nil, b.script, "start", b.dataDir)
	if err != nil {
		return fmt.Errorf("start the Pulsar broker: %w", err)
	}
	env, err := readEnv(filepath.Join(b.dataDir, "env"))
	if err != nil {
		return fmt.Errorf("start the Pulsar broker: %w (script output: %s)", err, out)
	}
	b.serviceURL, b.adminURL = env["PULSAR_URL"], env["PULSAR_ADMIN"]
	if b.serviceURL == "" || b.adminURL == "" {
		return fmt.Errorf("start the Pulsar broker: %s lacks PULSAR_URL or PULSAR_ADMIN", filepath.Join(b.dataDir, "env"))
	}
	return nil
}

// ServiceURL is the broker's binary protocol URL, pulsar://127.0.0.1:PORT.
func (b *Broker) ServiceURL() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.serviceURL
}

// AdminURL is the broker's web service (admin REST API) base URL,
// http://127.0.0.1:PORT.
func (b *Broker) AdminURL() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.adminURL
}

// DataDir is the folder holding the broker's config, data and logs
// (logs/pulsar-standalone.log), for a failing test's report.
func (b *Broker) DataDir() string { return b.dataDir }

// PID is the broker's process id, or 0 when it is not running.
func (b *Broker) PID() int {
	raw, err := os.ReadFile(filepath.Join(b.dataDir, "pulsar.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0
	}
	return pid
}

// LogTail is the end of the broker's log, for a failing test's report.
func (b *Broker) LogTail(lines int) string {
	raw, err := os.ReadFile(filepath.Join(b.dataDir, "logs", "pulsar-standalone.log"))
	if err != nil {
		return fmt.Sprintf("(no broker log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// Restart stops the broker and starts it again on the same ports and data
// folder, so clients can reconnect to the same URLs and find the topics,
// subscriptions and messages persisted before. It returns once the admin
// API answers again.
func (b *Broker) Restart() error {
	if err := b.Down(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return b.Up()
}

// Down stops the broker, keeping its ports and data folder, until Up.
func (b *Broker) Down() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return errors.New("pulsartest: Down after Stop")
	}
	if _, err := runScript(stopTimeout, nil, b.script, "stop", b.dataDir); err != nil {
		return fmt.Errorf("down: stop the Pulsar broker: %w", err)
	}
	return nil
}

// Kill ends the broker with SIGKILL, as a crash does: what it held only in
// memory (a subscription's acknowledgements not yet persisted) is lost. Up
// brings it back on the same ports and data folder.
func (b *Broker) Kill() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return errors.New("pulsartest: Kill after Stop")
	}
	pid := b.PID()
	if pid <= 0 {
		return errors.New("pulsartest: kill: the broker is not running")
	}
	// The script starts the broker as the leader of its own process group.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("pulsartest: kill: broker pid %d still alive 30 s after SIGKILL", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// stop finds nothing running and clears the pid file and watchdog.
	if _, err := runScript(stopTimeout, nil, b.script, "stop", b.dataDir); err != nil {
		return fmt.Errorf("kill: clear up after the broker: %w", err)
	}
	return nil
}

// Up starts a broker taken Down again on the same ports and data folder;
// it returns once the admin API answers.
func (b *Broker) Up() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return errors.New("pulsartest: Up after Stop")
	}
	if err := b.start(); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	return nil
}

// Stop stops the broker (SIGTERM, SIGKILL after 30 s) and removes its
// folder. It is safe to call more than once.
func (b *Broker) Stop() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return nil
	}
	b.stopped = true
	_, err := runScript(stopTimeout, nil, b.script, "stop", b.dataDir)
	if err != nil {
		// Keep the folder: its logs explain what went wrong.
		return fmt.Errorf("stop the Pulsar broker (logs in %s): %w", b.dataDir, err)
	}
	return os.RemoveAll(b.dataDir)
}

// EnableDeduplication turns message deduplication on or off for a
// namespace ("tenant/ns", e.g. "public/default") through the admin REST
// API. The broker's own default is off.
func (b *Broker) EnableDeduplication(ctx context.Context, namespace string, on bool) error {
	if strings.Count(namespace, "/") != 1 || strings.HasPrefix(namespace, "/") || strings.HasSuffix(namespace, "/") {
		return fmt.Errorf("pulsartest: namespace %q is not tenant/namespace", namespace)
	}
	_, err := b.Admin(ctx, http.MethodPost, "/admin/v2/namespaces/"+namespace+"/deduplication", []byte(strconv.FormatBool(on)))
	return err
}

// Admin sends one request to the admin REST API (path from /admin/...,
// body sent as JSON when not nil) and returns the response body, or an
// error for a status outside 2xx.
func (b *Broker) Admin(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.AdminURL()+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("pulsar admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("pulsar admin %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return out, fmt.Errorf("pulsar admin %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(out)))
	}
	return out, nil
}

func checkJava() error { return testproc.CheckJava(JavaNotFoundMessage) }

func scriptPath() (string, error) { return testproc.FindScript("scripts/pulsar-standalone.sh") }

func readEnv(path string) (map[string]string, error) { return testproc.ReadEnv(path) }

func runScript(timeout time.Duration, progress io.Writer, script string, args ...string) (string, error) {
	return testproc.RunScript(timeout, progress, "PULSAR_WATCH_PID", script, args...)
}
