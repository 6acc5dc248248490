package cmd

import "github.com/dlqctl/dlqctl/report"

// emitJSON writes doc as the JSON document or NDJSON line when one of
// those formats is in effect, and says whether it did: the one place the
// commands' machine-readable output goes through (--jq hooks in below it,
// at the output stream). The table and markdown forms stay with each
// command.
func (f *Factory) emitJSON(doc any) (bool, error) {
	switch f.reportOptions().Format {
	case report.FormatJSON:
		return true, report.WriteJSON(f.IO.Out, doc)
	case report.FormatNDJSON:
		return true, report.WriteNDJSON(f.IO.Out, doc)
	}
	return false, nil
}
