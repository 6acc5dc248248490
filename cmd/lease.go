package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/redrive"
)

// One run at a time holds a journal, and one run at a time holds a DLQ.
// These are the two guards a moving command takes; both refuse at once
// (exit 7) naming the holder, before anything is changed.

// holder describes this process as the holder of a lock or lease.
func (f *Factory) holder(runID string) backend.LeaseHolder {
	return backend.ThisProcess(runID, f.Now().UTC())
}

// lockJournal takes the journal's exclusive lock; call the returned
// function when the run is over. runID may be "" when it is not known yet
// (a resume reads it from the journal, after locking it).
func (f *Factory) lockJournal(path, runID string) (func(), error) {
	l, err := redrive.LockJournal(path, f.holder(runID))
	if err != nil {
		return nil, busyOr(err)
	}
	return func() { _ = l.Unlock() }, nil
}

// lockExistingJournal is lockJournal for a resume: a journal that is not
// there is left for the journal reader to report (with its usage error),
// rather than leaving a stray lock file behind.
func (f *Factory) lockExistingJournal(path string) (func(), error) {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return func() {}, nil
	}
	return f.lockJournal(path, "")
}

// leaseDLQ takes the DLQ lease for runID with the backend's own primitive.
// The returned context ends when the lease is lost (it could not be
// renewed and another run may hold it now), so that the run stops at the
// next chunk. release returns what failed in giving the lease back, for
// releaseAfter. A backend without a lease says so on stderr and the run
// goes on unguarded.
func (f *Factory) leaseDLQ(ctx context.Context, src backend.Source, runID string) (context.Context, func() error, error) {
	lsr, ok := src.(backend.Leaser)
	if !ok {
		fmt.Fprintf(f.IO.ErrOut, "dlqctl: note: %s has no DLQ lease: nothing stops another run on this DLQ meanwhile\n", src)
		return ctx, func() error { return nil }, nil
	}
	lease, err := lsr.Lease(ctx, f.holder(runID))
	if err != nil {
		return nil, nil, busyOr(err)
	}
	lctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	go func() {
		select {
		case <-lease.Lost():
			fmt.Fprintf(f.IO.ErrOut, "dlqctl: the lease on %s was lost; stopping after the step in flight\n", src)
			cancel(&backend.BusyError{What: "DLQ " + src.String(), Holder: "nobody this run can vouch for (lease lost)"})
		case <-stop:
		}
	}()
	release := func() error {
		close(stop)
		cancel(nil)
		// Bounded: with the server down, releasing could wait forever, and
		// a lease left behind expires by itself (or is taken over by this
		// run's resume).
		rctx, cancelRelease := context.WithTimeout(context.WithoutCancel(ctx), leaseReleaseTimeout)
		defer cancelRelease()
		return lease.Release(rctx)
	}
	return lctx, release, nil
}

// releaseAfter gives the lease back when a run ends and says what failed
// in that after what ended the run: the cause (a failed publish, say)
// before its consequence (the lease could not be released on a server
// that went away). Deferred as `defer func() { err = f.releaseAfter(err, release) }()`.
func (f *Factory) releaseAfter(runErr error, release func() error) error {
	relErr := release()
	switch {
	case relErr == nil:
		return runErr
	case runErr == nil:
		// The run is done; the lease expires by itself.
		fmt.Fprintf(f.IO.ErrOut, "dlqctl: note: %v (it expires by itself)\n", relErr)
		return nil
	}
	return fmt.Errorf("%w\nthen: %v (it expires by itself)", runErr, relErr)
}

// leaseReleaseTimeout bounds giving a lease back at the end of a run.
const leaseReleaseTimeout = 10 * time.Second

// refuseWhileLeased is import's guard: it writes into the DLQ, and a run
// that holds the DLQ may already have moved the entries being brought
// back.
func (f *Factory) refuseWhileLeased(ctx context.Context, src backend.Source) error {
	lc, ok := src.(backend.LeaseChecker)
	if !ok {
		return nil
	}
	h, err := lc.LeaseHolder(ctx)
	if err != nil {
		return err
	}
	if h != "" {
		return busyOr(&backend.BusyError{What: "DLQ " + src.String(), Holder: h})
	}
	return nil
}

// busyOr gives a busy refusal its exit code and the advice that goes with
// it; other errors pass through.
func busyOr(err error) error {
	var be *backend.BusyError
	if errors.As(err, &be) {
		return withCode(ExitBusy, fmt.Errorf("%w; nothing was changed. Wait for it to end (or, if it is gone, retry once its lease has expired)", err))
	}
	return err
}
