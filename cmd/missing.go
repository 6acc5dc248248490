package cmd

import (
	"github.com/dlqctl/dlqctl/backend"
)

// refuseMissing: a check or stats over a DLQ that does not exist would be
// green forever (a typo in a CI URL hides a full DLQ), so it is a usage
// error naming the DLQ unless --allow-missing says empty is meant.
func refuseMissing(src backend.Source, allow bool) error {
	m, ok := src.(backend.MissingReporter)
	if !ok || allow {
		return nil
	}
	what := m.MissingDLQ()
	if what == "" {
		return nil
	}
	return usageErrorf("%s; check the source (--allow-missing reads a missing DLQ as empty on purpose)", what)
}
