package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/internal/redistest"
)

// crashBackend is a DLQ for the crash matrix: seeded with n events, with a
// way to read back what reached the destination.
type crashBackend struct {
	source string
	// consume is the reference worker's --source for the destination.
	consume string
	// delivered lists the event IDs at the destination, one per copy.
	delivered func(t *testing.T) []string
	dlqLen    func(t *testing.T) int
}

func dirBackend(t *testing.T, n int) crashBackend {
	root := filepath.Join(t.TempDir(), "q")
	for _, d := range []string{"error", "inbox"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	for i := 1; i <= n; i++ {
		payload := []byte(fmt.Sprintf(`{"order":%d}`, i))
		e := envelope.Envelope{ID: fmt.Sprintf("20261129T1000%02dZ-%04d", i%60, i), EventID: fmt.Sprintf("E%03d", i),
			Fingerprint: envelope.ComputeFingerprint(payload), Payload: payload, PayloadEncoding: "json",
			Key: fmt.Sprintf("k%d", i%5), Origin: envelope.Origin{Backend: "dir", Topic: "orders"}, LastError: "timeout",
			Attempts: 3}
		b, _ := envelope.MarshalIndent(e)
		os.WriteFile(filepath.Join(root, "error", e.ID+".json"), b, 0o644)
	}
	return crashBackend{
		source:  "dir:" + root,
		consume: "dir:" + root,
		delivered: func(t *testing.T) []string {
			files, _ := filepath.Glob(filepath.Join(root, "inbox", "*.json"))
			var ids []string
			for _, f := range files {
				b, _ := os.ReadFile(f)
				ids = append(ids, envelope.DecodeFile("x", b).EventID)
			}
			return ids
		},
		dlqLen: func(t *testing.T) int {
			files, _ := filepath.Glob(filepath.Join(root, "error", "*.json"))
			return len(files)
		},
	}
}

func redisBackend(t *testing.T, n int) crashBackend {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("DLQCTL_TEST_REDIS_ADDR"), DB: 2})
	t.Cleanup(func() { rdb.Close() })
	key := strings.NewReplacer("/", "-", "=", "-", "#", "-").Replace(t.Name())
	rdb.Del(ctx, key+"-dlq", key+"-orders")
	for i := 1; i <= n; i++ {
		payload := fmt.Sprintf(`{"order":%d}`, i)
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: key + "-dlq", Values: []any{
			"event_id", fmt.Sprintf("E%03d", i), "payload", payload,
			"fingerprint", envelope.ComputeFingerprint([]byte(payload)), "origin_stream", key + "-orders",
			"key", fmt.Sprintf("k%d", i%5), "last_error", "timeout", "attempts", "3",
		}})
	}
	return crashBackend{
		source:  fmt.Sprintf("redis://%s/2?stream=%s-dlq", os.Getenv("DLQCTL_TEST_REDIS_ADDR"), key),
		consume: fmt.Sprintf("redis://%s/2?stream=%s-orders&group=g", os.Getenv("DLQCTL_TEST_REDIS_ADDR"), key),
		delivered: func(t *testing.T) []string {
			msgs, err := rdb.XRange(ctx, key+"-orders", "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range msgs {
				ids = append(ids, m.Values["event_id"].(string))
			}
			return ids
		},
		dlqLen: func(t *testing.T) int { return int(rdb.XLen(ctx, key+"-dlq").Val()) },
	}
}

