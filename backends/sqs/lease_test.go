package sqsdlq_test

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

// TestLease: a second run is refused with a BusyError naming the holder,
// the same run ID takes the lease over (a resume after kill -9), and after
// Release another run can take it.
func TestLease(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	a := open(t, ctx, p, "lease_settle=200ms")
	b := open(t, ctx, p, "lease_settle=200ms")
	since := time.Now()
	la, err := a.Lease(ctx, backend.LeaseHolder{RunID: "run-a", PID: 101, Host: "host-a", Since: since})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Lease(ctx, backend.LeaseHolder{RunID: "run-b", PID: 202, Host: "host-b"})
	var be *backend.BusyError
	if !errors.As(err, &be) || !errors.Is(err, backend.ErrBusy) || !strings.Contains(be.Holder, "run-a") || !strings.Contains(be.Holder, "host-a") {
		t.Fatalf("second run: %v, want a BusyError naming run-a", err)
	}
	if h, err := b.LeaseHolder(ctx); err != nil || !strings.Contains(h, "run-a") {
		t.Fatalf("LeaseHolder = %q, %v", h, err)
	}
	// The same run, restarted (another PID), takes over.
	la2, err := b.Lease(ctx, backend.LeaseHolder{RunID: "run-a", PID: 303, Host: "host-a"})
	if err != nil {
		t.Fatalf("same run ID: %v", err)
	}
	// The old holder's Release leaves the new holder's tag alone.
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h, _ := a.LeaseHolder(ctx); !strings.Contains(h, "pid 303") {
		t.Fatalf("after the old holder's release the lease is %q, want pid 303's", h)
	}
	if err := la2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h, _ := a.LeaseHolder(ctx); h != "" {
		t.Fatalf("after release LeaseHolder = %q", h)
	}
	lb, err := b.Lease(ctx, backend.LeaseHolder{RunID: "run-b", PID: 202, Host: "host-b"})
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	lb.Release(ctx)
}

// TestLeaseRace: runs that take the lease at the same time: exactly one
// wins, every other is refused.
func TestLeaseRace(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	const runs = 4
	type result struct {
		l   backend.Lease
		err error
	}
	out := make(chan result, runs)
	for i := range runs {
		q := open(t, ctx, p, "lease_settle=500ms")
		go func() {
			l, err := q.Lease(ctx, backend.LeaseHolder{RunID: "race-" + string(rune('a'+i)), PID: 1000 + i, Host: "h"})
			out <- result{l, err}
		}()
	}
	won := 0
	for range runs {
		r := <-out
		switch {
		case r.err == nil:
			won++
			defer r.l.Release(context.Background())
		case !errors.Is(r.err, backend.ErrBusy):
			t.Fatalf("unexpected error: %v", r.err)
		}
	}
	if won != 1 {
		t.Fatalf("%d runs hold the lease, want exactly 1", won)
	}
}

// TestLeaseSameRunLiveHolder: a resume (same run ID) on the same host does
// not take the lease from a holder whose process lives; it is refused
// naming the holder. Once that process is dead, the resume takes over.
func TestLeaseSameRunLiveHolder(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	a := open(t, ctx, p, "lease_settle=200ms")
	b := open(t, ctx, p, "lease_settle=200ms")
	host, _ := os.Hostname()
	live, err := a.Lease(ctx, backend.LeaseHolder{RunID: "run-live", PID: os.Getpid(), Host: host, Since: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Release(ctx)
	dead := deadPID(t)
	_, err = b.Lease(ctx, backend.LeaseHolder{RunID: "run-live", PID: dead, Host: host})
	var be *backend.BusyError
	if !errors.As(err, &be) || !strings.Contains(be.Holder, "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("resume while the holder lives: %v, want a BusyError naming pid %d", err, os.Getpid())
	}
	if err := live.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A lease left by a process that is dead (taken in its name here,
	// as a kill -9 leaves it): the same run ID from a live process takes over.
	c := open(t, ctx, p, "lease_settle=200ms")
	if _, err := c.Lease(ctx, backend.LeaseHolder{RunID: "run-dead", PID: dead, Host: host, Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l, err := b.Lease(ctx, backend.LeaseHolder{RunID: "run-dead", PID: os.Getpid(), Host: host, Since: time.Now()})
	if err != nil {
		t.Fatalf("resume after the holder died: %v", err)
	}
	l.Release(ctx)
}

// deadPID is the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

// TestLeaseDeadHolderOtherRun: a lease left on this host by a process that
// is dead (an apply killed before its journal existed, so no resume knows
// its run ID) does not lock the DLQ until it expires: the next run takes it.
func TestLeaseDeadHolderOtherRun(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	a := open(t, ctx, p, "lease_settle=200ms")
	b := open(t, ctx, p, "lease_settle=200ms")
	host, _ := os.Hostname()
	if _, err := a.Lease(ctx, backend.LeaseHolder{RunID: "run-killed", PID: deadPID(t), Host: host, Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l, err := b.Lease(ctx, backend.LeaseHolder{RunID: "run-next", PID: os.Getpid(), Host: host, Since: time.Now()})
	if err != nil {
		t.Fatalf("a dead holder's lease: %v, want taken over", err)
	}
	l.Release(ctx)
}
