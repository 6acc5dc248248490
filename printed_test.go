package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/internal/workertest"
)

// shellBlock is the block of commands printed after the line that ends
// with intro: the lines that follow it indented by two spaces ("#" notes
// and commands). It fails the test when there is none.
func shellBlock(t *testing.T, out, intro string) string {
	t.Helper()
	i := strings.Index(out, intro+"\n")
	if i < 0 {
		t.Fatalf("no %q followed by commands in:\n%s", intro, out)
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(out[i+len(intro)+1:]))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && strings.HasPrefix(sc.Text(), "  ") {
		lines = append(lines, sc.Text())
	}
	if len(lines) == 0 {
		t.Fatalf("no commands after %q in:\n%s", intro, out)
	}
	return strings.Join(lines, "\n")
}

// runAsPrinted runs a printed block through bash -c in dir, as an
// operator pasting it would: in a shell with none of dlqctl's variables
// but those given (what the block's notes ask for).
func runAsPrinted(t *testing.T, dir, block string, env ...string) (int, string) {
	t.Helper()
	c := exec.Command("bash", "-c", block)
	c.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DLQCTL_") {
			c.Env = append(c.Env, kv)
		}
	}
	c.Env = append(c.Env, env...)
	out, err := c.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// TestPrintedCommandsRunAsPrinted follows what dlqctl prints through a