// dlqctlProc runs the real command (the test binary, through testscript's
// PATH entry) and returns its exit code and output.
func dlqctlProc(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	c := exec.Command("dlqctl", args...)
	c.Dir = dir
	c.Env = append(os.Environ(), append([]string{"DLQCTL_TEST_NOW=", "DLQCTL_APPROVAL_KEY=test-approval-key-0123456789abcdef"}, env...)...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
		if code == -1 {
			code = 137 // killed by a signal
		}
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

// TestCrashMatrix kills dlqctl with SIGKILL right after each kind of
// journal step in turn, then resumes: every event reaches its destination
// exactly once and the DLQ ends empty.
func TestCrashMatrix(t *testing.T) {
	const n = 25
	backends := map[string]func(*testing.T, int) crashBackend{"dir": dirBackend, "redis": redisBackend}
	steps := []string{"batch-start:1", "intent:1", "intent:3", "published:1", "published:4", "batch-end:1", "batch-end:2"}
	for name, mk := range backends {
		for _, step := range steps {
			t.Run(name+"/"+step, func(t *testing.T) {
				b := mk(t, n)
				dir := t.TempDir()
				src := []string{"--source", b.source}
				if code, out := dlqctlProc(t, dir, nil, append(src, "redrive", "plan", "--reason", "crash test", "--rate", "100000",
					"--burst", "4", "--ramp", "5,10", "--settle", "0s", "--unverified-ok", "--out", "p.json")...); code != 0 {
					t.Fatalf("plan: %d %s", code, out)
				}
				if code, out := dlqctlProc(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
					t.Fatalf("approve: %d %s", code, out)
				}
				code, out := dlqctlProc(t, dir, []string{"DLQCTL_TEST_CRASH=" + step}, append(src, "redrive", "apply", "p.json")...)
				if code != 137 {
					t.Fatalf("apply did not crash at %s: exit %d\n%s", step, code, out)
				}
				code, out = dlqctlProc(t, dir, nil, append(src, "redrive", "resume", "p.journal", "-o", "json")...)
				if code != 0 {
					t.Fatalf("resume: exit %d\n%s", code, out)
				}
				var doc struct {
					Status string `json:"status"`
					Moved  int    `json:"moved"`
				}
				if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &doc); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				if doc.Status != "completed" || doc.Moved != n {
					t.Errorf("after resume: status %s, moved %d; want completed, %d", doc.Status, doc.Moved, n)
				}
				seen := map[string]int{}
				for _, id := range b.delivered(t) {
					seen[id]++
				}
				for id, c := range seen {
					if c != 1 {
						t.Errorf("%s reached the destination %d times", id, c)
					}
				}
				if len(seen) != n {
					t.Errorf("%d distinct events at the destination, want %d", len(seen), n)
				}
				if l := b.dlqLen(t); l != 0 {
					t.Errorf("%d entries left in the DLQ", l)
				}
				// The consumer takes everything once: one effect per event.
				inbox := filepath.Join(dir, "inbox.db")
				w := startWorker(t, "--source", b.consume, "--inbox", "sqlite:"+inbox, "--until-idle", "500ms")
				if err := w.wait(); err != nil {
					t.Fatalf("worker: %v\n%s", err, w.out)
				}
				rows := readInbox(t, inbox)
				if len(rows) != n {
					t.Errorf("%d events in the consumer's inbox, want %d", len(rows), n)
				}
				for id, r := range rows {
					if r.effects != 1 || r.attempts != 1 {
						t.Errorf("%s: attempts %d effects %d, want 1 and 1", id, r.attempts, r.effects)
					}
				}
			})
		}
	}
}

// TestRedisRestartDuringApply stops Redis while a redrive runs: apply
// fails with exit 1 and prints the resume command; once Redis is back,
// resume completes, and every event reached its origin exactly once.
func TestRedisRestartDuringApply(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	t.Setenv("DLQCTL_TEST_REDIS_ADDR", srv.Addr())
	const n = 60
	b := redisBackend(t, n)
	dir := t.TempDir()
	src := []string{"--source", b.source}
	if code, out := dlqctlProc(t, dir, nil, append(src, "redrive", "plan", "--reason", "restart test", "--rate", "40",
		"--burst", "2", "--ramp", "10,20", "--settle", "0s", "--unverified-ok", "--out", "p.json")...); code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	}
	if code, out := dlqctlProc(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	type result struct {
		code int
		out  string
	}
	done := make(chan result)
	go func() {
		code, out := dlqctlProc(t, dir, nil, append(src, "redrive", "apply", "p.json")...)
		done <- result{code, out}
	}()
	time.Sleep(600 * time.Millisecond) // 60 entries at 40/s take 1.5 s
	if err := srv.Down(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != 1 || !strings.Contains(r.out, "dlqctl redrive resume p.journal") {
		t.Fatalf("apply with Redis down: exit %d, want 1 with the resume command\n%s", r.code, r.out)
	}
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	code, out := dlqctlProc(t, dir, nil, append(src, "redrive", "resume", "p.journal")...)
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	seen := map[string]int{}
	for _, id := range b.delivered(t) {
		seen[id]++
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("%s reached the origin %d times", id, c)
		}
	}
	if len(seen) != n || b.dlqLen(t) != 0 {
		t.Errorf("%d events at the origin, %d left in the DLQ; want %d and 0", len(seen), b.dlqLen(t), n)
	}
}
