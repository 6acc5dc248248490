// Package effects reads what a consumer recorded per event ID — delivery
// attempts, business effects and the fingerprint it processed — so that a
// redrive can reconcile every batch (the reconciliation contract, docs/consumer-contract.md). Every probe answers a whole
// batch in one round trip.
package effects

import "context"

// Record is what the consumer recorded for one event ID.
type Record struct {
	EventID     string `json:"event_id"`
	Attempts    int64  `json:"attempts"`
	Effects     int64  `json:"effects"`
	Fingerprint string `json:"fingerprint"`
	Status      string `json:"status,omitempty"`
}

// Probe reads records for a batch of event IDs.
type Probe interface {
	// Records returns the records of the event IDs the consumer knows; an
	// event it has not seen is absent from the map. One round trip.
	Records(ctx context.Context, eventIDs []string) (map[string]Record, error)
	// String names the probe with any password replaced by xxxxx.
	String() string
	Close() error
}
