package cmd

import (
	"github.com/dlqctl/dlqctl/backend"
)

// missingReporter is a source that can say its DLQ did not exist when it
// was opened (a Redis stream that is not there, a queue folder opened with
// AllowMissing). Such a source reads as empty. MissingDLQ is "" when the
// DLQ exists, else a phrase naming what does not exist after the source's
// redacted URL ("redis://h:6379/0?stream=dlq: stream "dlq" does not exist").
type missingReporter interface {
	MissingDLQ() string
}

// refuseMissing: a check or stats over a DLQ that does not exist would be
// green forever (a typo in a CI URL hides a full DLQ), so it is a usage
// error naming the DLQ unless --allow-missing says empty is meant.
func refuseMissing(src backend.Source, allow bool) error {
	m, ok := src.(missingReporter)
	if !ok || allow {
		return nil
	}
	what := m.MissingDLQ()
	if what == "" {
		return nil
	}
	return usageErrorf("%s; check the source (--allow-missing reads a missing DLQ as empty on purpose)", what)
}
