package sqsdlq_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	_ "modernc.org/sqlite"

	"github.com/dlqctl/dlqctl/backends/sqs/sqstest"
)

// The end-to-end tests run the real dlqctl (this test binary, see
// TestMain) and the reference worker against the package's ElasticMQ
// server: the source queues' redrive policies make the dead letters.

// dlqctlRun runs dlqctl in dir with the AWS chain pointed at the test
// server, and returns its exit code and output.
func dlqctlRun(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	return dlqctlRunWith(t, dir, env, nil, args...)
}

// dlqctlRunWith is dlqctlRun with prep, when not nil, given the command
// before it starts (to start it in another PID namespace, say).
func dlqctlRunWith(t *testing.T, dir string, env []string, prep func(*exec.Cmd), args ...string) (int, string) {
	t.Helper()
	c := exec.Command("dlqctl", args...)
	if prep != nil {
		prep(c)
	}
	c.Dir = dir
	c.Env = append(append(os.Environ(), sqstest.Env()...), append([]string{"DLQCTL_APPROVAL_KEY=an-approval-key-long-enough-for-doctor"}, env...)...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		if code = ee.ExitCode(); code == -1 {
			code = 137 // killed by a signal
		}
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

var workerBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "dlqctl-worker-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "worker")
	out, err := exec.Command("go", "build", "-o", bin, "../../examples/worker").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build the reference worker: %v\n%s", err, out)
	}
	return bin, nil
})

// runWorker runs the reference worker until it has been idle for a while.
func runWorker(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := workerBinary()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(bin, append(args, "--until-idle", "2s")...)
	c.Env = append(os.Environ(), sqstest.Env()...)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("worker: %v\n%s", err, out)
	}
	return string(out)
}

// startWorker runs the worker in the background until the test ends.
func startWorker(t *testing.T, args ...string) {
	t.Helper()
	bin, err := workerBinary()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(bin, args...)
	c.Env = append(os.Environ(), sqstest.Env()...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	t.Cleanup(func() {
		c.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.Process.Kill()
		}
		if t.Failed() {
			t.Logf("worker output:\n%s", out.String())
		}
	})
}

func workerSource(t testing.TB, queue string) string {
	server := sqsServer(t)
	return "sqs://" + queue + "?region=" + sqstest.Region + "&endpoint=" + server.Endpoint()
}

type inboxRow struct{ attempts, effects int }

