package backend

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// GroupInspector is implemented by backends whose origins are read through
// consumer groups with a pending-entries list (Redis Streams): dlqctl
// pending.
type GroupInspector interface {
	Pending(ctx context.Context, stream, group string, minIdle time.Duration, limit int) (PendingReport, error)
}

// Quarantiner is implemented by backends that can move a group's stuck
// pending entries into the DLQ (dlqctl quarantine).
type Quarantiner interface {
	Quarantine(ctx context.Context, opts QuarantineOptions) (QuarantineReport, error)
}

// MoveNoter is implemented by backends where moves to some destinations
// are weaker than usual (Redis Cluster across hash slots); MoveNote says
// so for dest, or returns "".
type MoveNoter interface {
	MoveNote(dest string) string
}

// Histogram counts pending entries by delivery count, in the buckets "1",
// "2", "3-5", "6-10" and "11+". Every bucket is present. An entry with a
// delivery count of 0 (claimed with RETRYCOUNT 0) counts under "1".
type Histogram map[string]int64

// PendingReport is one consumer group's pending entries (dlqctl.pending/v1
// without its schema field).
type PendingReport struct {
	Stream            string            `json:"stream"`
	Group             string            `json:"group"`
	Pending           int64             `json:"pending"`
	OldestIdleSeconds int64             `json:"oldest_idle_seconds"`
	Lag               *int64            `json:"lag,omitempty"`          // absent before Redis 7 or when Redis cannot tell
	EntriesRead       *int64            `json:"entries_read,omitempty"` // likewise
	LastDeliveredID   string            `json:"last_delivered_id"`
	Consumers         []ConsumerPending `json:"consumers"`
	DeliveryHistogram Histogram         `json:"delivery_histogram"`
	MinIdleSeconds    int64             `json:"min_idle_seconds"`
	OverMinIdle       []PendingEntry    `json:"over_min_idle"`
	// Sampled: only the first entries of the pending list (by id, up to
	// the limit) were read, so oldest_idle_seconds, delivery_histogram
	// and over_min_idle cover those only.
	Sampled bool `json:"sampled"`
}

// ConsumerPending is one consumer of a group.
type ConsumerPending struct {
	Name        string `json:"name"`
	Pending     int64  `json:"pending"`
	IdleSeconds int64  `json:"idle_seconds"`
}

// PendingEntry is one entry of a group's pending entries list.
type PendingEntry struct {
	ID          string `json:"id"`
	Consumer    string `json:"consumer"`
	IdleSeconds int64  `json:"idle_seconds"`
	Deliveries  int64  `json:"deliveries"`
}

// QuarantineOptions say which pending entries of a group go to the DLQ.
type QuarantineOptions struct {
	Stream, Group string
	// MinIdle and MinDeliveries: an entry moves when it has been idle for
	// at least MinIdle and delivered at least MinDeliveries times.
	MinIdle       time.Duration
	MinDeliveries int64
	// Reason and Category become the envelope's last_error and error_class.
	Reason, Category string
	DryRun           bool
	// Limit bounds how many entries are taken (0: no bound).
	Limit int
	// Now is written as dead_lettered_at (zero: the clock).
	Now time.Time
}

// QuarantineReport is what Quarantine did (dlqctl.quarantine/v1 without its
// schema field, which the caller adds).
type QuarantineReport struct {
	Stream         string `json:"stream"`
	Group          string `json:"group"`
	DLQ            string `json:"dlq"`
	MinIdleSeconds int64  `json:"min_idle_seconds"`
	MinDeliveries  int64  `json:"min_deliveries"`
	DryRun         bool   `json:"dry_run"`
	// Moved are the entries added to the DLQ and acked in the group.
	Moved []QuarantinedEntry `json:"moved"`
	// WouldMove are the entries a run without --dry-run would take
	// (dry run only; empty otherwise).
	WouldMove []PendingEntry `json:"would_move"`
	// Skipped entries qualified when the pending list was read but no
	// longer did when their turn came: acked, claimed afresh or delivered
	// again by a consumer meanwhile.
	Skipped int `json:"skipped"`
	// AckedDeleted entries were still pending but deleted from the stream:
	// there was nothing to move, so they were only acked.
	AckedDeleted int `json:"acked_deleted"`
	// Limited: the limit was reached before the end of the pending list.
	Limited bool `json:"limited"`
}

// QuarantinedEntry is one entry moved to the DLQ. Consumer, deliveries and
// idle time are as the script found them when it moved the entry.
type QuarantinedEntry struct {
	ID          string `json:"id"`
	DLQID       string `json:"dlq_id"`
	Consumer    string `json:"consumer"`
	Deliveries  int64  `json:"deliveries"`
	IdleSeconds int64  `json:"idle_seconds"`
}

// HistogramBuckets are Histogram's keys, in order.
func HistogramBuckets() []string { return []string{"1", "2", "3-5", "6-10", "11+"} }

// NewHistogram returns a Histogram with every bucket at 0.
func NewHistogram() Histogram {
	h := Histogram{}
	for _, b := range HistogramBuckets() {
		h[b] = 0
	}
	return h
}

// Add counts one entry delivered deliveries times.
func (h Histogram) Add(deliveries int64) {
	switch {
	case deliveries <= 1:
		h["1"]++
	case deliveries == 2:
		h["2"]++
	case deliveries <= 5:
		h["3-5"]++
	case deliveries <= 10:
		h["6-10"]++
	default:
		h["11+"]++
	}
}

// String is the histogram in bucket order: "1:4 2:1 3-5:0 6-10:0 11+:2".
func (h Histogram) String() string {
	buckets := HistogramBuckets()
	parts := make([]string, len(buckets))
	for i, b := range buckets {
		parts[i] = fmt.Sprintf("%s:%d", b, h[b])
	}
	return strings.Join(parts, " ")
}

// OriginChecker is implemented by backends that can tell whether a
// redrive's destination exists and is read (dlqctl doctor).
type OriginChecker interface {
	// CheckOrigin reports on one origin topic, stream or queue; groups are
	// the consumer groups or subscriptions the DLQ's envelopes name for it.
	CheckOrigin(ctx context.Context, origin string, groups []string) OriginStatus
}

// OriginStatus is one origin's doctor line: whether it passed, what was
// found, and the fix when it did not.
type OriginStatus struct {
	OK          bool
	Detail, Fix string
}
