// Package sqstest runs a real ElasticMQ server (SQS-compatible) for tests,
// through scripts/elasticmq.sh: the server and its dependencies come from
// Maven Central once (cached in ~/.m2 and ~/.cache/dlqctl/elasticmq), and
// each server listens on a free loopback port with its queues and messages
// stored in a temporary folder. There is no fake: a test that needs SQS and
// cannot get Java or the server fails, so that a missing server is never
// mistaken for a passing suite.
//
// A server starts in about 2 s; a package's tests share one (Shared),
// started by the first test that needs it, and keep apart by queue name.
// The lifecycle (script, port, start lock, stop by PID) is
// testproc.JavaServer's.
package sqstest

import (
	"context"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqctl/dlqctl/internal/testproc"
)

// javaServer is how scripts/elasticmq.sh runs a server.
func javaServer() *testproc.JavaServer {
	return &testproc.JavaServer{
		Name:         "ElasticMQ",
		Script:       "scripts/elasticmq.sh",
		WatchVar:     "ELASTICMQ_WATCH_PID",
		TempPrefix:   "sqstest-",
		PIDFile:      "elasticmq.pid",
		LogFile:      "elasticmq.log",
		JavaNotFound: "java not found: ElasticMQ needs a JDK 11 or newer (apt-get install openjdk-17-jre-headless) on PATH or in JAVA_HOME",
		FetchTimeout: 10 * time.Minute,
		StartTimeout: 2 * time.Minute,
		StopTimeout:  time.Minute,
	}
}

// Region is the region ElasticMQ reports in queue ARNs.
const Region = "elasticmq"

// Server is one running ElasticMQ process.
//
// Its PID, Dir (its queues, messages and log), LogTail, Down (SIGTERM,
// then SIGKILL, keeping the folder: the endpoint refuses connections until
// Up), Up, Restart, Kill (SIGKILL, as a crash) and Stop (which removes its
// folder) are testproc.JavaProc's.
type Server struct {
	*testproc.JavaProc

	mu       sync.Mutex
	endpoint string
}

// Start runs a server for the test alone and stops it in t.Cleanup. It
// fails the test when the server cannot be fetched or started, and skips
// it under -short. Tests of a package share one server: see Shared.
func Start(t testing.TB) *Server {
	t.Helper()
	return testproc.StartForTest(t, serverName, StartProcess)
}

// serverName names the server in the messages of a test that needs it.
const serverName = "ElasticMQ"

// Shared is one server for a package's tests, started by the first test
// that calls its Get and stopped by TestMain's Finish; under -short, Get
// skips the test and nothing starts.
func Shared() *testproc.Shared[*Server] {
	return &testproc.Shared[*Server]{Server: serverName, Start: StartProcess}
}

// StartProcess fetches the server when it is not cached, starts it in a new
// temporary folder and waits until the SQS API answers. The caller must
// call Stop; should the test binary die first, a watchdog left by the
// script stops the server.
func StartProcess() (*Server, error) {
	s := &Server{}
	proc, err := javaServer().Launch(s.read)
	if err != nil {
		return nil, err
	}
	s.JavaProc = proc
	return s, nil
}

// read takes the endpoint from the env file of a start.
func (s *Server) read(env map[string]string) error {
	if err := javaServer().Require(env, "SQS_ENDPOINT"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoint = env["SQS_ENDPOINT"]
	return nil
}

// Endpoint is the server's SQS endpoint, http://127.0.0.1:PORT.
func (s *Server) Endpoint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endpoint
}

// Client is an SQS client on the server with static test credentials.
func (s *Server) Client() *sqs.Client { return s.ClientVia(nil) }

// ClientVia is Client with its HTTP calls made through rt (nil: the
// SDK's default), for a test's fault injection around the real server.
func (s *Server) ClientVia(rt http.RoundTripper) *sqs.Client {
	o := sqs.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint()),
		Credentials:  aws.NewCredentialsCache(staticCreds{}),
	}
	if rt != nil {
		o.HTTPClient = &http.Client{Transport: rt}
	}
	return sqs.New(o)
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