// halt on a Redis that requires a password: every command that approve,
// the halt, the run summary and the came-back advice print runs as
// printed through bash, with the password only in the variable their
// notes name; the re-plan keeps the plan's flags and takes the event that
// came back as something the plan would not take; and a plan whose run has
// a journal is never replaced.
func TestPrintedCommandsRunAsPrinted(t *testing.T) {
	const pw = "s3cret-Pass"
	srv := redistest.Start(t, "--requirepass", pw)
	src := fmt.Sprintf("redis://:%s@%s/0?stream=orders-dlq", pw, srv.Addr())
	dir := t.TempDir()
	incident, _ := filepath.Abs("testdata/incident")
	if code, out := dlqctlProc(t, dir, nil, "--source", "dir:"+incident, "export", "--out", "incident.ndjson"); code != 0 {
		t.Fatalf("export: %s", out)
	}
	if code, out := dlqctlProc(t, dir, nil, "--source", src, "import", "incident.ndjson"); code != 0 {
		t.Fatalf("import: %s", out)
	}
	inbox := filepath.Join(dir, "inbox.db")
	wargs := []string{"--source", fmt.Sprintf("redis://:%s@%s/0?stream=payments&group=g", pw, srv.Addr()), "--dlq", "orders-dlq", "--inbox", "sqlite:" + inbox}
	workertest.Start(t, append(wargs, "--until-idle", "100ms")...).Wait() // makes the inbox
	code, out := dlqctlProc(t, dir, nil, "--source", src, "redrive", "plan", "--category", "transient", "--origin", "payments", "--max", "12",
		"--reason", "INC-9: payments back", "--effects", "sqlite:"+inbox, "--settle", "3s", "--rate", "500", "--burst", "7", "--ramp", "5,50", "--out", "p.json")
	if code != 0 {
		t.Fatalf("plan: %s", out)
	}
	victim := victimIn(t, dir, 0, 5) // the first batch
	workertest.StartReady(t, append(wargs, "--fail", victim)...)
	env := []string{"DLQCTL_REDIS_PASSWORD=" + pw, "DLQCTL_APPROVAL_KEY=test-approval-key-0123456789abcdef"}

	// approve prints the apply to run next, and what it needs first.
	code, out = dlqctlProc(t, dir, nil, "redrive", "approve", "p.json", "--by", "oncall")
	next := shellBlock(t, out, "next:")
	if code != 0 || !strings.Contains(next, "# set DLQCTL_REDIS_PASSWORD") || strings.Contains(out, pw) {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	code, out = runAsPrinted(t, dir, next, env...)
	if code != 3 || strings.Contains(out, pw) {
		t.Fatalf("the apply approve printed: exit %d, want 3 (the gate)\n%s", code, out)
	}
	goOn := shellBlock(t, out, "approve the plan again and go on:")
	m := regexp.MustCompile(`(?m)^resume\t(.*)$`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(goOn, "\n  "+m[1]) || !strings.Contains(goOn, "# set DLQCTL_REDIS_PASSWORD") {
		t.Errorf("the summary's resume row is not the halt's resume command:\n%s", out)
	}
	code, out = runAsPrinted(t, dir, goOn, env...)
	if code != 0 || strings.Contains(out, pw) {
		t.Fatalf("the approve and resume the halt printed: exit %d\n%s", code, out)
	}
	replan := shellBlock(t, out, "Once the cause is fixed, plan it again:")
	for _, want := range []string{"--category transient --category unknown", "--origin payments", "--event-id " + victim, "--allow-disposition investigate",
		"--ramp 5,50", "--rate 500 --burst 7", "--settle 3s", "--effects sqlite:" + inbox, "--reason 'INC-9: payments back (came back)'", "--out redrive-again-"} {
		if !strings.Contains(replan, want) {
			t.Errorf("the re-plan lacks %q:\n%s", want, replan)
		}
	}
	if !strings.Contains(out, victim+" came back as unknown (disposition investigate), no longer transient") {
		t.Errorf("the advice does not say that the event came back as something else:\n%s", out)
	}
	code, out = runAsPrinted(t, dir, replan, env...)
	if code != 0 || !strings.Contains(out, "plan written to redrive-again-") {
		t.Fatalf("the re-plan as printed: exit %d\n%s", code, out)
	}
	again := regexp.MustCompile(`--out (redrive-again-\S+\.plan\.json)`).FindStringSubmatch(replan)[1]
	var p struct {
		Entries []struct {
			EventID string `json:"event_id"`
		} `json:"entries"`
		Params struct {
			Ramp              []int    `json:"ramp"`
			Burst             int      `json:"burst"`
			AllowDispositions []string `json:"allow_dispositions"`
		} `json:"params"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, again)); err != nil || json.Unmarshal(b, &p) != nil {
		t.Fatalf("read %s: %v", again, err)
	}
	if len(p.Entries) != 1 || p.Entries[0].EventID != victim || !slices.Equal(p.Params.Ramp, []int{5, 50}) || p.Params.Burst != 7 ||
		!slices.Contains(p.Params.AllowDispositions, "investigate") {
		t.Errorf("the re-plan is not the plan's, for the event that came back: %+v", p)
	}

	// The advice printed again names another re-plan file: the first one
	// is there now.
	code, out = runAsPrinted(t, dir, "dlqctl redrive approve p.json --by oncall --again", env...)
	if code != 0 || !strings.Contains(out, "nothing is left to apply or resume") {
		t.Fatalf("approve --again: exit %d\n%s", code, out)
	}
	if second := shellBlock(t, out, "Once the cause is fixed, plan it again:"); strings.Contains(second, "--out "+again) {
		t.Errorf("the advice names %s again:\n%s", again, second)
	}
	// A plan whose run has a journal is never replaced.
	before, _ := os.ReadFile(filepath.Join(dir, "p.json"))
	code, out = dlqctlProc(t, dir, env, "--source", src, "redrive", "plan", "--category", "transient", "--reason", "again", "--out", "p.json")
	after, _ := os.ReadFile(filepath.Join(dir, "p.json"))
	if code != 2 || !strings.Contains(out, "that plan's run has a journal (p.journal)") || string(before) != string(after) {
		t.Errorf("plan --out over a plan with a journal: exit %d\n%s", code, out)
	}
}

// victimIn is an event among the entries from to to of the plan p.json in
// dir whose key no other entry of the incident has: when it comes back,
// no older entry of its key holds it back, so a re-plan can take it.
func victimIn(t *testing.T, dir string, from, to int) string {
	t.Helper()
	var plan struct {
		Entries []struct {
			EventID string `json:"event_id"`
			Key     string `json:"key"`
		} `json:"entries"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "p.json")); err != nil || json.Unmarshal(b, &plan) != nil {
		t.Fatalf("read the plan: %v", err)
	}
	keys := map[string]int{}
	b, err := os.ReadFile(filepath.Join(dir, "incident.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct {
			Key    string `json:"key"`
			Origin struct {
				Topic string `json:"topic"`
			} `json:"origin"`
		}
		json.Unmarshal([]byte(line), &e)
		keys[e.Origin.Topic+"\x00"+e.Key]++
	}
	for _, e := range plan.Entries[from:to] {
		if keys["payments\x00"+e.Key] == 1 {
			return e.EventID
		}
	}
	t.Fatalf("no event of entries %d to %d has a key of its own", from, to)
	return ""
}
