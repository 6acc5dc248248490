package dirqueue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/internal/filelock"
)

var (
	_ backend.Leaser       = (*Queue)(nil)
	_ backend.LeaseChecker = (*Queue)(nil)
)

// leaseFile is the queue's lease: an flock(2) on PATH/.dlqctl-lease, which
// names the holding run. It sits beside error/ and inbox/, not in them, so
// no scan ever lists it. The kernel drops the flock when the holder dies,
// so after kill -9 the next run (the resume of the same run first of all)
// takes it at once; nothing has to expire.
const leaseFile = ".dlqctl-lease"

type dirLease struct {
	f    *os.File
	lost chan struct{}
}

// Lost is never closed: a held flock cannot be taken away.
func (l *dirLease) Lost() <-chan struct{} { return l.lost }

func (l *dirLease) Release(ctx context.Context) error {
	if l.f == nil {
		return nil
	}
	// Emptied first, so that a reader of a free lease file never sees a
	// holder that left.
	_ = l.f.Truncate(0)
	err := l.f.Close()
	l.f = nil
	return err
}

// Lease takes the queue for h's run, or fails at once with a
// *backend.BusyError naming the run that holds it.
func (q *Queue) Lease(ctx context.Context, h backend.LeaseHolder) (backend.Lease, error) {
	path := filepath.Join(q.root, leaseFile)
	f, err := filelock.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: lease: %w", q, err)
	}
	if err := filelock.TryLock(f); err != nil {
		defer f.Close()
		if errors.Is(err, filelock.ErrLocked) {
			return nil, &backend.BusyError{What: "DLQ " + q.String(), Holder: filelock.ReadHolder(f)}
		}
		return nil, fmt.Errorf("%s: lease: %w", q, err)
	}
	if err := filelock.WriteHolder(f, h); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: lease: %w", q, err)
	}
	return &dirLease{f: f, lost: make(chan struct{})}, nil
}

// LeaseHolder says which run holds the queue, "" when none does. It tries
// the lock for an instant and lets it go again.
func (q *Queue) LeaseHolder(ctx context.Context) (string, error) {
	path := filepath.Join(q.root, leaseFile)
	// Opened as Lease opens it: never through a symlink planted there.
	f, err := filelock.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: lease: %w", q, err)
	}
	defer f.Close()
	switch err := filelock.TryLock(f); {
	case errors.Is(err, filelock.ErrLocked):
		return filelock.ReadHolder(f), nil
	case err != nil:
		return "", fmt.Errorf("%s: lease: %w", q, err)
	}
	return "", nil
}
