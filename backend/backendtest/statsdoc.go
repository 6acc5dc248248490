package backendtest

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// StatsDocMatches pins a backend's section of stats' JSON to its table in
// docs/json.md ("## The stats `backend{}` section on TITLE"): the fields
// the table names (`a`, `b{}`, `c[]` in its first column) must be the JSON
// fields of stats, a value of the struct the backend reports, optional
// (omitempty) ones included. A field added, renamed or removed on either
// side fails. jsonMD is the path of docs/json.md from the test's package.
func StatsDocMatches(t *testing.T, jsonMD, title string, stats any) {
	t.Helper()
	raw, err := os.ReadFile(jsonMD)
	if err != nil {
		t.Fatal(err)
	}
	documented, ok := statsDocFields(string(raw), title)
	if !ok {
		t.Fatalf("%s has no section for %s's stats", jsonMD, title)
	}
	fields := jsonFields(reflect.TypeOf(stats))
	slices.Sort(documented)
	slices.Sort(fields)
	if !slices.Equal(documented, fields) {
		t.Errorf("%s documents %v\n%T has %v", jsonMD, documented, stats, fields)
	}
}

// statsDocFields are the fields the table of title's stats section in
// doc names; false when doc has no such section.
func statsDocFields(doc, title string) ([]string, bool) {
	start := strings.Index(doc, "## The stats `backend{}` section on "+title+"\n")
	if start < 0 {
		return nil, false
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
			f = strings.Trim(strings.TrimSpace(f), "`")
			documented = append(documented, strings.TrimSuffix(strings.TrimSuffix(f, "{}"), "[]"))
		}
	}
	return documented, true
}

// jsonFields are the names encoding/json gives a struct's fields, those
// of an embedded struct without a name of its own inlined.
func jsonFields(typ reflect.Type) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			out = append(out, jsonFields(f.Type)...)
		case name == "":
			out = append(out, f.Name)
		default:
			out = append(out, name)
		}
	}
	return out
}
