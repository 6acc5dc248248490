package backendtest

import (
	"reflect"
	"slices"
	"testing"
)

// The stats pin reads only its own section's table, and names a struct's
// JSON fields as encoding/json does: omitempty ones too, an embedded
// struct's inlined, "-" and unexported ones left out.
func TestStatsDocFields(t *testing.T) {
	doc := "# JSON\n\n## The stats `backend{}` section on A\n\n| field | type |\n|---|---|\n| `queue`, `url` | string |\n| `args{}` | object |\n| `sources[]` | array |\n\n" +
		"## The stats `backend{}` section on AB\n\n| `other` | string |\n"
	got, ok := statsDocFields(doc, "A")
	if want := []string{"queue", "url", "args", "sources"}; !ok || !slices.Equal(got, want) {
		t.Errorf("statsDocFields(A) = %v, %v; want %v", got, ok, want)
	}
	if _, ok := statsDocFields(doc, "C"); ok {
		t.Error("a section for C found in a doc without one")
	}
	type counts struct {
		Visible int `json:"visible"`
	}
	type stats struct {
		Queue string `json:"queue"`
		counts
		Args    map[string]any `json:"args,omitempty"`
		Skipped string         `json:"-"`
		hidden  int
	}
	_ = stats{}.hidden
	if got, want := jsonFields(reflect.TypeOf(stats{})), []string{"queue", "visible", "args"}; !slices.Equal(got, want) {
		t.Errorf("jsonFields = %v, want %v", got, want)
	}
}
