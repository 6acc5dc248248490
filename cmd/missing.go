package cmd

import (
	"strings"

	"github.com/dlqctl/dlqctl/backend"
)

// missingReporter is a source that can say its DLQ did not exist when it
// was opened (a Redis stream that is not there, a queue folder opened with
// AllowMissing). Such a source reads as empty.
type missingReporter interface {
	Missing() bool
}

// refuseMissing: a check or stats over a DLQ that does not exist would be
// green forever (a typo in a CI URL hides a full DLQ), so it is a usage
// error naming the DLQ unless --allow-missing says empty is meant.
func refuseMissing(src backend.Source, allow bool) error {
	m, ok := src.(missingReporter)
	if !ok || !m.Missing() || allow {
		return nil
	}
	what := src.String() + ": the DLQ does not exist"
	if n, ok := src.(backend.Noticer); ok && n.Notice() != "" {
		what = trimNotice(n.Notice())
	}
	return usageErrorf("%s; check the source (--allow-missing reads a missing DLQ as empty on purpose)", what)
}

// trimNotice keeps what a notice names, without what follows it: each
// backend words it "… does not exist…: it reads as empty" or "…: reading
// it as an empty DLQ", and the name itself may hold ": " (a URL's port).
func trimNotice(s string) string {
	for _, advice := range []string{": it reads as empty", ": reading it as"} {
		if i := strings.Index(s, advice); i >= 0 {
			return s[:i]
		}
	}
	return s
}
