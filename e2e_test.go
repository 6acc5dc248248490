package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"github.com/dlqctl/dlqctl/internal/workertest"
)

// incidentOnRedis imports the sample incident into a fresh DLQ stream in
// database db and returns the source URL and a client.
func incidentOnRedis(t *testing.T, db int) (string, *redis.Client, string) {
	t.Helper()
	addr := os.Getenv("DLQCTL_TEST_REDIS_ADDR")
	rdb := redis.NewClient(&redis.Options{Addr: addr, DB: db})
	t.Cleanup(func() { rdb.Close() })
	rdb.FlushDB(context.Background())
	dir := t.TempDir()
	src := fmt.Sprintf("redis://%s/%d?stream=orders-dlq", addr, db)
	incident, _ := filepath.Abs("testdata/incident")
	if code, out := dlqctlProc(t, dir, nil, "--source", "dir:"+incident, "export", "--out", "incident.ndjson"); code != 0 {
		t.Fatalf("export: %s", out)
	}
	if code, out := dlqctlProc(t, dir, nil, "--source", src, "import", "incident.ndjson"); code != 0 {
		t.Fatalf("import: %s", out)
	}
	return src, rdb, dir
}

type runDoc struct {
	Status   string `json:"status"`
	Moved    int    `json:"moved"`
	HaltedBy string `json:"halted_by"`
	Batches  []struct {
		Size     int            `json:"size"`
		Verdicts map[string]int `json:"verdicts"`
		Gate     string         `json:"gate"`
	} `json:"batches"`
}

func parseRun(t *testing.T, out string) runDoc {
	t.Helper()
	var d runDoc
	i := strings.Index(out, "{\n")
	if i < 0 {
		t.Fatalf("no run document in:\n%s", out)
	}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&d); err != nil {
		t.Fatalf("%v in:\n%s", err, out)
	}
	return d
}

