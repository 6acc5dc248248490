// Package kafkatest runs a real single-node Apache Kafka broker (KRaft,
// broker and controller in one JVM) for tests, through scripts/kafka.sh:
// the jars come from Maven Central once (cached in ~/.m2 and
// ~/.cache/dlqctl/kafka-VERSION/libs), and each broker listens on free
// loopback ports with its data in a temporary folder. There is no fake: a
// test that needs Kafka and cannot get Java or the jars fails, so that a
// missing broker is never mistaken for a passing suite.
//
// A broker takes about five seconds to start, so a package starts one in
// its TestMain (StartProcess) and shares it; tests keep apart by topic name.
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/internal/testproc"
)

const (
	fetchTimeout = 10 * time.Minute
	startTimeout = 3 * time.Minute // the script itself gives up after 120 s
	stopTimeout  = time.Minute     // the script kills after 30 s
	// startAttempts covers the race between the script picking free ports
	// and the broker binding them.
	startAttempts = 3
)

// JavaNotFoundMessage is the error text when no java can be found.
const JavaNotFoundMessage = "java not found: the Kafka broker needs a JDK 17 or newer (apt-get install openjdk-17-jre-headless) on PATH or in JAVA_HOME"

// Broker is one running Kafka process.
type Broker struct {
	script  string
	dataDir string

	mu        sync.Mutex
	bootstrap string
	sasl      SASL
	tls       TLS
	stopped   bool
}

// Start runs a broker for the test and stops it in t.Cleanup; it returns
// the broker, whose Bootstrap is the address to dial. It fails the test
// when the broker cannot be fetched or started. Prefer one broker per
// package, from TestMain with StartProcess.
func Start(t testing.TB) *Broker {
	t.Helper()
	testproc.SkipJavaServerInShort(t, "an Apache Kafka broker")
	b, err := StartProcess()
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Errorf("kafkatest: %v", err)
		}
	})
	return b
}

// StartProcess fetches the jars when they are not cached yet, formats a
// new temporary folder and starts a broker there, returning once it has
// started. The caller must call Stop. Should the test binary die without
// calling Stop, a watchdog left by the script stops the broker.
func StartProcess() (*Broker, error) {
	if err := checkJava(); err != nil {
		return nil, err
	}
	script, err := scriptPath()
	if err != nil {
		return nil, err
	}
	if _, err := runScript(fetchTimeout, os.Stderr, script, "fetch"); err != nil {
		return nil, fmt.Errorf("fetch the Kafka jars: %w", err)
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
	dir, err := os.MkdirTemp("", "kafkatest-")
	if err != nil {
		return nil, err
	}
	b := &Broker{script: script, dataDir: dir}
	if err := writeTLS(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
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
		return fmt.Errorf("start the Kafka broker: %w", err)
	}
	env, err := readEnv(filepath.Join(b.dataDir, "env"))
	if err != nil {
		return fmt.Errorf("start the Kafka broker: %w (script output: %s)", err, out)
	}
	b.bootstrap = env["KAFKA_BOOTSTRAP"]
	b.sasl = SASL{Bootstrap: env["KAFKA_SASL_BOOTSTRAP"], User: env["KAFKA_SASL_USER"], Password: env["KAFKA_SASL_PASSWORD"]}
	b.tls = TLS{SASL: b.sasl, CA: env["KAFKA_TLS_CA"]}
	b.tls.Bootstrap = env["KAFKA_SASL_SSL_BOOTSTRAP"]
	if b.bootstrap == "" || b.sasl.Bootstrap == "" || b.tls.Bootstrap == "" || b.tls.CA == "" {
		return fmt.Errorf("start the Kafka broker: %s lacks KAFKA_BOOTSTRAP, KAFKA_SASL_BOOTSTRAP, KAFKA_SASL_SSL_BOOTSTRAP or KAFKA_TLS_CA", filepath.Join(b.dataDir, "env"))
	}
	return nil
}

// Bootstrap is the broker's client address, 127.0.0.1:PORT.
func (b *Broker) Bootstrap() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bootstrap
}

