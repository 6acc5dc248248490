package sqsdlq_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/internal/sqstest"
)

// TestIncidentReadsTheSameOnSQS is the conformance suite's case
// (conformance/) run here, against this package's one ElasticMQ server:
// the sample incident, exported from the directory queue and imported
// into a fresh SQS DLQ, reads back with the same stats, categories and
// list. SQS keeps no order among messages sent within the same
// millisecond, so the lists are compared as sets of entries.
func TestIncidentReadsTheSameOnSQS(t *testing.T) {
	for _, kv := range sqstest.Env() {
		k, v, _ := cutEnv(kv)
		t.Setenv(k, v)
	}
	incident, err := filepath.Abs("../testdata/incident")
	if err != nil {
		t.Fatal(err)
	}
	export := dlqctlIn(t, nil, "--source", "dir:"+incident, "export")
	if n := bytes.Count(export, []byte("\n")); n != 284 {
		t.Fatalf("export wrote %d lines, want 284", n)
	}
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	src := p.sourceURL("receivers=8")
	dlqctlIn(t, export, "--source", src, "import")
	want := readDocs(t, "dir:"+incident)
	got := readDocs(t, src)
	if n := len(got["list"].([]string)); n != 284 {
		t.Fatalf("SQS lists %d entries, want 284", n)
	}
	for _, doc := range []string{"stats", "categorize", "list"} {
		if !reflect.DeepEqual(got[doc], want[doc]) {
			g, _ := json.MarshalIndent(got[doc], "", " ")
			w, _ := json.MarshalIndent(want[doc], "", " ")
			t.Errorf("%s differs:\n got: %.4000s\nwant: %.4000s", doc, g, w)
		}
	}
	if v, f := counts(t, ctx, p.dlq); v != 284 || f != 0 {
		t.Fatalf("after the reads %d visible, %d in flight; want all 284 visible", v, f)
	}
}

func cutEnv(kv string) (string, string, bool) {
	for i := range len(kv) {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// dlqctlIn runs one command line in-process and returns stdout.
func dlqctlIn(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	io, in, out, errOut := cmd.TestIO()
	in.Write(stdin)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f := &cmd.Factory{IO: io, Now: func() time.Time { return now }, Getenv: func(string) string { return "" }}
	if code := cmd.Execute(context.Background(), f, args); code != 0 {
		t.Fatalf("dlqctl %v: exit %d\n%s", args, code, errOut)
	}
	return out.Bytes()
}

// readDocs is conformance's readAll: what must not depend on the backend.
func readDocs(t *testing.T, src string) map[string]any {
	t.Helper()
	docs := map[string]any{}
	var stats map[string]any
	mustJSON(t, dlqctlIn(t, nil, "--source", src, "stats", "-o", "json"), &stats)
	delete(stats, "source")
	delete(stats, "backend")
	docs["stats"] = stats
	var cats struct {
		Categories []map[string]any `json:"categories"`
	}
	mustJSON(t, dlqctlIn(t, nil, "--source", src, "categorize", "-o", "json"), &cats)
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
	mustJSON(t, dlqctlIn(t, nil, "--source", src, "list", "--limit", "0", "-o", "json"), &list)
	var keys []string
	for i, it := range list.Items {
		if it["category"] == "malformed" {
			list.Items[i] = map[string]any{"category": "malformed"}
		} else {
			delete(it, "id")
			if o, ok := it["origin"].(map[string]any); ok {
				delete(o, "backend")
			}
		}
		b, _ := json.Marshal(list.Items[i])
		keys = append(keys, string(b))
	}
	sort.Strings(keys)
	docs["list"] = keys
	return docs
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %.4000s", err, b)
	}
}
