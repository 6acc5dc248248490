package redistest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestStartPingStop(t *testing.T) {
	s, err := StartProcess()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Client().Ping(ctx).Err(); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := s.Client().Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pid := s.PID()
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("server folder %s still there after Stop (%v)", s.dir, err)
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
		t.Errorf("redis-server pid %d still running after Stop", pid)
	}
}

func TestRequirePassClient(t *testing.T) {
	s := Start(t, "--requirepass", "sekrit-123")
	if err := s.Client().Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Client() should authenticate with --requirepass: %v", err)
	}
	if !strings.HasPrefix(s.URL(3, "a b"), "redis://127.0.0.1:") || !strings.HasSuffix(s.URL(3, "a b"), "/3?stream=a+b") {
		t.Errorf("URL = %q", s.URL(3, "a b"))
	}
}

func TestMissingServerFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := StartProcess()
	if err == nil || err.Error() != NotFoundMessage {
		t.Fatalf("err = %v, want %q", err, NotFoundMessage)
	}
}

func TestBadArgsReportLog(t *testing.T) {
	_, err := StartProcess("--no-such-option", "x")
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Fatalf("err = %v, want an early-exit error with the server's log", err)
	}
}