// SASL is the broker's SASL_PLAINTEXT listener and its one user, known to
// the PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 mechanisms alike.
type SASL struct {
	Bootstrap      string
	User, Password string
}

// SASL returns the SASL listener's address and credentials.
func (b *Broker) SASL() SASL {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sasl
}

// TLS is the broker's SASL_SSL listener: the same user and mechanisms as
// the SASL one, over TLS with a certificate for 127.0.0.1 signed by the
// CA in the PEM file CA.
type TLS struct {
	SASL
	CA string
}

// TLS returns the SASL_SSL listener's address, credentials and CA file.
func (b *Broker) TLS() TLS {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tls
}

// DataDir holds the broker's config, log dirs and output (kafka.out).
func (b *Broker) DataDir() string { return b.dataDir }

// PID is the broker's process id, or 0 when it is not running.
func (b *Broker) PID() int {
	raw, err := os.ReadFile(filepath.Join(b.dataDir, "kafka.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0
	}
	return pid
}

// LogTail is the end of the broker's output, for a failing test's report.
func (b *Broker) LogTail(lines int) string {
	raw, err := os.ReadFile(filepath.Join(b.dataDir, "kafka.out"))
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
// folder, so clients reconnect to the same address and find their topics.
func (b *Broker) Restart() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return errors.New("kafkatest: Restart after Stop")
	}
	if _, err := runScript(stopTimeout, nil, b.script, "stop", b.dataDir); err != nil {
		return fmt.Errorf("restart: stop the Kafka broker: %w", err)
	}
	if err := b.start(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// Down stops the broker and keeps its data, so Up can bring it back on
// the same address (for tests of a broker outage).
func (b *Broker) Down() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return errors.New("kafkatest: Down after Stop")
	}
	if _, err := runScript(stopTimeout, nil, b.script, "stop", b.dataDir); err != nil {
		return fmt.Errorf("down: %w", err)
	}
	return nil
}

// Kill stops the broker with SIGKILL, as a crash would (no clean
// shutdown: logs are recovered and open transactions resumed on Up), and
// keeps its data for Up.
func (b *Broker) Kill() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return errors.New("kafkatest: Kill after Stop")
	}
	pid := b.PID()
	if pid <= 0 {
		return errors.New("kafkatest: Kill: the broker is not running")
	}
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Signal(syscall.SIGKILL)
	}
	if err != nil {
		return fmt.Errorf("kafkatest: kill the broker (pid %d): %w", pid, err)
	}
	for deadline := time.Now().Add(30 * time.Second); p.Signal(syscall.Signal(0)) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("kafkatest: the broker (pid %d) outlived SIGKILL for 30 s", pid)
		}
	}
	return os.Remove(filepath.Join(b.dataDir, "kafka.pid"))
}

// Up starts a broker that Down stopped, on the same address and data.
func (b *Broker) Up() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return errors.New("kafkatest: Up after Stop")
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
	if _, err := runScript(stopTimeout, nil, b.script, "stop", b.dataDir); err != nil {
		// Keep the folder: its output explains what went wrong.
		return fmt.Errorf("stop the Kafka broker (output in %s): %w", b.dataDir, err)
	}
	return os.RemoveAll(b.dataDir)
}

// CreateTopic creates topic with the given partitions (replication 1) on
// the broker at bootstrap.
func CreateTopic(ctx context.Context, bootstrap, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("kafkatest: create topic %s: %w", topic, err)
	}
	return nil
}

func checkJava() error { return testproc.CheckJava(JavaNotFoundMessage) }

func scriptPath() (string, error) { return testproc.FindScript("scripts/kafka.sh") }

func readEnv(path string) (map[string]string, error) { return testproc.ReadEnv(path) }

func runScript(timeout time.Duration, progress io.Writer, script string, args ...string) (string, error) {
	return testproc.RunScript(timeout, progress, "KAFKA_WATCH_PID", script, args...)
}
