package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backends/pulsar/pulsartest"
	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/effects"
	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/redrive"
)

// workerBin is the worker built once for the package's tests: they run it
// as a subprocess, since --crash-after-commit ends the process.
var workerBin string

// broker is the one Pulsar broker of the package's tests (pulsar_test.go),
// started by TestMain; tests keep apart by topic name.
var broker *pulsartest.Broker

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "worker-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workerBin = filepath.Join(dir, "worker")
	build := exec.Command("go", "build", "-o", workerBin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	flag.Parse()
	if testing.Short() {
		// The -short tier starts no Java server: the Pulsar tests say
		// they are left out (needBroker), the others run.
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	b, err := pulsartest.StartProcess()
	if err != nil {
		// Never skip: a missing broker must not pass for a green suite.
		fmt.Fprintf(os.Stderr, "FAIL: the worker's Pulsar tests need a Pulsar broker: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	broker = b
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "broker log tail:\n%s\n", b.LogTail(30))
	}
	if err := b.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one run of the worker binary.
type result struct {
	code           int
	stdout, stderr string
}

// runWorker runs the binary with args and waits for it to exit.
func runWorker(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, workerBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run worker: %v", err)
	}
	return r
}

// mustRun runs the worker and fails the test unless it exits with want.
func mustRun(t *testing.T, want int, args ...string) result {
	t.Helper()
	r := runWorker(t, args...)
	if r.code != want {
		t.Fatalf("worker %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
	}
	return r
}

// event is one message a test puts on the origin stream or in the inbox.
type event struct {
	id      string
	payload string
	// carry: the message carries its fingerprint field; else the worker
	// computes it.
	carry bool
	extra []string // more fields, name/value pairs
}

func (e event) fingerprint() string { return envelope.ComputeFingerprint([]byte(e.payload)) }

func orderEvents(n int) []event {
	evs := make([]event, n)
	for i := range evs {
		evs[i] = event{
			id:      fmt.Sprintf("E%d", i+1),
			payload: fmt.Sprintf(`{"orderId":"order-%d","amount":%d,"email":"jane%d@example.com"}`, i+1, 1000+i, i+1),
			carry:   i%2 == 0,
			extra:   []string{"tenant", "acme"},
		}
	}
	return evs
}

func xadd(t *testing.T, rdb *redis.Client, stream string, evs ...event) {
	t.Helper()
	for _, e := range evs {
		values := []string{"event_id", e.id}
		if e.carry {
			values = append(values, "fingerprint", e.fingerprint())
		}
		values = append(values, "payload", e.payload)
		values = append(values, e.extra...)
		if err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: stream, Values: values}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func pendingCount(t *testing.T, rdb *redis.Client, stream, group string) int64 {
	t.Helper()
	p, err := rdb.XPending(context.Background(), stream, group).Result()
	if err != nil {
		t.Fatal(err)
	}
	return p.Count
}

// records reads the inbox the way dlqctl does: through its --effects probe.
func records(t *testing.T, effectsURL string, ids ...string) map[string]effects.Record {
	t.Helper()
	ctx := context.Background()
	p, err := effects.Stores{}.Open(ctx, effectsURL, effects.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := p.Records(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// want is an inbox row a test expects.
type want struct {
	attempts, effects int64
	status            string
	fingerprint       string
	verdict           string // dlqctl's, for the event's own fingerprint
	back              bool   // the event is in the DLQ again
}

func checkInbox(t *testing.T, effectsURL string, wants map[string]want) {
	t.Helper()
	ids := make([]string, 0, len(wants))
	for id := range wants {
		ids = append(ids, id)
	}
	got := records(t, effectsURL, ids...)
	for id, w := range wants {
		rec, found := got[id]
		if !found {
			t.Errorf("%s: no inbox row", id)
			continue
		}
		if rec.Attempts != w.attempts || rec.Effects != w.effects || rec.Status != w.status {
			t.Errorf("%s: attempts=%d effects=%d status=%s, want attempts=%d effects=%d status=%s",
				id, rec.Attempts, rec.Effects, rec.Status, w.attempts, w.effects, w.status)
		}
		if w.fingerprint != "" && rec.Fingerprint != w.fingerprint {
			t.Errorf("%s: fingerprint %s, want %s", id, rec.Fingerprint, w.fingerprint)
		}
		if w.verdict != "" {
			fp := w.fingerprint
			if v := redrive.Judge(fp, rec, found, w.back); v != w.verdict {
				t.Errorf("%s: dlqctl verdict %s, want %s", id, v, w.verdict)
			}
		}
	}
}

func sqliteEffectsLog(t *testing.T, path string) map[string]int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT event_id, count(*) FROM effects_log GROUP BY event_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func pgEffectsLog(t *testing.T, url string) map[string]int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT event_id, count(*) FROM effects_log GROUP BY event_id")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// redisSourceURL is the worker's --source for stream and group.
func redisSourceURL(s *redistest.Server, stream, group, consumer string) string {
	u := fmt.Sprintf("redis://%s/0?stream=%s&group=%s", s.Addr(), stream, group)
	if consumer != "" {
		u += "&consumer=" + consumer
	}
	return u
}

func TestUsage(t *testing.T) {
	if r := runWorker(t, "--help"); r.code != 0 || !strings.Contains(r.stderr, "--inbox") && !strings.Contains(r.stderr, "-inbox") {
		t.Errorf("--help: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{},
		{"--source", "dir:" + t.TempDir()},
		{"--source", "kafka://x", "--inbox", "sqlite:" + filepath.Join(t.TempDir(), "x.db")},
		{"--source", "redis://127.0.0.1:1/0?stream=s", "--inbox", "sqlite:x.db"},
		{"--source", "dir:" + t.TempDir(), "--inbox", "mysql://x"},
		{"--source", "dir:x", "--inbox", "sqlite:x.db", "extra"},
		{"--source", "redis://127.0.0.1:1/0?stream=s", "--create"}, // not for redis
		{"--source", "kafka://127.0.0.1:1", "--create"},            // no topic
	} {
		if r := runWorker(t, args...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
	}
}
