package pulsartest

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/dlqctl/dlqctl/internal/testproc"
)

func TestBrokerLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Pulsar broker (Java): not in the -short tier")
	}
	began := time.Now()
	b, err := StartProcess()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start (fetch + start, cached distribution): %s", time.Since(began).Round(time.Millisecond))
	stopped := false
	defer func() {
		if !stopped {
			_ = b.Stop()
		}
	}()
	defer func() {
		if t.Failed() && !stopped {
			t.Logf("broker log tail:\n%s", b.LogTail(40))
		}
	}()

	if !strings.HasPrefix(b.ServiceURL(), "pulsar://127.0.0.1:") || !strings.HasPrefix(b.AdminURL(), "http://127.0.0.1:") {
		t.Fatalf("URLs = %q, %q", b.ServiceURL(), b.AdminURL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	out, err := b.Admin(ctx, http.MethodGet, "/admin/v2/clusters", nil)
	if err != nil || !strings.Contains(string(out), `"standalone"`) {
		t.Fatalf("clusters = %s, %v", out, err)
	}
	topic := "persistent://public/default/pulsartest-lifecycle"
	if _, err := b.Admin(ctx, http.MethodPut, "/admin/v2/persistent/public/default/pulsartest-lifecycle", nil); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	out, err = b.Admin(ctx, http.MethodGet, "/admin/v2/persistent/public/default", nil)
	if err != nil || !strings.Contains(string(out), topic) {
		t.Fatalf("topics = %s, %v", out, err)
	}
	if err := b.EnableDeduplication(ctx, "public/default", true); err != nil {
		t.Fatal(err)
	}
	assertDedup(ctx, t, b, true)
	if err := b.EnableDeduplication(ctx, "public", true); err == nil {
		t.Error("EnableDeduplication accepted a namespace without a tenant")
	}

	// One message through and acknowledged, one left in the backlog for
	// after the restart.
	client := newClient(t, b)
	consumer, err := client.Subscribe(pulsar.ConsumerOptions{
		Topic:                       topic,
		SubscriptionName:            "pulsartest",
		Type:                        pulsar.Shared,
		AckWithResponse:             true,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "pulsartest-producer"})
	if err != nil {
		t.Fatalf("create producer: %v", err)
	}
	for _, payload := range []string{"first", "kept-over-restart"} {
		if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payload), Properties: map[string]string{"REAL_TOPIC": "origin"}}); err != nil {
			t.Fatalf("send %s: %v", payload, err)
		}
	}
	msg := receive(ctx, t, consumer)
	if string(msg.Payload()) != "first" || msg.Properties()["REAL_TOPIC"] != "origin" {
		t.Fatalf("received %q %v", msg.Payload(), msg.Properties())
	}
	if err := consumer.Ack(msg); err != nil {
		t.Fatalf("ack: %v", err)
	}
	producer.Close()
	consumer.Close()
	client.Close()

	pid := b.PID()
	if rss := rssKB(pid); rss > 0 {
		t.Logf("broker RSS after first messages: %d MB", rss/1024)
	}

	serviceURL, adminURL := b.ServiceURL(), b.AdminURL()
	began = time.Now()
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart (stop + start on the same data): %s", time.Since(began).Round(time.Millisecond))
	if b.ServiceURL() != serviceURL || b.AdminURL() != adminURL {
		t.Fatalf("URLs changed over restart: %s %s -> %s %s", serviceURL, adminURL, b.ServiceURL(), b.AdminURL())
	}
	if b.PID() == pid || processAlive(pid) {
		t.Fatalf("old broker pid %d still there after Restart (new %d)", pid, b.PID())
	}
	if _, err := b.Admin(ctx, http.MethodGet, "/admin/v2/clusters", nil); err != nil {
		t.Fatalf("admin after restart: %v", err)
	}
	assertDedup(ctx, t, b, true)

	client = newClient(t, b)
	consumer, err = client.Subscribe(pulsar.ConsumerOptions{
		Topic:            topic,
		SubscriptionName: "pulsartest",
		Type:             pulsar.Shared,
		AckWithResponse:  true,
	})
	if err != nil {
		t.Fatalf("subscribe after restart: %v", err)
	}
	msg = receive(ctx, t, consumer)
	if string(msg.Payload()) != "kept-over-restart" {
		t.Fatalf("after restart received %q, want the unacknowledged message", msg.Payload())
	}
	if err := consumer.Ack(msg); err != nil {
		t.Fatalf("ack after restart: %v", err)
	}
	consumer.Close()
	client.Close()
	if rss := rssKB(b.PID()); rss > 0 {
		t.Logf("broker RSS after restart: %d MB", rss/1024)
	}

	pid = b.PID()
	watchdog := readPid(filepath.Join(b.Dir(), "watchdog.pid"))
	if err := b.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stopped = true
	if err := b.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if processAlive(pid) {
		t.Errorf("broker pid %d still running after Stop", pid)
	}
	if watchdog != 0 && processAlive(watchdog) {
		t.Errorf("watchdog pid %d still running after Stop", watchdog)
	}
	if _, err := os.Stat(b.Dir()); !os.IsNotExist(err) {
		t.Errorf("data folder %s still there after Stop (%v)", b.Dir(), err)
	}
	if err := b.Restart(); err == nil {
		t.Error("Restart after Stop succeeded")
	}
}

func TestMissingJavaFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("JAVA_HOME", "")
	_, err := StartProcess()
	if err == nil || err.Error() != JavaNotFoundMessage {
		t.Fatalf("err = %v, want %q", err, JavaNotFoundMessage)
	}
}

// TestFailedFetchFails runs the fetch with nothing cached and an mvn that
// fails, as it does offline: StartProcess must fail and say why.
func TestFailedFetchFails(t *testing.T) {
	bin := t.TempDir()
	fake := "#!/bin/sh\necho '[ERROR] Could not transfer artifact (fake mvn)' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "mvn"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	// The fetch comes after the check for java and runs none: a stand-in
	// lets this test run where no JDK is installed.
	if err := os.WriteFile(filepath.Join(bin, "java"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JAVA_HOME", "")
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("MAVEN_REPO_LOCAL", t.TempDir())
	t.Setenv("PULSAR_CACHE", t.TempDir())
	_, err := StartProcess()
	if err == nil || !strings.Contains(err.Error(), "mvn could not download") || !strings.Contains(err.Error(), "fake mvn") {
		t.Fatalf("err = %v, want a failed download", err)
	}
}

func TestScriptFound(t *testing.T) {
	p, err := testproc.FindScript(javaServer(nil).Script)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(p) != "pulsar-standalone.sh" {
		t.Fatalf("script = %s", p)
	}
}

func newClient(t *testing.T, b *Broker) pulsar.Client {
	t.Helper()
	client, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:               b.ServiceURL(),
		OperationTimeout:  30 * time.Second,
		ConnectionTimeout: 10 * time.Second,
		Logger:            pulsarlog.DefaultNopLogger(),
	})
	if err != nil {
		t.Fatalf("pulsar client: %v", err)
	}
	return client
}

func receive(ctx context.Context, t *testing.T, c pulsar.Consumer) pulsar.Message {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	msg, err := c.Receive(rctx)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return msg
}

func assertDedup(ctx context.Context, t *testing.T, b *Broker, want bool) {
	t.Helper()
	out, err := b.Admin(ctx, http.MethodGet, "/admin/v2/namespaces/public/default/deduplication", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.FormatBool(want) {
		t.Fatalf("deduplication = %q, want %v", got, want)
	}
}

func rssKB(pid int) int {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

func readPid(path string) int {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	return n
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	s := string(raw)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
