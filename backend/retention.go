package backend

import (
	"context"
	"time"
)

// SourceRetainer is a source some of whose entries hold no payload of
// their own: it is read back from the log they were consumed from, and
// that log's retention decides how long they can be redriven (a Kafka share
// group's header-only dead letters). SourceRetention says, per log, how
// long it still holds the record of the oldest such entry that the scans
// so far read, soonest first.
type SourceRetainer interface {
	SourceRetention(ctx context.Context, now time.Time) ([]SourceRetention, error)
}

// SourceRetention is how long one log still holds the record of the
// oldest entry that depends on it.
type SourceRetention struct {
	// Source names the log (a topic partition: "orders/0").
	Source string
	// Oldest names the oldest entry's record in it ("orders/0:12").
	Oldest string
	// Limited is false when the log keeps records for ever by time (Left
	// and Until then mean nothing).
	Limited bool
	// Left is how long, at the soonest, until retention may delete the
	// record (0 or less: it may already be due); Until is when.
	Left  time.Duration
	Until time.Time
	// Basis says what the figure is based on, for a person.
	Basis string
}
