// Package kafkatest runs a real single-node Apache Kafka broker (KRaft,
// broker and controller in one JVM) for tests, through scripts/kafka.sh:
// the jars come from Maven Central once (cached in ~/.m2 and
// ~/.cache/dlqctl/kafka-VERSION/libs), and each broker listens on free
// loopback ports with its data in a temporary folder. There is no fake: a
// test that needs Kafka and cannot get Java or the jars fails, so that a
// missing broker is never mistaken for a passing suite.
//
// A broker takes about five seconds to start, so a package's tests share
// one (Shared), started by the first test that needs it; tests keep apart
// by topic name. The lifecycle (script, ports, start lock, stop by PID) is
// testproc.JavaServer's.
package kafkatest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqctl/dlqctl/internal/testproc"
)

// javaServer is how scripts/kafka.sh runs a broker.
func javaServer() *testproc.JavaServer {
	return &testproc.JavaServer{
		Name:         "the Kafka broker",
		Script:       "scripts/kafka.sh",
		WatchVar:     "KAFKA_WATCH_PID",
		TempPrefix:   "kafkatest-",
		PIDFile:      "kafka.pid",
		LogFile:      "kafka.out",
		JavaNotFound: JavaNotFoundMessage,
		FetchTimeout: 10 * time.Minute,
		StartTimeout: 3 * time.Minute, // the script itself gives up after 120 s
		StopTimeout:  time.Minute,     // the script kills after 30 s
		Prepare:      writeTLS,
	}
}

// JavaNotFoundMessage is the error text when no java can be found.
const JavaNotFoundMessage = "java not found: the Kafka broker needs a JDK 17 or newer (apt-get install openjdk-17-jre-headless) on PATH or in JAVA_HOME"

// Broker is one running Kafka process.
//
// Its PID, Dir (its config, data and logs), LogTail, Down, Up, Restart,
// Kill (SIGKILL, as a crash) and Stop (which removes its folder) are
// testproc.JavaProc's.
type Broker struct {
	*testproc.JavaProc

	mu        sync.Mutex
	bootstrap string
	sasl      SASL
	tls       TLS
}

// Start runs a broker for the test alone and stops it in t.Cleanup. It
// fails the test when the broker cannot be fetched or started, and skips
// it under -short. Tests of a package share one broker: see Shared.
func Start(t testing.TB) *Broker {
	t.Helper()
	return testproc.StartForTest(t, serverName, StartProcess)
}

// serverName names the server in the messages of a test that needs it.
const serverName = "an Apache Kafka broker"

// Shared is one broker for a package's tests, started by the first test
// that calls its Get and stopped by TestMain's Finish; under -short, Get
// skips the test and nothing starts.
func Shared() *testproc.Shared[*Broker] {
	return &testproc.Shared[*Broker]{Server: serverName, Start: StartProcess}
}

// StartProcess fetches the jars when they are not cached yet, formats a
// new temporary folder and starts a broker there, returning once it has
// started. The caller must call Stop. Should the test binary die without
// calling Stop, a watchdog left by the script stops the broker.
func StartProcess() (*Broker, error) {
	b := &Broker{}
	proc, err := javaServer().Launch(b.read)
	if err != nil {
		return nil, err
	}
	b.JavaProc = proc
	return b, nil
}

// read takes the listeners from the env file of a start.
func (b *Broker) read(env map[string]string) error {
	if err := javaServer().Require(env, "KAFKA_BOOTSTRAP", "KAFKA_SASL_BOOTSTRAP", "KAFKA_SASL_SSL_BOOTSTRAP", "KAFKA_TLS_CA"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bootstrap = env["KAFKA_BOOTSTRAP"]
	b.sasl = SASL{Bootstrap: env["KAFKA_SASL_BOOTSTRAP"], User: env["KAFKA_SASL_USER"], Password: env["KAFKA_SASL_PASSWORD"]}
	b.tls = TLS{SASL: b.sasl, CA: env["KAFKA_TLS_CA"]}
	b.tls.Bootstrap = env["KAFKA_SASL_SSL_BOOTSTRAP"]
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
