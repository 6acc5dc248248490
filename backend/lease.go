package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	// BootID and PIDNamespace say where PID names a process: the kernel
	// boot and the PID namespace the holder ran in (processSpace). A host
	// name alone does not: pods with hostNetwork and containers started
	// with --uts=host share it, but not their PIDs. Empty where the OS
	// gives neither, and in leases written before they were recorded.
	BootID       string
	PIDNamespace string
	Since        time.Time
}

// ThisProcess is the holder of a lease or lock that this process takes
// for runID (which may be "" while not known yet), since since.
func ThisProcess(runID string, since time.Time) LeaseHolder {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	boot, pidns := processSpace()
	return LeaseHolder{RunID: runID, PID: os.Getpid(), Host: host, BootID: boot, PIDNamespace: pidns, Since: since}
}

// SamePIDSpace says whether the PID that a lease records (held) names a
// process that me can look for with ProcessAlive: same host name, same
// boot and same PID namespace. A lease from another namespace or boot is
// then judged as one from another host (by its expiry),
// never by a PID that means another process here, or none. A lease that
// records neither boot nor namespace (written by an older dlqctl, or on
// an OS that gives none) is judged by its host name alone, as before.
func SamePIDSpace(held, me LeaseHolder) bool {
	if held.Host != me.Host {
		return false
	}
	if held.BootID == "" && held.PIDNamespace == "" {
		return true
	}
	return held.BootID == me.BootID && held.PIDNamespace == me.PIDNamespace
}

// HolderGone says whether the process behind a lease that held's run ID
// left (its own run's, being resumed by me) has provably ended, so that
// me may take the lease over before it expires: it is me, or it is in
// my PID space (SamePIDSpace) and its PID is dead. A holder elsewhere
// cannot be looked for and is waited out, so that two live resumes of
// copies of one journal are refused wherever they run.
func HolderGone(held, me LeaseHolder) bool {
	if !SamePIDSpace(held, me) {
		return false
	}
	if held.PID == me.PID || held.PID <= 0 {
		return true
	}
	return !ProcessAlive(held.PID)
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
