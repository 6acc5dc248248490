// Package workertest runs the reference consumer (examples/worker) for
// tests and reads its inbox: what the consumer received and what it did,
// per event ID.
package workertest

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the inbox is SQLite
)

// Build is the reference worker built with some of its modes: its zero
// value has every one; Only has one backend's. Each build is made once
// per test process.
type Build struct {
	// without lists the modes left out, as build tags (no_kafka,…).
	without string
}

// Only is the worker with the mode of the backend named name alone (and
// the directory queue's, which links no client): the modes it leaves out
// are examples/worker's NAME_off.go files, built under the tag no_NAME. A
// one-backend worker builds and starts in a fraction of the time of the
// whole one.
func Only(name string) Build {
	offs, _ := filepath.Glob(filepath.Join(moduleRoot(), "examples", "worker", "*_off.go"))
	var tags []string
	for _, off := range offs {
		if mode := strings.TrimSuffix(filepath.Base(off), "_off.go"); mode != name {
			tags = append(tags, "no_"+mode)
		}
	}
	return Build{without: strings.Join(tags, ",")}
}

// Start runs the worker with every mode (Build.Start).
func Start(t testing.TB, args ...string) *Worker { return Build{}.Start(t, args...) }

// StartReady runs the worker with every mode (Build.StartReady).
func StartReady(t testing.TB, args ...string) *Worker { return Build{}.StartReady(t, args...) }

// builds holds each build's binary, made by its first Start.
var builds = struct {
	sync.Mutex
	bin map[string]func() (string, error)
}{bin: map[string]func() (string, error){}}

// binary builds examples/worker with b's modes, once per test process.
func (b Build) binary() (string, error) {
	builds.Lock()
	build, ok := builds.bin[b.without]
	if !ok {
		build = sync.OnceValues(func() (string, error) {
			dir, err := os.MkdirTemp("", "dlqctl-worker-")
			if err != nil {
				return "", err
			}
			bin := filepath.Join(dir, "worker")
			c := exec.Command("go", "build", "-tags", b.without, "-o", bin, "./examples/worker")
			c.Dir = moduleRoot()
			if out, err := c.CombinedOutput(); err != nil {
				return "", fmt.Errorf("build the reference worker (tags %q): %v\n%s", b.without, err, out)
			}
			return bin, nil
		})
		builds.bin[b.without] = build
	}
	builds.Unlock()
	return build()
}

// moduleRoot is the module's directory, two above this file's.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Worker is the reference consumer running in the background until the
// test ends, or until it is idle (--until-idle).
type Worker struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	out    *strings.Builder
	mu     sync.Mutex
}

// Start runs the worker with args; it is stopped (SIGINT, then SIGKILL)
// when the test ends.
func (b Build) Start(t testing.TB, args ...string) *Worker {
	t.Helper()
	bin, err := b.binary()
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{cmd: exec.Command(bin, args...), exited: make(chan struct{}), out: &strings.Builder{}}
	w.cmd.Stdout, w.cmd.Stderr = lockedWriter{w}, lockedWriter{w}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		w.cmd.Process.Signal(os.Interrupt)
		select {
		case <-w.exited:
		case <-time.After(10 * time.Second):
			w.cmd.Process.Kill()
		}
	})
	return w
}

// StartReady is Start, returning once the worker has opened its source
// and its inbox (its --ready file exists): the consumer group or
// subscription and the inbox table are there, so what is published next is
// consumed, and a plan can check the inbox. It fails the test if the
// worker exits first or is not ready within a minute.
func (b Build) StartReady(t testing.TB, args ...string) *Worker {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	w := b.Start(t, append(args, "--ready", ready)...)
	deadline := time.After(time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(ready); err == nil {
			return w
		}
		select {
		case <-w.exited:
			t.Fatalf("the worker exited before it was ready: %v\n%s", w.err, w.Output())
		case <-deadline:
			t.Fatalf("the worker was not ready within a minute:\n%s", w.Output())
		case <-tick.C:
		}
	}
}

type lockedWriter struct{ w *Worker }

func (l lockedWriter) Write(p []byte) (int, error) {
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	return l.w.out.Write(p)
}

// Stop asks the worker to finish (SIGINT), as an operator would.
func (w *Worker) Stop() { w.cmd.Process.Signal(os.Interrupt) }

// Wait blocks until the worker exits and returns its exit status.
func (w *Worker) Wait() error {
	<-w.exited
	return w.err
}

// Output is what the worker printed so far.
func (w *Worker) Output() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.String()
}

// Row is one event in the worker's inbox.
type Row struct {
	Attempts, Effects int
	Fingerprint       string
}

// ReadInbox returns the inbox at path (SQLite), by event ID.
func ReadInbox(t testing.TB, path string) map[string]Row {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT event_id, attempts, effects, COALESCE(fingerprint, '') FROM inbox`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]Row{}
	for rows.Next() {
		var id string
		var r Row
		if err := rows.Scan(&id, &r.Attempts, &r.Effects, &r.Fingerprint); err != nil {
			t.Fatal(err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
