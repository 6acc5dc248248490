// Package conformance runs every backend through the same cases: the sample
// incident, exported from the directory queue and imported into a fresh DLQ
// on each backend, must read back with the same stats, categories and list.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/cmd"
	"github.com/dlqctl/dlqctl/internal/kafkatest"
	"github.com/dlqctl/dlqctl/internal/pulsartest"
	"github.com/dlqctl/dlqctl/internal/redistest"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// target is one backend under test. start brings up its server, if it
// has one, for the subtest that runs it (and stops it when that subtest
// ends, so that two Java brokers never run at once) and returns a maker of
// fresh, empty DLQs.
type target struct {
	name  string
	start func(t *testing.T) (fresh func(t *testing.T) string)
}

func targets() []target {
	n := 0
	return []target{
		{"dir", func(*testing.T) func(t *testing.T) string {
			return func(t *testing.T) string { return "dir:" + filepath.Join(t.TempDir(), "q") }
		}},
		{"redis", func(t *testing.T) func(t *testing.T) string {
			redis := redistest.Start(t)
			return func(t *testing.T) string {
				n++
				return redis.URL(n%16, "dlq-conformance")
			}
		}},
		{"pulsar", func(t *testing.T) func(t *testing.T) string {
			pulsar := pulsartest.Start(t)
			return func(t *testing.T) string {
				n++
				q := url.Values{
					"topic": {fmt.Sprintf("persistent://public/default/dlq-conformance-%d-%d", time.Now().UnixNano(), n)},
					"admin": {pulsar.AdminURL()},
				}
				return pulsar.ServiceURL() + "?" + q.Encode()
			}
		}},
		{"kafka", func(t *testing.T) func(t *testing.T) string {
			kafka := kafkatest.Start(t)
			return func(t *testing.T) string {
				n++
				// One partition: records imported within the same
				// millisecond keep the import order (dead-letter order
				// merges partitions by timestamp).
				topic := fmt.Sprintf("dlq-conformance-%d-%d", time.Now().UnixNano(), n)
				if err := kafkatest.CreateTopic(context.Background(), kafka.Bootstrap(), topic, 1); err != nil {
					t.Fatal(err)
				}
				return "kafka://" + kafka.Bootstrap() + "?topic=" + topic
			}
		}},
	}
}

// dlqctl runs one command line in-process and returns stdout.
func dlqctl(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	io, in, out, errOut := cmd.TestIO()
	in.Write(stdin)
	f := &cmd.Factory{IO: io, Now: func() time.Time { return now }, Getenv: func(string) string { return "" }}
	if code := cmd.Execute(context.Background(), f, args); code != 0 {
		t.Fatalf("dlqctl %v: exit %d\n%s", args, code, errOut)
	}
	return out.Bytes()
}

func TestIncidentReadsTheSameOnEveryBackend(t *testing.T) {
	incident, err := filepath.Abs("../testdata/incident")
	if err != nil {
		t.Fatal(err)
	}
	export := dlqctl(t, nil, "--source", "dir:"+incident, "export")
	if n := bytes.Count(export, []byte("\n")); n != 284 {
		t.Fatalf("export wrote %d lines, want 284", n)
	}
	want := readAll(t, "dir:"+incident)
	if n := len(want["list"].([]map[string]any)); n != 284 {
		t.Fatalf("the incident lists %d entries, want 284", n)
	}
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			src := tg.start(t)(t)
			args := []string{"--source", src, "import"}
			if tg.name == "dir" {
				args = append(args, "--init")
			}
			dlqctl(t, export, args...)
			got := readAll(t, src)
			for _, doc := range []string{"stats", "categorize", "list"} {
				if !reflect.DeepEqual(got[doc], want[doc]) {
					g, _ := json.MarshalIndent(got[doc], "", " ")
					w, _ := json.MarshalIndent(want[doc], "", " ")
					t.Errorf("%s differs on %s:\n got: %s\nwant: %s", doc, tg.name, clip(g), clip(w))
				}
			}
		})
	}
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
func readAll(t *testing.T, src string) map[string]any {
	docs := map[string]any{}
	var stats map[string]any
	mustJSON(t, dlqctl(t, nil, "--source", src, "stats", "-o", "json"), &stats)
	delete(stats, "source")
	delete(stats, "backend")
	docs["stats"] = stats

	var cats struct {
		Categories []map[string]any `json:"categories"`
	}
	mustJSON(t, dlqctl(t, nil, "--source", src, "categorize", "-o", "json"), &cats)
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
	mustJSON(t, dlqctl(t, nil, "--source", src, "list", "--limit", "0", "-o", "json"), &list)
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