// TestRunbookEndToEnd is docs/runbook.md against real parts: the sample
// incident on a real Redis, a plan, an approval, and an apply while the
// reference worker consumes the origin stream with its inbox in SQLite.
// Every redriven event ends with exactly one effect, and reaches the origin
// with the same event ID and fingerprint it had in the DLQ.
func TestRunbookEndToEnd(t *testing.T) {
	src, rdb, dir := incidentOnRedis(t, 3)
	ctx := context.Background()
	inbox := filepath.Join(dir, "inbox.db")
	addr := os.Getenv("DLQCTL_TEST_REDIS_ADDR")

	// What the DLQ holds for the payments transients, before.
	before := map[string]string{}
	entries := 0
	code, out := dlqctlProc(t, dir, nil, "--source", src, "list", "--category", "transient", "--origin", "payments", "--limit", "0", "-o", "ndjson")
	if code != 0 {
		t.Fatal(out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var it struct{ EventID, Fingerprint string }
		json.Unmarshal([]byte(line), &struct {
			EventID     *string `json:"event_id"`
			Fingerprint *string `json:"fingerprint"`
		}{&it.EventID, &it.Fingerprint})
		before[it.EventID] = it.Fingerprint
		entries++
	}
	if len(before) < 20 {
		t.Fatalf("only %d payments transients in the incident", len(before))
	}

	workertest.StartReady(t, "--source", fmt.Sprintf("redis://%s/3?stream=payments&group=payments-workers", addr),
		"--dlq", "orders-dlq", "--inbox", "sqlite:"+inbox)

	if code, out := dlqctlProc(t, dir, nil, "--source", src, "redrive", "plan", "--category", "transient", "--origin", "payments",
		"--reason", "INC-1: payments timeouts fixed", "--effects", "sqlite:"+inbox, "--settle", "10s",
		"--rate", "200", "--ramp", "5,20", "--out", "p.json"); code != 0 {
		t.Fatalf("plan: %s", out)
	}
	// Per-key order holds across the whole DLQ: a transient whose key has
	// an older entry of another category still in the DLQ is held back, so
	// the plan takes only the others.
	var plan struct {
		Entries []struct {
			EventID string `json:"event_id"`
		} `json:"entries"`
		Excluded []struct {
			EventID string `json:"event_id"`
			HeldBy  string `json:"held_by"`
		} `json:"excluded"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "p.json")); err != nil || json.Unmarshal(b, &plan) != nil {
		t.Fatalf("read the plan: %v", err)
	}
	held := 0
	for _, x := range plan.Excluded {
		if x.HeldBy != "" {
			held++
			delete(before, x.EventID)
		}
	}
	if held == 0 || len(plan.Entries)+held != entries {
		t.Fatalf("plan: %d entries, %d held back for key order; want them to add up to the %d transients", len(plan.Entries), held, entries)
	}
	entries = len(plan.Entries)
	if code, out := dlqctlProc(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %s", out)
	}
	code, out = dlqctlProc(t, dir, nil, "--source", src, "-o", "json", "redrive", "apply", "p.json")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	run := parseRun(t, out)
	if run.Status != "completed" || run.Moved != entries {
		t.Fatalf("status %s moved %d, want completed %d", run.Status, run.Moved, entries)
	}
	if run.Batches[0].Size != 5 || run.Batches[1].Size != 20 {
		t.Errorf("batches did not follow the ramp 5,20: %+v", run.Batches)
	}
	for _, b := range run.Batches {
		if b.Gate != "pass" || b.Verdicts["applied"]+b.Verdicts["absorbed-duplicate"] == 0 {
			t.Errorf("batch %+v", b)
		}
	}
	rows := workertest.ReadInbox(t, inbox)
	for id := range before {
		if r := rows[id]; r.Effects != 1 {
			t.Errorf("%s: effects %d, want 1", id, r.Effects)
		}
	}
	msgs, err := rdb.XRange(ctx, "payments", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != entries {
		t.Errorf("%d entries on the origin, want %d", len(msgs), entries)
	}
	for _, m := range msgs {
		id, _ := m.Values["event_id"].(string)
		fp, _ := m.Values["fingerprint"].(string)
		if want, ok := before[id]; !ok || (fp != "" && fp != want) {
			t.Errorf("origin entry %s: event %q fingerprint %q, DLQ had %q", m.ID, id, fp, want)
		}
		if m.Values["dlqctl_run_id"] == nil || m.Values["redrive_count"] == "0" || m.Values["redrive_count"] == nil {
			t.Errorf("origin entry %s lacks redrive markers: %v", m.ID, m.Values)
		}
	}
	// reconcile on demand gives the same verdicts.
	code, out = dlqctlProc(t, dir, nil, "--source", src, "-o", "json", "reconcile", "--journal", "p.journal")
	if code != 0 || strings.Contains(out, `"pending"`) || strings.Contains(out, `"duplicate-effect"`) {
		t.Errorf("reconcile: exit %d\n%s", code, out)
	}
}

// TestGatesStopTheRun runs the redrive against a consumer that misbehaves
// in one way each: the batch with the bad event fails its gate, apply
// exits 3, and the next batch never starts.
func TestGatesStopTheRun(t *testing.T) {
	cases := []struct {
		name   string
		worker func(victim string) []string
		gate   string
	}{
		{"duplicate-effect", func(v string) []string { return []string{"--double-effect", v} }, "duplicate-effect"},
		{"re-dead-lettered", func(v string) []string { return []string{"--fail", v} }, "re-dead-lettered"},
		{"pending", nil, "pending"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, _, dir := incidentOnRedis(t, 4+i)
			inbox := filepath.Join(dir, "inbox.db")
			addr := os.Getenv("DLQCTL_TEST_REDIS_ADDR")
			code, out := dlqctlProc(t, dir, nil, "--source", src, "list", "--category", "transient", "--origin", "payments", "--limit", "3", "-o", "json")
			if code != 0 {
				t.Fatal(out)
			}
			var first struct {
				Items []struct {
					EventID string `json:"event_id"`
				} `json:"items"`
			}
			// stderr shares out: it notes that more entries remain, so
			// the document is read from its first brace.
			brace := max(strings.Index(out, "{"), 0)
			if err := json.NewDecoder(strings.NewReader(out[brace:])).Decode(&first); err != nil || len(first.Items) < 3 {
				t.Fatalf("list -o json: %v\n%s", err, out)
			}
			victim := first.Items[2].EventID // in the first batch
			args := []string{"--source", fmt.Sprintf("redis://%s/%d?stream=payments&group=g", addr, 4+i), "--dlq", "orders-dlq", "--inbox", "sqlite:" + inbox}
			if c.worker != nil {
				workertest.StartReady(t, append(args, c.worker(victim)...)...)
			} else {
				// A consumer that is not running: it has made the inbox once.
				workertest.Start(t, append(args, "--until-idle", "100ms")...).Wait()
			}
			if code, out := dlqctlProc(t, dir, nil, "--source", src, "redrive", "plan", "--category", "transient", "--origin", "payments",
				"--reason", "gate test", "--effects", "sqlite:"+inbox, "--settle", "3s", "--rate", "500", "--ramp", "5,20", "--out", "p.json"); code != 0 {
				t.Fatalf("plan: %s", out)
			}
			dlqctlProc(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall")
			code, out = dlqctlProc(t, dir, nil, "--source", src, "-o", "json", "redrive", "apply", "p.json")
			if code != 3 {
				t.Fatalf("apply: exit %d, want 3\n%s", code, out)
			}
			run := parseRun(t, out)
			if run.HaltedBy != c.gate || len(run.Batches) != 1 || run.Moved != 5 {
				t.Errorf("halted by %q after %d batches, moved %d; want %s after 1 batch of 5", run.HaltedBy, len(run.Batches), run.Moved, c.gate)
			}
			if !strings.Contains(out, "stopped by the "+c.gate+" gate") {
				t.Errorf("the message does not name the gate:\n%s", out)
			}
			// The next commands name the plan and stand on lines of their
			// own (in the JSON error document, its message's \n).
			if msg := strings.ReplaceAll(out, `\n`, "\n"); !strings.Contains(msg, "\n  dlqctl redrive approve p.json --again\n  dlqctl redrive resume p.journal --past-gate") || strings.Contains(out, "PLAN") {
				t.Errorf("the message does not give the commands to go on, each on its own line:\n%s", out)
			}
			// resume refuses until the cause is dealt with
			code, out = dlqctlProc(t, dir, nil, "--source", src, "redrive", "resume", "p.journal")
			if code != 3 || !strings.Contains(out, "--past-gate") {
				t.Errorf("resume after a gate: exit %d\n%s", code, out)
			}
			// a fresh approval points at the resume, not at apply
			code, out = dlqctlProc(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall", "--again")
			if code != 0 || !strings.Contains(out, "next:\n  dlqctl redrive resume p.journal --past-gate") || strings.Contains(out, "redrive apply") {
				t.Errorf("approve --again after a gate: exit %d\n%s", code, out)
			}
		})
	}
}

// TestGateInTheLastBatch trips the re-dead-lettered gate in the plan's
// last batch: every entry was moved, so the messages say that nothing is
// left to resume, name the event that came back and give the command
// that plans it again (the plan's flags, taking what came back in another
// category), which works as printed. approve --again, resume
// and a second apply say the same instead of pointing at a run that has
// nothing left.
func TestGateInTheLastBatch(t *testing.T) {
	src, _, dir := incidentOnRedis(t, 9)
	inbox := filepath.Join(dir, "inbox.db")
	addr := os.Getenv("DLQCTL_TEST_REDIS_ADDR")
	wargs := []string{"--source", fmt.Sprintf("redis://%s/9?stream=payments&group=g", addr), "--dlq", "orders-dlq", "--inbox", "sqlite:" + inbox}
	workertest.Start(t, append(wargs, "--until-idle", "100ms")...).Wait() // makes the inbox
	if code, out := dlqctlProc(t, dir, nil, "--source", src, "redrive", "plan", "--category", "transient", "--origin", "payments", "--max", "8",
		"--reason", "gate test", "--effects", "sqlite:"+inbox, "--settle", "3s", "--rate", "500", "--ramp", "5", "--out", "p.json"); code != 0 {
		t.Fatalf("plan: %s", out)
	}
	victim := victimIn(t, dir, 5, 8) // in batch 2 of 5+3, the last
	workertest.Start(t, append(wargs, "--fail", victim)...)
	if code, out := dlqctlProc(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %s", out)
	}
	code, out := dlqctlProc(t, dir, nil, "--source", src, "redrive", "apply", "p.json")
	if code != 3 {
		t.Fatalf("apply: exit %d, want 3\n%s", code, out)
	}
	wantAll := func(what, out string, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("%s does not say %q:\n%s", what, w, out)
			}
		}
	}
	refuseAll := func(what, out string, bad ...string) {
		t.Helper()
		for _, b := range bad {
			if strings.Contains(out, b) {
				t.Errorf("%s says %q:\n%s", what, b, out)
			}
		}
	}
	replan := shellBlock(t, out, "Once the cause is fixed, plan it again:")
	for _, want := range []string{"dlqctl --source '" + src + "' redrive plan --category transient --category unknown --origin payments --event-id " + victim,
		"--allow-disposition investigate --ramp 5 --rate 500 --burst 10 --effects sqlite:" + inbox + " --settle 3s --max-failed-ratio 0 --reason 'gate test (came back)' --out redrive-again-"} {
		if !strings.Contains(replan, want) {
			t.Errorf("the re-plan lacks %q:\n%s", want, replan)
		}
	}
	cameBack := "1 event came back to the DLQ: " + victim
	wantAll("apply", out, "stopped by the re-dead-lettered gate", "nothing is left to resume (journal p.journal)", cameBack, replan, "; 1 came back to the DLQ.")
	// Printed again later, it names the file of its own time.
	again := replan[:strings.Index(replan, "--out redrive-again-")]
	refuseAll("apply", out, "PLAN", "--past-gate", "approve p.json")

	code, out = dlqctlProc(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall", "--again")
	wantAll("approve --again", out, "nothing is left to apply or resume", cameBack, again)
	refuseAll("approve --again", out, "next:")
	if code != 0 {
		t.Errorf("approve --again: exit %d", code)
	}
	for _, args := range [][]string{{"redrive", "resume", "p.journal"}, {"redrive", "resume", "p.journal", "--past-gate"}} {
		code, out = dlqctlProc(t, dir, nil, args...)
		what := strings.Join(args, " ")
		if code != 3 {
			t.Errorf("%s: exit %d, want 3", what, code)
		}
		wantAll(what, out, "nothing is left to resume", cameBack, again)
		refuseAll(what, out, "Redrive complete!", "PLAN", "approve p.json")
	}
	code, out = dlqctlProc(t, dir, nil, "--source", src, "redrive", "apply", "p.json")
	wantAll("apply again", out, "p.json was already applied (journal p.journal)", cameBack, again)
	refuseAll("apply again", out, "stale", "--skip-missing")
	if code != 2 {
		t.Errorf("apply again: exit %d, want 2", code)
	}

	// The command printed plans the event that came back.
	code, out = runAsPrinted(t, dir, replan)
	if code != 0 || !strings.Contains(out, "plan written to redrive-again-") || !strings.Contains(out, "\nentries\t1\n") {
		t.Errorf("the re-plan as printed: exit %d\n%s", code, out)
	}
}
