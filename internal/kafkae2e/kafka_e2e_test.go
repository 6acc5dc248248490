package kafkae2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func jsonDoc(t *testing.T, out string, v any) {
	t.Helper()
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("no JSON in %s", out)
	}
	if err := json.Unmarshal([]byte(out[i:]), v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// TestListStatsShowExport reads a Spring DLT through the real command.
func TestListStatsShowExport(t *testing.T) {
	broker := kafkaServer(t)
	ctx := testCtx(t)
	origin, dlt := seedSpringDLT(t, ctx, 6)
	dir := t.TempDir()
	src := []string{"--source", source(dlt, "")}
	code, out := dlqctl(t, dir, nil, append(src, "list", "-o", "json")...)
	if code != 0 {
		t.Fatalf("list: %d %s", code, out)
	}
	var list struct {
		Items []struct {
			ID, EventID, Category, Disposition string
			Origin                             any
		} `json:"items"`
	}
	jsonDoc(t, out, &list)
	if len(list.Items) != 6 {
		t.Fatalf("list: %d items\n%s", len(list.Items), out)
	}
	// Dead-letter order: E001 (partition 1) first, E002 (partition 0) next.
	if list.Items[0].ID != "1:0" || list.Items[1].ID != "0:0" {
		t.Fatalf("order %s %s", list.Items[0].ID, list.Items[1].ID)
	}
	code, out = dlqctl(t, dir, nil, append(src, "stats", "-o", "json")...)
	if code != 0 {
		t.Fatalf("stats: %d %s", code, out)
	}
	var stats struct {
		Total      int            `json:"total"`
		ByCategory map[string]int `json:"by_category"`
		ByOrigin   map[string]int `json:"by_origin"`
		Backend    struct {
			Topic      string `json:"topic"`
			Partitions []struct {
				Remaining int `json:"remaining"`
			} `json:"partitions"`
		} `json:"backend"`
	}
	jsonDoc(t, out, &stats)
	if stats.Total != 6 || stats.ByCategory["transient"] != 6 || stats.ByOrigin[origin] != 6 || stats.Backend.Topic != dlt || len(stats.Backend.Partitions) != 2 {
		t.Fatalf("stats: %s", out)
	}
	code, out = dlqctl(t, dir, nil, append(src, "show", "E003", "-o", "json")...)
	if code != 0 || !strings.Contains(out, `"kafka_dlt-original-offset": "3"`) || !strings.Contains(out, `"match"`) {
		t.Fatalf("show: %d %s", code, out)
	}
	code, out = dlqctl(t, dir, []string{"DLQCTL_KAFKA_PASSWORD=hunter22"}, "--source", "kafka://ops@"+broker.Bootstrap()+"?topic="+dlt, "list")
	if code == 0 || strings.Contains(out, "hunter22") {
		t.Fatalf("SASL against a plaintext listener: exit %d\n%s", code, out)
	}
}

// TestRedriveEndToEnd: plan, approve, apply put every entry back on its
// original partition exactly once, the DLQ reads empty, and a plan made
// before retention removed an entry is refused as stale (exit 5).
func TestRedriveEndToEnd(t *testing.T) {
	ctx := testCtx(t)
	const n = 12
	origin, dlt := seedSpringDLT(t, ctx, n)
	dir := t.TempDir()
	src := []string{"--source", source(dlt, "")}
	plan := append(src, "redrive", "plan", "--reason", "payments fixed", "--rate", "0", "--ramp", "4,8", "--settle", "0s", "--unverified-ok")
	if code, out := dlqctl(t, dir, nil, append(plan, "--out", "stale.json")...); code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	}
	if code, out := dlqctl(t, dir, nil, "redrive", "approve", "stale.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	// Retention removes the oldest record of partition 1.
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: dlt, Partition: 1, At: 1})
	if _, err := kadm.NewClient(client(t)).DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	code, out := dlqctl(t, dir, nil, append(src, "redrive", "apply", "stale.json")...)
	if code != 5 || !strings.Contains(out, "stale") {
		t.Fatalf("apply of a stale plan: exit %d, want 5\n%s", code, out)
	}
	if code, out := dlqctl(t, dir, nil, append(plan, "--out", "p.json")...); code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	}
	if code, out := dlqctl(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	code, out = dlqctl(t, dir, nil, append(src, "redrive", "apply", "p.json", "-o", "json")...)
	if code != 0 {
		t.Fatalf("apply: %d %s", code, out)
	}
	var run struct {
		Status string `json:"status"`
		Moved  int    `json:"moved"`
	}
	jsonDoc(t, out, &run)
	if run.Status != "completed" || run.Moved != n-1 {
		t.Fatalf("apply: %s", out)
	}
	count := originEvents(t, ctx, origin)
	if len(count) != n-1 || count["E001"] != 0 {
		t.Fatalf("origin holds %v", count)
	}
	for id, c := range count {
		if c != 1 {
			t.Fatalf("%s on the origin %d times", id, c)
		}
	}
	code, out = dlqctl(t, dir, nil, append(src, "list", "-o", "json")...)
	if code != 0 || strings.Contains(out, `"event_id"`) {
		t.Fatalf("list after the redrive: %d %s", code, out)
	}
}

