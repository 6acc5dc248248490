package backend

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrLeaseLost: a renewal found that the lease is no longer this holder's
// (another run took it, or it expired while the holder could not renew).
var ErrLeaseLost = errors.New("lease lost")

// KeepAlive renews a held DLQ lease in the background until Stop, and
// closes Lost when it can no longer be sure the lease is its own. Every
// backend whose lease expires unless renewed (a key, a record, a tag)
// keeps it with one; a lease the broker frees only when its holder dies
// needs no renewal, only a watch, which is a renewal that never fails.
type KeepAlive struct {
	lost     chan struct{}
	lostOnce sync.Once
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// StartKeepAlive calls renew every `every` until Stop. renew answers nil
// when the lease still holds (renewed or checked), an error wrapping
// ErrLeaseLost when it no longer does — Lost closes at once and the
// renewals end — and any other error when it could not tell (the broker
// away): Lost then closes once no renewal has succeeded for `within`, when
// the lease may have expired; 0 leaves that to renew. Each call's context
// ends after `every`, so that a renewal that hangs is given up in time to
// try again. The renewals outlive ctx's cancellation (a Ctrl-C of the
// command still finishes the chunk in flight under the lease, and Release
// ends them), not its values.
func StartKeepAlive(ctx context.Context, every, within time.Duration, renew func(context.Context) error) *KeepAlive {
	k := &KeepAlive{lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	rctx := context.WithoutCancel(ctx)
	go func() {
		defer close(k.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		last := time.Now() // this host's monotonic clock: elapsed time only
		for {
			select {
			case <-k.stop:
				return
			case <-tick.C:
			}
			cctx, cancel := context.WithTimeout(rctx, every)
			err := renew(cctx)
			cancel()
			switch {
			case err == nil:
				last = time.Now()
			case errors.Is(err, ErrLeaseLost), within > 0 && time.Since(last) >= within:
				k.lostOnce.Do(func() { close(k.lost) })
				return
			}
		}
	}()
	return k
}

// Lost is closed when the lease may now be held by someone else.
func (k *KeepAlive) Lost() <-chan struct{} { return k.lost }

// Stop ends the renewals and waits for one in flight to return, so that a
// Release after it cannot race a renewal. Safe to call more than once.
func (k *KeepAlive) Stop() {
	k.stopOnce.Do(func() { close(k.stop) })
	<-k.done
}