func readInbox(t *testing.T, path string) map[string]inboxRow {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT event_id, attempts, effects FROM inbox`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]inboxRow{}
	for rows.Next() {
		var id string
		var r inboxRow
		if err := rows.Scan(&id, &r.attempts, &r.effects); err != nil {
			t.Fatal(err)
		}
		out[id] = r
	}
	return out
}

type runDoc struct {
	Status  string `json:"status"`
	Moved   int    `json:"moved"`
	Batches []struct {
		Size     int            `json:"size"`
		Verdicts map[string]int `json:"verdicts"`
		Gate     string         `json:"gate"`
	} `json:"batches"`
}

// passed counts the events of every batch with a passing verdict.
func (d runDoc) passed() int {
	n := 0
	for _, b := range d.Batches {
		n += b.Verdicts["applied"] + b.Verdicts["absorbed-duplicate"]
	}
	return n
}

func parseRun(t *testing.T, out string) runDoc {
	t.Helper()
	var d runDoc
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("no JSON in %s", out)
	}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&d); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return d
}

// TestE2ERedriveFromRealDeadLetters: the worker fails every event, the
// source queue's redrive policy (maxReceiveCount 2) dead-letters them;
// dlqctl plans, approves and applies a redrive with reconciliation
// against the worker's inbox while the worker (now healthy) consumes: one
// effect per event, same event IDs and fingerprints.
func TestE2ERedriveFromRealDeadLetters(t *testing.T) {
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	dir := t.TempDir()
	inbox := filepath.Join(dir, "inbox.db")
	const n = 20
	args := []string{"--source", workerSource(t, p.srcName), "--inbox", "sqlite:" + inbox}
	var evs []event
	for i := range n {
		ev := event{id: fmt.Sprintf("E%02d", i), body: fmt.Sprintf(`{"orderId":"o-%d"}`, i)}
		evs = append(evs, ev)
		args = append(args, "--fail", ev.id)
	}
	send(t, ctx, p.src, evs...)
	runWorker(t, args...)
	if got := count(t, ctx, p.dlq); got != n {
		t.Fatalf("the redrive policy dead-lettered %d of %d", got, n)
	}
	src := []string{"--source", p.sourceURL()}
	code, out := dlqctlRun(t, dir, nil, append(src, "list", "-o", "json")...)
	if code != 0 {
		t.Fatalf("list: %d %s", code, out)
	}
	var list struct {
		Items []struct {
			ID       string `json:"id"`
			EventID  string `json:"event_id"`
			Attempts int    `json:"attempts"`
			Origin   struct {
				Topic string `json:"topic"`
			} `json:"origin"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(list.Items) != n || list.Items[0].EventID != "E00" || list.Items[0].Origin.Topic != p.srcName || list.Items[0].Attempts != 2 {
		t.Fatalf("list: %s", out)
	}
	if v, f := counts(t, ctx, p.dlq); v != n || f != 0 {
		t.Fatalf("after list: %d visible, %d in flight", v, f)
	}
	code, out = dlqctlRun(t, dir, nil, append(src, "redrive", "plan", "--reason", "payments fixed", "--allow-disposition", "investigate",
		"--rate", "1000", "--ramp", "5,15", "--effects", "sqlite:"+inbox, "--settle", "10s", "--out", "p.json")...)
	if code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	}
	if code, out := dlqctlRun(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	startWorker(t, "--source", workerSource(t, p.srcName), "--inbox", "sqlite:"+inbox)
	code, out = dlqctlRun(t, dir, nil, append(src, "redrive", "apply", "p.json", "-o", "json")...)
	if code != 0 {
		t.Fatalf("apply: %d %s", code, out)
	}
	run := parseRun(t, out)
	if run.Status != "completed" || run.Moved != n || run.passed() != n {
		t.Fatalf("run: %+v\n%s", run, out)
	}
	if got := count(t, ctx, p.dlq); got != 0 {
		t.Fatalf("%d left in the DLQ", got)
	}
	rows := readInbox(t, inbox)
	for _, ev := range evs {
		if r := rows[ev.id]; r.effects != 1 {
			t.Errorf("%s: %d effects, want 1", ev.id, r.effects)
		}
	}
}

// TestE2ECrashMatrix kills dlqctl with SIGKILL right after each kind of
// journal step, then resumes: every event reaches its source queue
// exactly once and the DLQ ends empty (a crash between send and delete
// leaves the messages received by the dead process; the resume waits for
// their visibility to run out and deletes them).
func TestE2ECrashMatrix(t *testing.T) {
	const n = 12
	for _, step := range []string{"intent:1", "published:1", "published:2", "batch-end:1"} {
		t.Run(step, func(t *testing.T) {
			ctx := testCtx(t)
			p := newPair(t, ctx, false, 2)
			var evs []event
			for i := range n {
				evs = append(evs, event{id: fmt.Sprintf("C%02d", i), body: fmt.Sprintf("c-%d", i)})
			}
			send(t, ctx, p.src, evs...)
			deadLetter(t, ctx, p, n)
			dir := t.TempDir()
			src := []string{"--source", p.sourceURL()}
			if code, out := dlqctlRun(t, dir, nil, append(src, "redrive", "plan", "--reason", "crash test", "--allow-disposition", "investigate",
				"--rate", "100000", "--burst", "4", "--ramp", "5,10", "--settle", "0s", "--unverified-ok", "--out", "p.json")...); code != 0 {
				t.Fatalf("plan: %d %s", code, out)
			}
			if code, out := dlqctlRun(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
				t.Fatalf("approve: %d %s", code, out)
			}
			code, out := dlqctlRun(t, dir, []string{"DLQCTL_TEST_CRASH=" + step}, append(src, "redrive", "apply", "p.json")...)
			if code != 137 {
				t.Fatalf("apply did not crash at %s: exit %d\n%s", step, code, out)
			}
			code, out = dlqctlRun(t, dir, nil, append(src, "redrive", "resume", "p.journal", "-o", "json")...)
			if code != 0 {
				t.Fatalf("resume: exit %d\n%s", code, out)
			}
			if run := parseRun(t, out); run.Status != "completed" || run.Moved != n {
				t.Fatalf("after resume: %+v", run)
			}
			seen := map[string]int{}
			for _, m := range drain(t, ctx, p.src) {
				seen[aws.ToString(m.MessageAttributes["event_id"].StringValue)]++
			}
			for _, ev := range evs {
				if seen[ev.id] != 1 {
					t.Errorf("%s reached the source %d times", ev.id, seen[ev.id])
				}
			}
			if got := count(t, ctx, p.dlq); got != 0 {
				t.Errorf("%d left in the DLQ", got)
			}
		})
	}
}