// TestCrashMatrix kills dlqctl with SIGKILL right after each kind of
// journal step in turn, then resumes: the origin read read_committed holds
// each event exactly once, and the DLQ reads empty.
func TestCrashMatrix(t *testing.T) {
	const n = 20
	for _, step := range []string{"batch-start:1", "intent:1", "intent:3", "published:1", "published:3", "batch-end:1"} {
		t.Run(step, func(t *testing.T) {
			ctx := testCtx(t)
			origin, dlt := seedSpringDLT(t, ctx, n)
			dir := t.TempDir()
			src := []string{"--source", source(dlt, "")}
			if code, out := dlqctl(t, dir, nil, append(src, "redrive", "plan", "--reason", "crash test", "--rate", "100000",
				"--burst", "4", "--ramp", "5,10", "--settle", "0s", "--unverified-ok", "--out", "p.json")...); code != 0 {
				t.Fatalf("plan: %d %s", code, out)
			}
			if code, out := dlqctl(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
				t.Fatalf("approve: %d %s", code, out)
			}
			code, out := dlqctl(t, dir, []string{"DLQCTL_TEST_CRASH=" + step}, append(src, "redrive", "apply", "p.json")...)
			if code != 137 {
				t.Fatalf("apply did not crash at %s: exit %d\n%s", step, code, out)
			}
			code, out = dlqctl(t, dir, nil, append(src, "redrive", "resume", "p.journal", "-o", "json")...)
			if code != 0 {
				t.Fatalf("resume: exit %d\n%s", code, out)
			}
			var doc struct {
				Status string `json:"status"`
				Moved  int    `json:"moved"`
			}
			jsonDoc(t, out, &doc)
			if doc.Status != "completed" || doc.Moved != n {
				t.Errorf("after resume: status %s, moved %d; want completed, %d", doc.Status, doc.Moved, n)
			}
			count := originEvents(t, ctx, origin)
			for i := 1; i <= n; i++ {
				if id := fmt.Sprintf("E%03d", i); count[id] != 1 {
					t.Errorf("%s on the origin %d times", id, count[id])
				}
			}
			if len(count) != n {
				t.Errorf("%d distinct events on the origin", len(count))
			}
			code, out = dlqctl(t, dir, nil, append(src, "stats", "-o", "json")...)
			var st struct {
				Total int `json:"total"`
			}
			jsonDoc(t, out, &st)
			if code != 0 || st.Total != 0 {
				t.Errorf("DLQ after resume: exit %d, %d entries", code, st.Total)
			}
		})
	}
}

