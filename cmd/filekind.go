package cmd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"

	"github.com/dlqctl/dlqctl/redrive"
)

// sniffKind tells a plan file from a journal by its first line: a plan is
// one indented JSON document whose schema is dlqctl.plan/v1 (its first
// lines are "{" and the schema); a journal is one JSON record a line, the
// first a run-start.
func sniffKind(path string) (fileKind, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 4096)
	head, _ := r.Peek(4096)
	line, _, _ := bytes.Cut(head, []byte("\n"))
	var rec struct {
		Type   string `json:"type"`
		Schema string `json:"schema"`
	}
	if json.Unmarshal(line, &rec) == nil {
		switch {
		case rec.Type == redrive.RecRunStart:
			return kindJournal, true
		case rec.Schema == redrive.PlanSchema:
			return kindPlan, true
		}
		return 0, false
	}
	if bytes.Equal(bytes.TrimSpace(line), []byte("{")) && bytes.Contains(head, []byte(`"schema": "`+redrive.PlanSchema+`"`)) {
		return kindPlan, true
	}
	return 0, false
}

// wantPlan says in plain words when a journal was given where a plan is
// expected, before the plan parser says something less helpful.
func wantPlan(path, kind string) error {
	if k, ok := sniffKind(path); ok && k == kindJournal {
		return usageErrorf("%s is a journal (the record of a run), not a plan: give the plan file, or use dlqctl %s status/resume %s", path, kind, path)
	}
	return nil
}

// wantJournal is the reverse of wantPlan.
func wantJournal(path, kind string) error {
	if k, ok := sniffKind(path); ok && k == kindPlan {
		return usageErrorf("%s is a plan, not a journal: use dlqctl %s show/approve/apply %s; its journal is %s once it runs",
			path, kind, path, redrive.DefaultJournalPath(path))
	}
	return nil
}
