package backendtest

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// caseLease: one run at a time holds the DLQ. Another run is refused at
// once, naming the holder; after Release it takes the DLQ. A crashed
// run's resume takes its lease over (leaseTakeover).
func caseLease(t *testing.T, c *contract) {
	a := c.open(t)
	la, ok := a.(backend.Leaser)
	if !ok {
		return // caseCapabilities checked it declares none
	}
	b := c.open(t)
	lb := b.(backend.Leaser)
	now := time.Now().Truncate(time.Second)

	held, err := la.Lease(c.ctx, backend.ThisProcess("run-a", now))
	if err != nil {
		t.Fatalf("Lease on a free DLQ: %v", err)
	}
	wantBusy(t, "another run", "run-a")(lb.Lease(c.ctx, backend.ThisProcess("run-b", now)))
	wantHolder(t, c, b, "run-a")
	select {
	case <-held.Lost():
		t.Error("Lost closed on a lease that nobody took")
	default:
	}
	if err := held.Release(c.ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case <-held.Lost():
		t.Error("a released lease reports lost")
	default:
	}
	wantHolder(t, c, b, "")
	l, err := lb.Lease(c.ctx, backend.ThisProcess("run-b", now))
	if err != nil {
		t.Fatalf("Lease after the holder's Release: %v", err)
	}
	if err := l.Release(c.ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	leaseTakeover(t, c, a, b, now)
}

// leaseTakeover: a crashed run's resume takes its lease over — when the
// holder is gone, and only then where the primitive is tied to the holder
// — and a holder whose lease was taken sees Lost.
func leaseTakeover(t *testing.T, c *contract, a, b backend.Source, now time.Time) {
	la, lb := a.(backend.Leaser), b.(backend.Leaser)
	crashed := backend.ThisProcess("run-c", now)
	crashed.PID = exitedPID(t)
	resume := backend.ThisProcess("run-c", now.Add(time.Second))
	old, err := la.Lease(c.ctx, crashed)
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	if crash := c.s.Lease.Crash; crash != nil {
		// Tied to a live holder: nobody takes it, its own run neither,
		// and it is not lost for that.
		wantBusy(t, "the same run while the holder lives", "run-c")(lb.Lease(c.ctx, resume))
		select {
		case <-old.Lost():
			t.Error("Lost closed on a lease held by a live holder")
		default:
		}
		crash(t, old)
	}
	taken, err := lb.Lease(c.ctx, resume)
	if err != nil {
		t.Fatalf("the crashed run's resume: %v, want the lease taken over", err)
	}
	wantHolder(t, c, b, "run-c")
	if c.s.Lease.Crash == nil {
		within := c.s.Lease.LostWithin
		if within <= 0 {
			t.Fatal("backendtest: Lease.LostWithin is needed when Lease.Crash is nil")
		}
		select {
		case <-old.Lost():
		case <-time.After(within):
			t.Errorf("a holder whose lease was taken over did not see Lost within %s", within)
		}
		// Its Release leaves the new holder's lease alone.
		if err := old.Release(c.ctx); err != nil {
			t.Errorf("Release of a lost lease: %v", err)
		}
		wantHolder(t, c, a, "run-c")
	}
	if err := taken.Release(c.ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantHolder(t, c, a, "")
}

// wantBusy checks a Lease call's outcome: refused with a *BusyError that
// errors.Is ErrBusy and names the holding run.
func wantBusy(t *testing.T, who, holder string) func(backend.Lease, error) {
	t.Helper()
	return func(l backend.Lease, err error) {
		t.Helper()
		var be *backend.BusyError
		if !errors.As(err, &be) || !errors.Is(err, backend.ErrBusy) || !strings.Contains(be.Holder, "run "+holder) {
			t.Errorf("Lease by %s: %v, want a BusyError naming run %s", who, err, holder)
		}
		if l != nil {
			t.Errorf("Lease by %s gave a lease while another run holds it", who)
			_ = l.Release(context.Background())
		}
	}
}

// wantHolder checks what LeaseHolder says, where the backend can tell
// without taking the lease: the run named, or "" for none.
func wantHolder(t *testing.T, c *contract, src backend.Source, run string) {
	t.Helper()
	lc, ok := src.(backend.LeaseChecker)
	if !ok {
		return
	}
	h, err := lc.LeaseHolder(c.ctx)
	switch {
	case err != nil:
		t.Errorf("LeaseHolder: %v", err)
	case run == "" && h != "":
		t.Errorf("LeaseHolder = %q, want nobody", h)
	case run != "" && !strings.Contains(h, "run "+run):
		t.Errorf("LeaseHolder = %q, want run %s", h, run)
	}
}

// exitedPID is the PID of a process that has exited: a crashed holder's.
func exitedPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("start a process to outlive: %v", err)
	}
	return cmd.Process.Pid
}
