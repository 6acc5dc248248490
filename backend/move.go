package backend

import (
	"context"
	"errors"
)

// MoveItem is one DLQ entry to move, as the plan recorded it.
type MoveItem struct {
	// Seq is the entry's 1-based index in the plan. Pulsar uses it as the
	// sequence ID, so the broker can drop a resend after an unknown outcome.
	Seq         int64
	ID          string
	EventID     string
	Fingerprint string
	// Dest is the destination topic or stream (or, dir, folder).
	Dest string
}

// Markers identify the redrive run on every event it puts back. The event
// ID, payload, fingerprint, key and properties never change; redrive_count
// goes up by one, and these fields (properties) are added.
type Markers struct {
	RunID string
	// ProducerName is the fixed producer name of the run (Pulsar).
	ProducerName string
}

// Marker field/property names written on redriven events.
const (
	MarkerRunID        = "dlqctl_run_id"
	MarkerSeq          = "dlqctl_seq"
	MarkerRedrivenFrom = "dlqctl_redriven_from"
)

// MoveResult is the outcome of one item.
type MoveResult struct {
	// DestID is the destination's message ID (stream entry ID, Pulsar
	// message ID, inbox file name).
	DestID string
	// Removed: the DLQ entry was removed in the same atomic step.
	Removed bool
	// Err is this item's own failure: ErrNotFound (the entry had left the
	// DLQ; nothing was published), ErrSameMessage (another entry moved its
	// message; the entry was removed and is done, nothing was published), ErrChanged
	// (its fingerprint is no longer the planned one; nothing was
	// published), or another per-item error.
	Err error
}

// ErrChanged: the DLQ entry's fingerprint differs from the plan's.
var ErrChanged = errors.New("fingerprint changed since the plan was made")

// ErrSameMessage: the DLQ entry points at a message that another entry
// moved (two NATS advisories about one stream message): the backend removed
// the entry and published nothing, and the entry is done. Errors that wrap
// it say which entry moved the message, and also wrap ErrNotFound.
var ErrSameMessage = errors.New("points at a message another entry moved")

// Mover puts DLQ entries back on their destination (redrive) and removes
// them (resolve, and the second step of non-atomic moves).
type Mover interface {
	// Atomic reports whether Publish also removes the DLQ entry in the same
	// atomic step, conditional on it still being there (Redis, dir). Then an
	// entry that is no longer in the DLQ has certainly been moved or taken.
	Atomic() bool
	// DefaultDest is where an entry goes when the plan has no --to: its
	// origin topic or stream (dir: the inbox folder). "" when it names none.
	DefaultDest(origin string) string
	// Publish sends each item's DLQ entry to item.Dest with the markers and
	// returns one result per item, in order. An error from Publish itself
	// (connection lost, timeout) means the outcome of every item is unknown.
	Publish(ctx context.Context, items []MoveItem, m Markers) ([]MoveResult, error)
	// Remove deletes each item's DLQ entry if it is still there (else that
	// item's Err wraps ErrNotFound). Results as for Publish.
	Remove(ctx context.Context, items []MoveItem) ([]MoveResult, error)
}

// ChunkSizer is implemented by movers that take more than the default
// number of moves per call (256) when the rate is unlimited: a redrive
// journals a chunk's intents in one sync before sending it, so a chunk is
// a round trip and a sync, and a mover whose calls cost little per entry
// moves faster in fewer, larger ones. Under a rate limit the chunk is
// the limiter's burst whatever this says.
type ChunkSizer interface {
	UnlimitedChunk() int
}

// Tailer gives the locator of the newest DLQ entry: entries dead-lettered
// later are found with Scan(ctx, tail, …). A redrive uses it to see which
// events of a batch came back to the DLQ.
type Tailer interface {
	Tail(ctx context.Context) (string, error)
}

// LenTailer reads the DLQ's length and its tail (Tailer) in one round trip:
// a redrive reads both between two batches.
type LenTailer interface {
	LenTail(ctx context.Context) (n int64, tail string, err error)
}

// FingerprintScanner is implemented by backends that can list each entry's
// locator and fingerprint more cheaply than a full Scan decodes it; a plan's
// staleness check at apply needs nothing more.
type FingerprintScanner interface {
	ScanFingerprints(ctx context.Context, fn func(id, fingerprint string) error) error
}
