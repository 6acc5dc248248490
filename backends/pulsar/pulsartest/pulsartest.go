// Package pulsartest runs a real Apache Pulsar standalone broker for tests,
// through scripts/pulsar-standalone.sh: the distribution comes from Maven
// Central once (cached in ~/.m2 and ~/.cache/dlqctl/pulsar), and each
// broker listens on free loopback ports with its data in a temporary
// folder. There is no fake: a test that needs Pulsar and cannot get Java or
// the distribution fails, so that a missing broker is never mistaken for a
// passing suite.
//
// A broker takes several seconds to start, so a package's tests share one
// (Shared), started by the first test that needs it; tests keep apart by
// topic name. The lifecycle (script, ports, start lock, stop by PID) is
// testproc.JavaServer's.
package pulsartest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/internal/testproc"
)

// javaServer is how scripts/pulsar-standalone.sh runs a broker; settings
// (broker.conf keys) replace or add to the script's own, in the data
// folder's settings.conf, for every start there.
func javaServer(settings map[string]string) *testproc.JavaServer {
	s := &testproc.JavaServer{
		Name:          "the Pulsar broker",
		Script:        "scripts/pulsar-standalone.sh",
		WatchVar:      "PULSAR_WATCH_PID",
		TempPrefix:    "pulsartest-",
		PIDFile:       "pulsar.pid",
		LogFile:       filepath.Join("logs", "pulsar-standalone.log"),
		JavaNotFound:  JavaNotFoundMessage,
		FetchTimeout:  20 * time.Minute, // a cold fetch downloads about 240 MB
		StartTimeout:  5 * time.Minute,  // the script itself gives up after 180 s
		StopTimeout:   3 * time.Minute,  // the script kills after 30 s (90 s while it writes the class archive)
		FetchProgress: os.Stderr,
	}
	if len(settings) > 0 {
		s.Prepare = func(dir string) error { return writeSettings(dir, settings) }
	}
	return s
}

// writeSettings writes settings as KEY=VALUE lines, sorted, to
// DIR/settings.conf, which the script reads at each start.
func writeSettings(dir string, settings map[string]string) error {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		v := settings[k]
		if k == "" || strings.ContainsAny(k, "= \t\n\r") || strings.ContainsAny(v, "\n\r") {
			return fmt.Errorf("pulsartest: broker setting %q=%q: want a key without '=' and one-line values", k, v)
		}
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return os.WriteFile(filepath.Join(dir, "settings.conf"), []byte(b.String()), 0o644)
}

// JavaNotFoundMessage is the error text when no java can be found.
const JavaNotFoundMessage = "java not found: the Pulsar broker needs a JDK 17 or newer (apt-get install openjdk-17-jre-headless) on PATH or in JAVA_HOME"

// Broker is one running Pulsar standalone process.
//
// Its PID, Dir (its config, data and logs), LogTail, Down, Up, Restart,
// Kill (SIGKILL, as a crash) and Stop (which removes its folder) are
// testproc.JavaProc's.
type Broker struct {
	*testproc.JavaProc

	mu         sync.Mutex
	serviceURL string
	adminURL   string
}

// Start runs a broker for the test alone and stops it in t.Cleanup. It
// fails the test when the broker cannot be fetched or started, and skips
// it under -short. Tests of a package share one broker: see Shared.
func Start(t testing.TB) *Broker {
	t.Helper()
	return testproc.StartForTest(t, serverName, StartProcess)
}

// serverName names the server in the messages of a test that needs it.
const serverName = "an Apache Pulsar broker"

// Shared is one broker for a package's tests, started by the first test
// that calls its Get and stopped by TestMain's Finish; under -short, Get
// skips the test and nothing starts. settings (broker.conf keys, such as
// retentionCheckIntervalInSeconds) replace or add to the harness's own.
func Shared(settings map[string]string) *testproc.Shared[*Broker] {
	return &testproc.Shared[*Broker]{Server: serverName, Start: func() (*Broker, error) { return startWith(settings) }}
}

// StartProcess fetches the distribution when it is not cached yet, starts a
// broker in a new temporary folder and waits until its admin API answers
// and lists public/default. The caller must call Stop. Should the test
// binary die without calling Stop, a watchdog left by the script stops the
// broker.
func StartProcess() (*Broker, error) { return startWith(nil) }

func startWith(settings map[string]string) (*Broker, error) {
	b := &Broker{}
	proc, err := javaServer(settings).Launch(b.read)
	if err != nil {
		return nil, err
	}
	b.JavaProc = proc
	return b, nil
}

// read takes the URLs from the env file of a start.
func (b *Broker) read(env map[string]string) error {
	if err := javaServer(nil).Require(env, "PULSAR_URL", "PULSAR_ADMIN"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.serviceURL, b.adminURL = env["PULSAR_URL"], env["PULSAR_ADMIN"]
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