// TestE2EServerRestartDuringApply stops the server while a redrive runs:
// apply fails with exit 1 and names the resume command; once the server is
// back, resume completes, the DLQ is empty and every event is on its
// source queue (an event whose send's outcome was unknown may be there
// twice, and is then journaled ambiguous).
func TestE2EServerRestartDuringApply(t *testing.T) {
	server := sqsServer(t)
	ctx := testCtx(t)
	p := newPair(t, ctx, false, 2)
	const n = 40
	var evs []event
	for i := range n {
		evs = append(evs, event{id: fmt.Sprintf("R%02d", i), body: fmt.Sprintf("r-%d", i)})
	}
	send(t, ctx, p.src, evs...)
	deadLetter(t, ctx, p, n)
	dir := t.TempDir()
	src := []string{"--source", p.sourceURL()}
	if code, out := dlqctlRun(t, dir, nil, append(src, "redrive", "plan", "--reason", "restart test", "--allow-disposition", "investigate",
		"--rate", "10", "--burst", "2", "--ramp", "40", "--settle", "0s", "--unverified-ok", "--out", "p.json")...); code != 0 {
		t.Fatalf("plan: %d %s", code, out)
	}
	if code, out := dlqctlRun(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall"); code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := dlqctlRun(t, dir, nil, append(src, "redrive", "apply", "p.json")...)
		done <- result{code, out}
	}()
	// Let a few chunks through, then take the server away.
	deadline := time.Now().Add(30 * time.Second)
	for count(t, ctx, p.src) < 6 {
		if time.Now().After(deadline) {
			t.Fatal("no progress before the restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := server.Down(); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("apply did not stop while the server was down")
	}
	if err := server.Up(); err != nil {
		t.Fatal(err)
	}
	if r.code != 1 || !strings.Contains(r.out, "redrive resume") {
		t.Fatalf("apply with the server gone: exit %d, want 1 and the resume command\n%s", r.code, r.out)
	}
	code, out := dlqctlRun(t, dir, nil, append(src, "redrive", "resume", "p.journal", "-o", "json")...)
	if code != 0 {
		t.Fatalf("resume: %d %s", code, out)
	}
	if run := parseRun(t, out); run.Status != "completed" || run.Moved != n {
		t.Fatalf("after resume: %+v", run)
	}
	if got := count(t, ctx, p.dlq); got != 0 {
		t.Fatalf("%d left in the DLQ", got)
	}
	journal, err := os.ReadFile(filepath.Join(dir, "p.journal"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range drain(t, ctx, p.src) {
		seen[aws.ToString(m.MessageAttributes["event_id"].StringValue)]++
	}
	for _, ev := range evs {
		switch c := seen[ev.id]; {
		case c == 0:
			t.Errorf("%s lost", ev.id)
		case c > 1 && !ambiguous(journal, ev.id):
			t.Errorf("%s on the source %d times without an ambiguous journal record", ev.id, c)
		}
	}
}

// ambiguous: the journal has an ambiguous record for this event.
func ambiguous(journal []byte, eventID string) bool {
	for _, line := range bytes.Split(journal, []byte("\n")) {
		var r struct {
			Type    string `json:"type"`
			EventID string `json:"event_id"`
		}
		if json.Unmarshal(line, &r) == nil && r.Type == "ambiguous" && r.EventID == eventID {
			return true
		}
	}
	return false
}
