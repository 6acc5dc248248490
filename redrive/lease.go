package redrive

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// One run at a time holds a journal (LockJournal), and one run at a time
// holds a DLQ (LeaseDLQ). Both refuse at once with a *backend.BusyError
// naming the holder, before anything is changed.

// LeaseDLQ takes the DLQ lease for h with the backend's own primitive.
// The returned context ends when the lease is lost (it could not be
// renewed and another run may hold it now), with a *backend.BusyError as
// its cause, so that the run stops at the next chunk. release gives the
// lease back and returns what failed in that, for AfterRelease. A backend
// without a lease says so on notes and the run goes on unguarded.
func LeaseDLQ(ctx context.Context, src backend.Source, h backend.LeaseHolder, notes io.Writer) (context.Context, func() error, error) {
	lsr, ok := src.(backend.Leaser)
	if !ok {
		fmt.Fprintf(notes, "dlqctl: note: %s has no DLQ lease: nothing stops another run on this DLQ meanwhile\n", src)
		return ctx, func() error { return nil }, nil
	}
	lease, err := lsr.Lease(ctx, h)
	if err != nil {
		return nil, nil, err
	}
	lctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	go func() {
		select {
		case <-lease.Lost():
			fmt.Fprintf(notes, "dlqctl: the lease on %s was lost; stopping after the step in flight\n", src)
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

// leaseReleaseTimeout bounds giving a lease back at the end of a run.
const leaseReleaseTimeout = 10 * time.Second

// AfterRelease says what failed in giving the lease back (relErr) after
// what ended the run (runErr): the cause (a failed publish, say) before
// its consequence (the lease could not be released on a server that went
// away). After a run that ended well it is only a note on notes.
func AfterRelease(notes io.Writer, runErr, relErr error) error {
	switch {
	case relErr == nil:
		return runErr
	case runErr == nil:
		// The run is done; the lease expires by itself.
		fmt.Fprintf(notes, "dlqctl: note: %v (it expires by itself)\n", relErr)
		return nil
	}
	return fmt.Errorf("%w\nthen: %v (it expires by itself)", runErr, relErr)
}
