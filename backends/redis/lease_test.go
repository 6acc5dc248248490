package redisstream

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// deadPID is the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

func TestLease(t *testing.T) {
	ctx := context.Background()
	k := key(t, "dlq")
	src := "redis://" + shared.Addr() + "/0?stream=" + k
	s := openStream(t, src, Options{LeaseTTL: 600 * time.Millisecond})
	host, _ := os.Hostname()
	me := backend.LeaseHolder{RunID: "run-a", PID: os.Getpid(), Host: host, Since: time.Now()}
	l, err := s.Lease(ctx, me)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := s.LeaseHolder(ctx); err != nil || !strings.Contains(h, "run run-a") {
		t.Errorf("LeaseHolder = %q, %v", h, err)
	}

	// Another run is refused, naming the holder.
	other := openStream(t, src, Options{})
	_, err = other.Lease(ctx, backend.LeaseHolder{RunID: "run-b", PID: 1, Host: host, Since: time.Now()})
	var be *backend.BusyError
	if !errors.As(err, &be) || !errors.Is(err, backend.ErrBusy) || !strings.Contains(be.Holder, "run run-a") {
		t.Fatalf("second run: %v, want busy naming run-a", err)
	}
	// The same run ID from another live process on this host is refused
	// too (two resumes of copies of one journal).
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	if err := s.rdb.Set(ctx, s.leaseKey(), `{"run_id":"run-a","pid":`+itoa(sleeper.Process.Pid)+`,"host":"`+host+`","since":"2026-12-01T10:00:00Z"}`, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Lease(ctx, backend.LeaseHolder{RunID: "run-a", PID: 2, Host: host, Since: time.Now()}); !errors.Is(err, backend.ErrBusy) {
		t.Errorf("same run ID while its process lives: %v, want busy", err)
	}
	// The renewal of run-a's first lease now finds another value: lost.
	select {
	case <-l.Lost():
	case <-time.After(3 * time.Second):
		t.Errorf("the lease was not reported lost after another value replaced it")
	}
	_ = l.Release(ctx)
	if v, _ := s.rdb.Get(ctx, s.leaseKey()).Result(); !strings.Contains(v, itoa(sleeper.Process.Pid)) {
		t.Errorf("Release deleted a lease that was not its own: %q", v)
	}

	// A crashed run's lease (its process gone) is taken over by its own
	// run ID at once, and by nobody else until it expires.
	dead := deadPID(t)
	s.rdb.Set(ctx, s.leaseKey(), `{"run_id":"run-c","pid":`+itoa(dead)+`,"host":"`+host+`","since":"2026-12-01T10:00:00Z"}`, time.Minute)
	if _, err := other.Lease(ctx, backend.LeaseHolder{RunID: "run-d", PID: os.Getpid(), Host: host, Since: time.Now()}); !errors.Is(err, backend.ErrBusy) {
		t.Errorf("another run over a crashed run's lease: %v, want busy", err)
	}
	l2, err := s.Lease(ctx, backend.LeaseHolder{RunID: "run-c", PID: os.Getpid(), Host: host, Since: time.Now()})
	if err != nil {
		t.Fatalf("the crashed run's resume: %v", err)
	}
	// Renewed past its TTL while held.
	time.Sleep(1500 * time.Millisecond)
	select {
	case <-l2.Lost():
		t.Fatal("lost while renewing")
	default:
	}
	if h, _ := s.LeaseHolder(ctx); !strings.Contains(h, "run run-c") {
		t.Errorf("after 2.5 TTLs the holder is %q, want run-c", h)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := s.LeaseHolder(ctx); err != nil || h != "" {
		t.Errorf("after release: holder %q, %v", h, err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
