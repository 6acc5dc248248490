package cmd

import (
	"io"

	"github.com/dlqctl/dlqctl/report"
)

// emitJSON writes doc to w as the JSON document or NDJSON line when one
// of those formats is in effect, and says whether it did: the one place
// the commands' machine-readable output goes through (--jq hooks in below
// it, at the output stream). The table and markdown forms stay with each
// command.
func emitJSON(w io.Writer, format report.Format, doc any) (bool, error) {
	switch format {
	case report.FormatJSON:
		return true, report.WriteJSON(w, doc)
	case report.FormatNDJSON:
		return true, report.WriteNDJSON(w, doc)
	}
	return false, nil
}
