package backend

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func closedWithin(c <-chan struct{}, d time.Duration) bool {
	select {
	case <-c:
		return true
	case <-time.After(d):
		return false
	}
}

// TestKeepAlive: renewals that succeed keep the lease, even past the
// caller's cancellation; a renewal that finds it taken loses it at once;
// renewals that cannot tell lose it after `within`, and only then.
func TestKeepAlive(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	ok := StartKeepAlive(ctx, 5*time.Millisecond, 20*time.Millisecond, func(context.Context) error {
		calls.Add(1)
		return nil
	})
	cancel()
	if closedWithin(ok.Lost(), 60*time.Millisecond) {
		t.Error("a lease whose renewals succeed was lost")
	}
	ok.Stop()
	ok.Stop()
	n := calls.Load()
	if n < 3 {
		t.Errorf("%d renewals in 60 ms every 5 ms, after the caller's context ended", n)
	}
	time.Sleep(20 * time.Millisecond)
	if calls.Load() != n {
		t.Error("renewals went on after Stop")
	}

	taken := StartKeepAlive(context.Background(), 5*time.Millisecond, time.Hour, func(context.Context) error {
		return fmt.Errorf("another holder: %w", ErrLeaseLost)
	})
	if !closedWithin(taken.Lost(), time.Second) {
		t.Error("a lease another holder took was not lost")
	}
	taken.Stop()

	start := time.Now()
	away := StartKeepAlive(context.Background(), 5*time.Millisecond, 50*time.Millisecond, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("a renewal without a deadline")
		}
		return errors.New("broker away")
	})
	if !closedWithin(away.Lost(), time.Second) {
		t.Fatal("a lease that could not be renewed for its TTL was not lost")
	}
	if since := time.Since(start); since < 50*time.Millisecond {
		t.Errorf("lost after %s of failed renewals, before the TTL of 50ms", since)
	}
	away.Stop()

	patient := StartKeepAlive(context.Background(), 5*time.Millisecond, 0, func(context.Context) error { return errors.New("admin API down") })
	if closedWithin(patient.Lost(), 40*time.Millisecond) {
		t.Error("a watch with no TTL was lost for errors alone")
	}
	patient.Stop()
}
