package backend

import (
	"context"
	"time"
)

// PublishedChecker is implemented by backends that can look up on the
// destination what a redrive run put there, by the run's markers
// (MarkerRunID and MarkerSeq). A resume asks it before it believes the
// journal: an entry the journal says was published is removed from the DLQ
// only when the destination does not say otherwise, and an entry that left
// the DLQ without a trace on the destination is not counted as moved.
type PublishedChecker interface {
	// CheckPublished answers, per query and in order, whether the
	// destination holds the query's entry as run m put it there.
	CheckPublished(ctx context.Context, queries []PublishedQuery, m Markers) ([]Presence, error)
}

// PublishedQuery is one entry to look for.
type PublishedQuery struct {
	Item MoveItem
	// DestID is the destination's message ID the journal recorded, "" when
	// the journal has none (the run stopped before it was confirmed).
	DestID string
	// Since: the run cannot have put the entry there before this time.
	Since time.Time
}

// Presence is what the destination says about one entry.
type Presence int

const (
	// PresenceUnknown: the destination cannot tell (a consumer took the
	// file, the stream was trimmed past the time looked for).
	PresenceUnknown Presence = iota
	// PresenceFound: the destination holds the entry with this run's markers.
	PresenceFound
	// PresenceAbsent: the destination has kept everything since Since, and
	// the entry is not there.
	PresenceAbsent
)
