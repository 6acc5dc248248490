package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/redrive"
)

// lockJournal takes the journal's exclusive lock; call the returned
// function when the run is over. runID may be "" when it is not known yet
// (a resume reads it from the journal, after locking it).
func (f *Factory) lockJournal(path, runID string) (func(), error) {
	l, err := redrive.LockJournal(path, redrive.Holder(runID, f.Now()))
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

// leaseDLQ takes the DLQ lease for runID (redrive.LeaseDLQ), notes on
// stderr.
func (f *Factory) leaseDLQ(ctx context.Context, src backend.Source, runID string) (context.Context, func() error, error) {
	lctx, release, err := redrive.LeaseDLQ(ctx, src, redrive.Holder(runID, f.Now()), f.IO.ErrOut)
	if err != nil {
		return nil, nil, busyOr(err)
	}
	return lctx, release, nil
}

// releaseAfter gives the lease back when a run ends and says what failed
// in that after what ended the run (redrive.AfterRelease). Deferred as
// `defer func() { err = f.releaseAfter(err, release) }()`.
func (f *Factory) releaseAfter(runErr error, release func() error) error {
	return redrive.AfterRelease(f.IO.ErrOut, runErr, release())
}

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
