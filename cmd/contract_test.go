package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlqctl/dlqctl/backends/redis/redistest"
)

var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// run executes one dlqctl command line in-process with a pinned clock.
func run(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	io, _, out, errOut := TestIO()
	f := &Factory{Deps: Deps{Backends: testBackends(), IO: io, Now: func() time.Time { return testNow }, Getenv: func(k string) string { return env[k] }}}
	code = Execute(context.Background(), f, args)
	return out.String(), errOut.String(), code
}

func incidentSource(t *testing.T) string {
	p, err := filepath.Abs("../testdata/incident")
	if err != nil {
		t.Fatal(err)
	}
	return "dir:" + p
}

// paths flattens a JSON document into its field paths: "a.b", "items[].id".
// Below a path that the docs mark as a map ("by_category{}") nothing is
// listed, since its keys are data.
func paths(v any, prefix string, maps map[string]bool, out map[string]bool) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			if maps[p] {
				out[p+"{}"] = true
				continue
			}
			out[p] = true
			paths(child, p, maps, out)
		}
	case []any:
		for _, child := range t {
			paths(child, prefix+"[]", maps, out)
		}
	}
}

// documented reads docs/json.md: under each "## dlqctl.X/v1" heading, the
// first column of its table lists the fields in backticks.
func documented(t *testing.T) map[string][]string {
	f, err := os.Open("../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs := map[string][]string{}
	var schema string
	heading := regexp.MustCompile("^## `?(dlqctl\\.[a-z-]+/v1)`?")
	row := regexp.MustCompile("^\\| `([^`]+)` \\|")
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := heading.FindStringSubmatch(line); m != nil {
			schema = m[1]
			continue
		}
		if strings.HasPrefix(line, "## ") {
			schema = "" // a section that documents no schema
			continue
		}
		if m := row.FindStringSubmatch(line); m != nil && schema != "" {
			docs[schema] = append(docs[schema], m[1])
		}
	}
	return docs
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestJSONFieldsMatchTheDocs pins every JSON document's fields to
// docs/json.md: a field added, renamed or removed on either side fails.
func TestJSONFieldsMatchTheDocs(t *testing.T) {
	src := incidentSource(t)
	docs := documented(t)
	cases := []struct {
		schema string
		args   []string
	}{
		{"dlqctl.list/v1", []string{"list", "--limit", "0"}},
		{"dlqctl.show/v1", []string{"show", "evt-22006c7fe6c3"}},
		{"dlqctl.stats/v1", []string{"stats"}},
		{"dlqctl.categories/v1", []string{"categorize", "--explain"}},
		{"dlqctl.templates/v1", []string{"categorize", "--discover"}},
		{"dlqctl.check/v1", []string{"check", "--max-total", "1"}},
		{"dlqctl.sample/v1", []string{"sample", "--seed", "1"}},
		{"dlqctl.version/v1", []string{"version"}},
		{"dlqctl.doctor/v1", []string{"doctor"}},
	}
	for _, c := range cases {
		t.Run(c.schema, func(t *testing.T) {
			want := docs[c.schema]
			if len(want) == 0 {
				t.Fatalf("docs/json.md documents no fields for %s", c.schema)
			}
			maps := map[string]bool{}
			for _, p := range want {
				if strings.HasSuffix(p, "{}") {
					maps[strings.TrimSuffix(p, "{}")] = true
				}
			}
			out, errOut, code := run(t, nil, append([]string{"--source", src, "-o", "json"}, c.args...)...)
			if code != 0 && code != ExitCheck && !(c.schema == "dlqctl.doctor/v1" && code == ExitError) {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var doc any
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got := doc.(map[string]any)["schema"]; got != c.schema {
				t.Fatalf("schema = %v, want %s", got, c.schema)
			}
			got := map[string]bool{}
			paths(doc, "", maps, got)
			wantSet := map[string]bool{}
			for _, p := range want {
				wantSet[p] = true
			}
			for _, p := range keysOf(got) {
				if !wantSet[p] {
					t.Errorf("%s: field %q is not in docs/json.md", c.schema, p)
				}
			}
			for _, p := range want {
				if !got[p] && !optional(p) {
					t.Errorf("%s: docs/json.md lists %q, the output has no such field", c.schema, p)
				}
			}
		})
	}
}

// TestMoveDocumentsMatchTheDocs pins the plan, run and reconcile documents
// on a copy of the incident, and the error document.
func TestMoveDocumentsMatchTheDocs(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"error", "inbox"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	files, _ := filepath.Glob("../testdata/incident/error/*.json")
	for _, f := range files[:60] {
		b, _ := os.ReadFile(f)
		os.WriteFile(filepath.Join(root, "error", filepath.Base(f)), b, 0o644)
	}
	src := "dir:" + root
	plan := filepath.Join(root, "p.json")
	env := map[string]string{"DLQCTL_APPROVAL_KEY": "test-approval-key-0123456789abcdef"}
	docs := documented(t)
	check := func(schema, out string) {
		t.Helper()
		var doc any
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%s: %v: %s", schema, err, out)
		}
		if got := doc.(map[string]any)["schema"]; got != schema {
			t.Fatalf("schema = %v, want %s", got, schema)
		}
		want := docs[schema]
		maps := map[string]bool{}
		for _, p := range want {
			if strings.HasSuffix(p, "{}") {
				maps[strings.TrimSuffix(p, "{}")] = true
			}
		}
		got := map[string]bool{}
		paths(doc, "", maps, got)
		wantSet := map[string]bool{}
		for _, p := range want {
			wantSet[p] = true
			if !got[p] && !optional(p) {
				t.Errorf("%s: docs/json.md lists %q, the output has no such field", schema, p)
			}
		}
		for p := range got {
			if !wantSet[p] {
				t.Errorf("%s: field %q is not in docs/json.md", schema, p)
			}
		}
	}
	out, errOut, code := run(t, env, "--source", src, "-o", "json", "redrive", "plan", "--category", "transient,conflict",
		"--reason", "r", "--settle", "0s", "--out", plan)
	if code != 0 {
		t.Fatalf("plan: %s", errOut)
	}
	check("dlqctl.plan/v1", out)
	if _, errOut, code := run(t, env, "redrive", "approve", plan, "--by", "bob"); code != 0 {
		t.Fatalf("approve: %s", errOut)
	}
	b, _ := os.ReadFile(plan)
	check("dlqctl.plan/v1", string(b))
	out, errOut, code = run(t, env, "--source", src, "-o", "json", "redrive", "apply", plan)
	if code != 0 {
		t.Fatalf("apply: %d %s", code, errOut)
	}
	check("dlqctl.run/v1", out)
	out, errOut, code = run(t, env, "-o", "json", "redrive", "status", filepath.Join(root, "p.journal"))
	if code != 0 || !strings.Contains(out, `"state": "valid"`) {
		t.Fatalf("status: %d %s %s", code, out, errOut)
	}
	check("dlqctl.run/v1", out)
	out, errOut, code = run(t, env, "--source", src, "-o", "json", "reconcile", "--journal", filepath.Join(root, "p.journal"),
		"--effects", "exec:true", "--events")
	if code != 0 {
		t.Fatalf("reconcile: %s", errOut)
	}
	check("dlqctl.reconcile/v1", out)
	_, errOut, code = run(t, env, "--source", src, "-o", "json", "redrive", "apply", "nosuch.json")
	if code != ExitApproval {
		t.Fatalf("apply of a missing plan: exit %d", code)
	}
	check("dlqctl.error/v1", errOut)
}

// optional fields are omitted when empty, so one sample output may lack them.
func optional(p string) bool {
	for _, suffix := range []string{"malformed", "raw", "key", "owner", "fingerprint", "payload_version", "content_type",
		"origin.subscription", "origin.consumer", "first_received_at", "recover_by", "schema_info", "properties{}", "date",
		"origin.backend", "origin.topic", "dead_lettered_at", "backend{}", "params.to", "params.effects",
		"params.effects_query", "approved_by", "halt_reason", "resume_command", "needs[]", "gate_reason", "events", "events[].event_id",
		"events[].attempts", "events[].effects", "events[].verdict", "excluded[].id", "excluded[].event_id", "excluded[].why",
		"approvals[].by", "approvals[].at", "approvals[].expires_at", "approvals[].hmac", "approvals[].signature", "approvals[].principal", "exact_base64{}",
		"params.allow_dispositions", "excluded[].disposition", "excluded[].held_by", "checks[].fix", "watch", "came_back[]",
		"approvals[].state", "checks[].warn", "source_retention", "source_retention[].source", "source_retention[].oldest",
		"source_retention[].left_seconds", "source_retention[].until", "source_retention[].basis"} {
		if strings.HasSuffix(p, suffix) {
			return true
		}
	}
	return false
}

// TestPendingJSONMatchesTheDocs pins dlqctl.pending/v1 against a real
// Redis consumer group with pending entries.
func TestPendingJSONMatchesTheDocs(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	for i := 0; i < 5; i++ {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders", Values: map[string]any{"event_id": fmt.Sprint("E", i)}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.XGroupCreate(ctx, "orders", "workers", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: "w1", Streams: []string{"orders", ">"}, Count: 3}).Err(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, nil, "--source", srv.URL(0, "dlq"), "-o", "json", "pending", "--stream", "orders", "--group", "workers", "--min-idle", "0s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["pending"] != float64(3) || doc["lag"] != float64(2) {
		t.Errorf("pending = %v, lag = %v; want 3 and 2", doc["pending"], doc["lag"])
	}
	want := documented(t)["dlqctl.pending/v1"]
	maps := map[string]bool{"delivery_histogram": true}
	got := map[string]bool{}
	paths(doc, "", maps, got)
	wantSet := map[string]bool{}
	for _, p := range want {
		wantSet[p] = true
		if !got[p] {
			t.Errorf("docs/json.md lists %q, the output has no such field", p)
		}
	}
	for p := range got {
		if !wantSet[p] {
			t.Errorf("field %q is not in docs/json.md", p)
		}
	}

	// quarantine moves the three pending entries into the DLQ stream.
	out, errOut, code = run(t, nil, "--source", srv.URL(0, "dlq"), "-o", "json", "quarantine", "--stream", "orders",
		"--group", "workers", "--min-idle", "0s", "--min-deliveries", "1", "--reason", "stuck")
	if code != 0 {
		t.Fatalf("quarantine: exit %d: %s", code, errOut)
	}
	var q map[string]any
	if err := json.Unmarshal([]byte(out), &q); err != nil {
		t.Fatal(err)
	}
	if moved, _ := q["moved"].([]any); len(moved) != 3 {
		t.Errorf("quarantine moved %v, want 3 entries", q["moved"])
	}
	got = map[string]bool{}
	paths(q, "", nil, got)
	wantSet = map[string]bool{}
	for _, p := range documented(t)["dlqctl.quarantine/v1"] {
		wantSet[p] = true
		if !got[p] && !strings.HasPrefix(p, "would_move[]") {
			t.Errorf("docs/json.md lists %q, quarantine has no such field", p)
		}
	}
	for p := range got {
		if !wantSet[p] {
			t.Errorf("quarantine field %q is not in docs/json.md", p)
		}
	}
}
