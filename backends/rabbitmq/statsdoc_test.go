package rabbitmq_test

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backends/rabbitmq"
)

// TestStatsFieldsMatchTheDocs pins the RabbitMQ section of stats' JSON
// (rabbitmq.Stats) to its table in docs/json.md: a field added, renamed or
// removed on either side fails.
func TestStatsFieldsMatchTheDocs(t *testing.T) {
	raw, err := os.ReadFile("../../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "## The stats `backend{}` section on RabbitMQ")
	if start < 0 {
		t.Fatal("docs/json.md has no section for RabbitMQ's stats")
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
		cell := strings.Split(line, "|")[1]
		for _, f := range strings.Split(cell, ",") {
			f = strings.Trim(strings.TrimSpace(f), "`")
			documented = append(documented, strings.TrimSuffix(f, "{}"))
		}
	}
	var fields []string
	typ := reflect.TypeOf(rabbitmq.Stats{})
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	slices.Sort(documented)
	slices.Sort(fields)
	if !slices.Equal(documented, fields) {
		t.Errorf("docs/json.md documents %v\nrabbitmq.Stats has     %v", documented, fields)
	}
}
