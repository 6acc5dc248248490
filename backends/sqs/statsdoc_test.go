package sqsdlq_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	sqsdlq "github.com/dlqctl/dlqctl/backends/sqs"
)

// TestStatsFieldsMatchTheDocs pins the SQS section of stats' JSON
// (sqsdlq.SQSExtras, every optional field set) to its table in
// docs/json.md: a field added, renamed or removed on either side fails.
func TestStatsFieldsMatchTheDocs(t *testing.T) {
	raw, err := os.ReadFile("../../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "## The stats `backend{}` section on SQS")
	if start < 0 {
		t.Fatal("docs/json.md has no section for SQS's stats")
	}
	section := doc[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var documented []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, f := range strings.Split(strings.Split(line, "|")[1], ",") {
			documented = append(documented, strings.TrimSuffix(strings.Trim(strings.TrimSpace(f), "`"), "[]"))
		}
	}
	n := 1
	b, err := json.Marshal(sqsdlq.SQSExtras{OldestExpiresAt: "x", OwnRedrivePolicy: &sqsdlq.RedrivePolicy{}, HighestReceiveCount: &n, ReadsLeft: &n,
		Warnings: []string{"w"}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var fields []string
	for k := range m {
		fields = append(fields, k)
	}
	slices.Sort(documented)
	slices.Sort(fields)
	if !slices.Equal(documented, fields) {
		t.Errorf("docs/json.md documents %v\nsqsdlq.SQSExtras has   %v", documented, fields)
	}
}
