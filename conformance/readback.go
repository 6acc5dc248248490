// Package conformance runs a backend, on its real server, through the
// cases every backend must pass (suite.go lists them; each backend's own
// conformance_test.go calls Run): reading back,
// redrive with the reference consumer, stale plans, resolve, the crash
// matrix, a server restart mid-apply, and the battery of the broker's own
// behaviour (battery.go). A backend that lacks a capability declares it
// in its registration, and the suite checks the refusal.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/internal/testproc"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// dlqctl runs one command line in-process, with the suite's backends,
// and returns stdout.
func (tg *Target) dlqctl(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	io, in, out, errOut := cmd.TestIO()
	in.Write(stdin)
	f := &cmd.Factory{Deps: cmd.Deps{Backends: tg.backends, IO: io, Now: func() time.Time { return now }, Getenv: func(string) string { return "" }}}
	if code := cmd.Execute(context.Background(), f, args); code != 0 {
		t.Fatalf("dlqctl %v: exit %d\n%s", args, code, errOut)
	}
	return out.Bytes()
}

// caseReadBack: the sample incident, exported from the directory queue
// and imported into a fresh DLQ, reads back with the same stats,
// categories and list.
func caseReadBack(t *testing.T, tg *Target) {
	incident, err := testproc.FindScript("testdata/incident")
	if err != nil {
		t.Fatal(err)
	}
	export := tg.dlqctl(t, nil, "--source", "dir:"+incident, "export")
	if n := bytes.Count(export, []byte("\n")); n != 284 {
		t.Fatalf("export wrote %d lines, want 284", n)
	}
	want := tg.readAll(t, "dir:"+incident)
	if n := len(want["list"].([]map[string]any)); n != 284 {
		t.Fatalf("the incident lists %d entries, want 284", n)
	}
	fx := tg.Fresh(t)
	tg.dlqctl(t, export, append([]string{"--source", fx.Source, "import"}, fx.ImportFlags...)...)
	got := tg.readAll(t, fx.Source)
	if tg.Unordered {
		sortList(got)
		sortList(want)
	}
	for _, doc := range []string{"stats", "categorize", "list"} {
		if !reflect.DeepEqual(got[doc], want[doc]) {
			g, _ := json.MarshalIndent(got[doc], "", " ")
			w, _ := json.MarshalIndent(want[doc], "", " ")
			t.Errorf("%s differs on %s:\n got: %s\nwant: %s", doc, tg.name, clip(g), clip(w))
		}
	}
}

// sortList orders a read-back's list by content, for a backend that keeps
// no order among entries written within one millisecond.
func sortList(docs map[string]any) {
	items := docs["list"].([]map[string]any)
	key := func(m map[string]any) string { b, _ := json.Marshal(m); return string(b) }
	slices.SortFunc(items, func(a, b map[string]any) int { return strings.Compare(key(a), key(b)) })
}

func clip(b []byte) string {
	if len(b) > 4000 {
		return string(b[:4000]) + "…"
	}
	return string(b)
}

// readAll runs stats, categorize and list and keeps what must not depend
// on the backend: locators and backend-specific sections are dropped, and
// a malformed entry is compared by its place and category only, since each
// backend words its reason in its own terms.
func (tg *Target) readAll(t *testing.T, src string) map[string]any {
	docs := map[string]any{}
	var stats map[string]any
	mustJSON(t, tg.dlqctl(t, nil, "--source", src, "stats", "-o", "json"), &stats)
	delete(stats, "source")
	delete(stats, "backend")
	docs["stats"] = stats

	var cats struct {
		Categories []map[string]any `json:"categories"`
	}
	mustJSON(t, tg.dlqctl(t, nil, "--source", src, "categorize", "-o", "json"), &cats)
	for _, c := range cats.Categories {
		delete(c, "sample_ids")
		if c["name"] == "malformed" {
			delete(c, "example_error")
		}
	}
	docs["categorize"] = cats.Categories

	var list struct {
		Items []map[string]any `json:"items"`
	}
	mustJSON(t, tg.dlqctl(t, nil, "--source", src, "list", "--limit", "0", "-o", "json"), &list)
	for i, it := range list.Items {
		if it["category"] == "malformed" {
			list.Items[i] = map[string]any{"category": "malformed"}
			continue
		}
		delete(it, "id")
		if o, ok := it["origin"].(map[string]any); ok {
			delete(o, "backend")
		}
	}
	docs["list"] = list.Items
	return docs
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %s", err, clip(b))
	}
}
