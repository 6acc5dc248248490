package testproc

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcessWaitReadyAndStop: a process that answers is ready, and one
// that ends on SIGTERM stops without error and is not killed.
func TestProcessWaitReadyAndStop(t *testing.T) {
	log := &Log{}
	p, err := Launch(exec.Command("sh", "-c", "echo up; exec sleep 30"), log)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	err = p.WaitReady("sleeper", 5*time.Second, time.Millisecond, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("WaitReady: %v after %d calls, want nil after 3", err, calls)
	}
	if err := p.Stop("sleeper", syscall.SIGTERM, 5*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	if err := p.Stop("sleeper", syscall.SIGTERM, time.Second); err != nil {
		t.Fatalf("a second Stop: %v, want nil", err)
	}
}

// TestProcessExitBeforeReady: a server that dies at start fails WaitReady
// at once with its output, rather than after the timeout.
func TestProcessExitBeforeReady(t *testing.T) {
	p, err := Launch(exec.Command("sh", "-c", "echo bad config >&2; exit 3"), &Log{})
	if err != nil {
		t.Fatal(err)
	}
	begun := time.Now()
	err = p.WaitReady("failer", time.Minute, 10*time.Millisecond, func() error { return errors.New("no answer") })
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "bad config") {
		t.Fatalf("WaitReady = %v, want an exit error with the output", err)
	}
	if took := time.Since(begun); took > 10*time.Second {
		t.Fatalf("WaitReady took %s to see the exit", took)
	}
}

// TestProcessWaitReadyTimeout names the last readiness error.
func TestProcessWaitReadyTimeout(t *testing.T) {
	p, err := Launch(exec.Command("sleep", "30"), &Log{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	err = p.WaitReady("mute", 50*time.Millisecond, 10*time.Millisecond, func() error { return errors.New("connection refused") })
	if err == nil || !strings.Contains(err.Error(), "not ready after") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("WaitReady = %v, want a timeout naming the last error", err)
	}
}

// TestProcessStopKillsWhatIgnoresTheSignal: a process that ignores the
// signal is killed after the grace, and Stop says so.
func TestProcessStopKillsWhatIgnoresTheSignal(t *testing.T) {
	log := &Log{}
	p, err := Launch(exec.Command("sh", "-c", "trap '' TERM; echo trapped; while :; do sleep 1; done"), log)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady("stubborn", 5*time.Second, 5*time.Millisecond, func() error {
		if !strings.Contains(log.String(), "trapped") {
			return errors.New("trap not set yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	err = p.Stop("stubborn", syscall.SIGTERM, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "killed it") {
		t.Fatalf("Stop = %v, want an error saying it killed it", err)
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned before the process exited")
	}
}
