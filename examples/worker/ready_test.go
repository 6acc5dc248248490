package main

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dirqueue "github.com/dlqctl/dlqctl/backends/dir"
)

// TestReadyFile: --ready is created once the inbox table exists, and not
// before: whoever waits for it may plan against the inbox at once.
func TestReadyFile(t *testing.T) {
	root := t.TempDir()
	if err := dirqueue.Init(root); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "consumer.db")
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(workerBin, "--source", "dir:"+root, "--inbox", "sqlite:"+db, "--ready", ready)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	}()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatal("the worker exited before it was ready")
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no ready file after 20s")
		}
	}
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRow(`SELECT COUNT(*) FROM inbox`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("inbox at ready: %d rows, %v", n, err)
	}
}

// TestReadyFileUnwritable: a ready file that cannot be made is an error,
// not a worker that runs while its caller waits forever.
func TestReadyFileUnwritable(t *testing.T) {
	root := t.TempDir()
	if err := dirqueue.Init(root); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, 1, "--source", "dir:"+root, "--inbox", "sqlite:"+filepath.Join(t.TempDir(), "c.db"),
		"--ready", filepath.Join(t.TempDir(), "missing", "ready"), "--until-idle", "1ms")
	if !strings.Contains(r.stderr, "--ready") {
		t.Fatalf("stderr does not name --ready: %s", r.stderr)
	}
}
