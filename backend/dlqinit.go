package backend

import "context"

// DLQInitFunc creates what holds dead letters where the broker keeps none
// (dlqctl dlq init): for NATS JetStream, a stream that captures the
// server's advisories for one consumer. raw names what to capture. It is
// idempotent: what exists already is reported with Created false. With
// dryRun it only says what it would create.
type DLQInitFunc func(ctx context.Context, raw string, opts OpenOptions, dryRun bool) (DLQInit, error)

// DLQInit is what dlq init made (dlqctl.dlqinit/v1 without its schema,
// backend and dry_run fields).
type DLQInit struct {
	// Source is the source URL that reads the new DLQ (secrets redacted).
	Source string `json:"source"`
	// Stream is what holds the dead letters.
	Stream   string   `json:"stream"`
	Subjects []string `json:"subjects"`
	// Created is false when it existed already (or, in a dry run, would
	// not be created).
	Created bool `json:"created"`
}