// TestBrokerRestartDuringApply stops the broker while a redrive runs:
// apply fails with exit 1 and prints the resume command; once the broker
// is back, resume completes, and each event is on the origin once.
func TestBrokerRestartDuringApply(t *testing.T) {
	broker := kafkaServer(t)
	ctx := testCtx(t)
	const n = 40
	origin, dlt := seedSpringDLT(t, ctx, n)
	dir := t.TempDir()
	src := []string{"--source", source(dlt, "&timeout=3s")}
	if code, out := dlqctl(t, dir, nil, append(src, "redrive", "plan", "--reason", "restart test", "--rate", "20",
		"--burst", "2", "--ramp", "10,20", "--settle", "0s", "--unverified-ok", "--out", "p.json")...); code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	}
	if code, out := dlqctl(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := dlqctl(t, dir, nil, append(src, "redrive", "apply", "p.json")...)
		done <- result{code, out}
	}()
	// 40 entries at 20/s take 2 s: stop the broker once the first moves
	// are journaled.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(dir, "p.journal")); strings.Count(string(b), `"published"`) >= 2 {
			break
		}
	}
	if err := broker.Down(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if err := broker.Up(); err != nil {
		t.Fatal(err)
	}
	if r.code != 1 || !strings.Contains(r.out, "dlqctl redrive resume p.journal") {
		t.Fatalf("apply with the broker down: exit %d, want 1 with the resume command\n%s", r.code, r.out)
	}
	start := time.Now()
	code, out := dlqctl(t, dir, nil, append(src, "redrive", "resume", "p.journal")...)
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	t.Logf("resume after the restart took %s:\n%s", time.Since(start), out)
	count := originEvents(t, ctx, origin)
	if len(count) != n {
		t.Errorf("%d events on the origin, want %d", len(count), n)
	}
	for id, c := range count {
		if c != 1 {
			t.Errorf("%s on the origin %d times", id, c)
		}
	}
}

// TestForgedStateRecordEndToEnd: a state record that a plain producer
// writes to the state topic, naming an entry as redriven, changes
// nothing: the entry is still listed and planned, and apply moves it.
func TestForgedStateRecordEndToEnd(t *testing.T) {
	ctx := testCtx(t)
	origin, dlt := seedSpringDLT(t, ctx, 4)
	dir := t.TempDir()
	src := []string{"--source", source(dlt, "")}
	run := func(args ...string) {
		t.Helper()
		if code, out := dlqctl(t, dir, nil, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
	}
	plan := append(src, "redrive", "plan", "--reason", "payments fixed", "--rate", "0", "--settle", "0s", "--unverified-ok")
	// A first redrive makes the state topic.
	run(append(plan, "--event-id", "E001", "--out", "first.json")...)
	run("redrive", "approve", "first.json", "--by", "oncall")
	run(append(src, "redrive", "apply", "first.json")...)
	var list struct {
		Items []struct {
			ID      string `json:"id"`
			EventID string `json:"event_id"`
		} `json:"items"`
	}
	code, out := dlqctl(t, dir, nil, append(src, "list", "-o", "json")...)
	jsonDoc(t, out, &list)
	if code != 0 || len(list.Items) != 3 {
		t.Fatalf("list: %d %s", code, out)
	}
	victim := list.Items[0]
	cl := client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	forged := &kgo.Record{Topic: dlt + ".dlqctl-state", Partition: 0, Key: []byte(victim.ID),
		Value: []byte(`{"status":"redriven","run_id":"forger","seq":1,"dest":"` + origin + `","dest_id":"0:0","at":"2026-01-01T00:00:00Z"}`)}
	if err := cl.ProduceSync(ctx, forged).FirstErr(); err != nil {
		t.Fatal(err)
	}
	code, out = dlqctl(t, dir, nil, append(src, "list", "-o", "json")...)
	jsonDoc(t, out, &list)
	if code != 0 || len(list.Items) != 3 {
		t.Fatalf("list after a forged state record for %s: %d %s", victim.ID, code, out)
	}
	run(append(plan, "--out", "p.json")...)
	var p struct {
		Entries []struct {
			ID string `json:"id"`
		} `json:"entries"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "p.json"))
	if err != nil {
		t.Fatal(err)
	}
	jsonDoc(t, string(b), &p)
	if len(p.Entries) != 3 {
		t.Fatalf("the plan takes %d entries, want 3 (%s forged as redriven)", len(p.Entries), victim.ID)
	}
	run("redrive", "approve", "p.json", "--by", "oncall")
	run(append(src, "redrive", "apply", "p.json")...)
	count := originEvents(t, ctx, origin)
	for _, id := range []string{"E001", "E002", "E003", "E004"} {
		if count[id] != 1 {
			t.Errorf("%s on the origin %d times, want once (%v)", id, count[id], count)
		}
	}
}
