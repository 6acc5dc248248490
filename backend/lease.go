package backend

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrBusy: another run holds the journal or the DLQ (exit 7).
var ErrBusy = errors.New("busy")

// BusyError says what is held and by whom; errors.Is(err, ErrBusy) holds.
type BusyError struct {
	// What is held: "journal /path/run.journal" or "DLQ redis://…?stream=x".
	What string
	// Holder describes the holder: run ID, PID, host and start time as far
	// as the primitive records them.
	Holder string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("%s is held by %s", e.What, e.Holder)
}

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// LeaseHolder identifies the run that takes a lease.
type LeaseHolder struct {
	RunID string
	PID   int
	Host  string
	Since time.Time
}

func (h LeaseHolder) String() string {
	return fmt.Sprintf("run %s (pid %d on %s, since %s)", h.RunID, h.PID, h.Host, h.Since.UTC().Format(time.RFC3339))
}

// Leaser is implemented by backends that can guard a whole DLQ, so that one
// redrive or resolve run at a time holds it (and an import waits for none).
// Each backend uses its own primitive and documents it.
type Leaser interface {
	// Lease takes the DLQ for h.RunID. A lease that the same run ID holds
	// already (left behind by a crash) is taken over, so a resume right
	// after kill -9 works. A lease held by another run fails at once with a
	// *BusyError naming the holder, and changes nothing.
	Lease(ctx context.Context, h LeaseHolder) (Lease, error)
}

// Lease is a held DLQ lease. It keeps itself alive (renewing where the
// primitive expires) until Release.
type Lease interface {
	// Lost is closed when the lease could not be renewed and may now be
	// held by someone else; a run stops moving at the next chunk.
	Lost() <-chan struct{}
	Release(ctx context.Context) error
}

// LeaseChecker is implemented by Leasers that can tell, without taking it,
// whether a run holds the DLQ (import refuses to write while one does).
type LeaseChecker interface {
	// LeaseHolder returns the holder's description, or "" when none holds it.
	LeaseHolder(ctx context.Context) (string, error)
}
