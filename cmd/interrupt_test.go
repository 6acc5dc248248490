package cmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backends/redis/redistest"
)

// TestCtrlCStopsALongScan cancels the command's context (what Ctrl-C does
// through signal.NotifyContext) in the middle of a scan of a large real
// stream: the command must give up at once with exit code 130.
func TestCtrlCStopsALongScan(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	const n = 200_000
	for i := 0; i < n; i += 1000 {
		pipe := rdb.Pipeline()
		for j := i; j < i+1000; j++ {
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: "dlq", Values: []any{
				"event_id", fmt.Sprint("E", j), "payload", `{"n":1}`, "last_error", "timeout",
			}})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	io, _, _, errOut := TestIO()
	f := &Factory{Deps: Deps{Backends: testBackends(), IO: io, Now: time.Now, Getenv: func(string) string { return "" }}}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan int)
	start := time.Now()
	go func() { done <- Execute(cctx, f, []string{"--source", srv.URL(0, "dlq"), "stats"}) }()
	// Ctrl-C once the scan has read its first page (the server counts its
	// XRANGE calls): the scan is then surely under way.
	for deadline := time.Now().Add(30 * time.Second); !scanStarted(t, rdb); {
		if time.Now().After(deadline) {
			t.Fatal("the scan did not start within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	cancelled := time.Now()
	select {
	case code := <-done:
		if code != ExitInterrupted {
			t.Fatalf("exit %d, want %d; stderr: %s", code, ExitInterrupted, errOut)
		}
		if waited := time.Since(cancelled); waited > 2*time.Second {
			t.Errorf("took %s after Ctrl-C to stop", waited)
		}
		if time.Since(start) > 5*time.Second {
			t.Log("the scan finished before the cancel landed; the stream is too small for this machine")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10s after Ctrl-C")
	}
}

// scanStarted says whether the server has answered an XRANGE, as a scan's
// first page is read with.
func scanStarted(t *testing.T, rdb *redis.Client) bool {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(info, "cmdstat_xrange:")
}

// TestCtrlCEndsAWatchWith130: stats --watch ends on Ctrl-C as every other
// command does, with 130, so that a script tells it from --count running
// out (exit 0).
func TestCtrlCEndsAWatchWith130(t *testing.T) {
	io, _, out, errOut := TestIO()
	drawn := make(chan struct{})
	io.Out = &firstWrite{w: out, done: drawn}
	f := &Factory{Deps: Deps{Backends: testBackends(), IO: io, Now: time.Now, Getenv: func(string) string { return "" }}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- Execute(ctx, f, []string{"--source", incidentSource(t), "stats", "--watch", "--interval", "1h", "-o", "ndjson"})
	}()
	// Ctrl-C once the first draw is out: the watch then waits an hour for
	// the next.
	select {
	case <-drawn:
	case code := <-done:
		t.Fatalf("exit %d before the first draw; stderr: %s", code, errOut)
	case <-time.After(30 * time.Second):
		t.Fatal("no first draw within 30s")
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitInterrupted {
			t.Fatalf("exit %d, want %d; stderr: %s", code, ExitInterrupted, errOut)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still watching 10s after Ctrl-C")
	}
	// --count ending the watch is still success.
	if _, stderr, code := run(t, nil, "--source", incidentSource(t), "stats", "--watch", "--interval", "1s", "--count", "1", "-o", "ndjson"); code != ExitOK {
		t.Errorf("--count 1: exit %d: %s", code, stderr)
	}
}

// firstWrite passes writes on to w and closes done at the first one: a
// command's first output, observed without reading a buffer it writes to.
type firstWrite struct {
	w    io.Writer
	done chan struct{}
	once sync.Once
}

func (f *firstWrite) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	f.once.Do(func() { close(f.done) })
	return n, err
}
