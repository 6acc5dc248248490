package cmd

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/creack/pty"
	"golang.org/x/term"
)

// onTerminal runs one command line with stdout and stderr on a real
// pseudo-terminal of the given width, as an operator's terminal would be,
// and returns what the terminal received.
func onTerminal(t *testing.T, cols int, env map[string]string, args ...string) (string, int) {
	t.Helper()
	return onScreen(t, cols, 60, env, args...)
}

// onScreen is onTerminal on a screen of cols×rows.
func onScreen(t *testing.T, cols, rows int, env map[string]string, args ...string) (string, int) {
	t.Helper()
	return onScreenAt(t, cols, rows, func() time.Time { return testNow }, env, args...)
}

// onScreenAt is onScreen with the clock now: a run that waits for a batch
// to settle needs one that moves.
func onScreenAt(t *testing.T, cols, rows int, now func() time.Time, env map[string]string, args ...string) (string, int) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pty: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		t.Fatal(err)
	}
	w, h, err := term.GetSize(int(tty.Fd()))
	if err != nil || w != cols {
		t.Fatalf("pty width = %d, %v; want %d", w, err, cols)
	}
	var screen bytes.Buffer
	done := make(chan struct{})
	go func() {
		io.Copy(&screen, ptmx) // ends with EIO once tty is closed
		close(done)
	}()
	streams := &IOStreams{In: tty, Out: tty, ErrOut: tty, InTTY: true, OutTTY: true, ErrTTY: true, Width: w, Height: h}
	f := &Factory{Deps: Deps{Backends: testBackends(), IO: streams, Now: now, Getenv: func(k string) string { return env[k] }}}
	code := Execute(context.Background(), f, args)
	tty.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the pty did not drain")
	}
	// The terminal turns \n into \r\n.
	return strings.ReplaceAll(screen.String(), "\r\n", "\n"), code
}

var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[a-zA-Z]`)

// TestEightyColumnsKeepIDsWhole draws list and categorize on an 80-column
// terminal, checks that every line fits, and copies an ID from the screen
// into show, which must find it. At 80 columns their errors would be cut to
// a few characters in a table, so each entry and category is a block of
// its own, errors and rules readable.
func TestEightyColumnsKeepIDsWhole(t *testing.T) {
	src := incidentSource(t)
	screen, code := onTerminal(t, 80, nil, "--source", src, "list", "--limit", "8")
	if code != 0 {
		t.Fatalf("list exit %d:\n%s", code, screen)
	}
	var ids []string
	rowID := regexp.MustCompile(`^ID +(\S+)$`)
	plain := ansiEscape.ReplaceAllString(screen, "")
	for _, line := range strings.Split(plain, "\n") {
		if w := lipgloss.Width(line); w > 80 {
			t.Errorf("line is %d columns wide on an 80-column terminal: %q", w, line)
		}
		if m := rowID.FindStringSubmatch(line); m != nil {
			if strings.Contains(m[1], "…") {
				t.Errorf("an ID was cut: %q", line)
			}
			ids = append(ids, m[1])
		}
	}
	if len(ids) != 8 {
		t.Fatalf("found %d blocks with an ID on the screen, want 8:\n%s", len(ids), screen)
	}
	if !strings.Contains(plain, "ERROR     referenced customer purged by GDPR job\n") {
		t.Errorf("list at 80 columns cut an error:\n%s", plain)
	}
	out, errOut, code := run(t, nil, "--source", src, "show", ids[3])
	if code != 0 || !strings.Contains(out, ids[3]) {
		t.Fatalf("show %s (copied from the screen): exit %d\n%s%s", ids[3], code, out, errOut)
	}

	for _, args := range [][]string{{"categorize"}, {"categorize", "--explain"}, {"sample"}} {
		screen, code = onTerminal(t, 80, nil, append([]string{"--source", src}, args...)...)
		if code != 0 {
			t.Fatalf("%v exit %d:\n%s", args, code, screen)
		}
		plain = ansiEscape.ReplaceAllString(screen, "")
		// Without --explain, categorize's example errors keep 20 columns:
		// still a table.
		wants := []string{"│ missing-reference │", "│ referenced customer… │"}
		switch {
		case len(args) > 1:
			wants = []string{"CATEGORY       missing-reference", "DISPOSITION    fix-then-redrive",
				"EXAMPLE ERROR  referenced customer purged by GDPR job", "RULES          conflict=6"}
		case args[0] == "sample":
			wants = []string{"CATEGORY  missing-reference", "[redacted]"}
			if !regexp.MustCompile(`(?m)^ERROR     \S+ \S+ \S+`).MatchString(plain) {
				t.Errorf("sample at 80 columns shows no usable error:\n%s", plain)
			}
		}
		for _, want := range wants {
			if !strings.Contains(plain, want) {
				t.Errorf("%v at 80 columns lacks %q:\n%s", args, want, plain)
			}
		}
		for _, line := range strings.Split(plain, "\n") {
			if w := lipgloss.Width(line); w > 80 {
				t.Errorf("%v line is %d columns wide: %q", args, w, line)
			}
		}
	}
}

// TestEightyColumnsListOneCategory: with --category the category column
// would repeat the filter on every row; it is left out and the error gets
// the room. A malformed entry shows its own last error and why it is
// malformed.
func TestEightyColumnsListOneCategory(t *testing.T) {
	src := incidentSource(t)
	screen, code := onTerminal(t, 80, nil, "--source", src, "--no-color", "list", "--category", "transient", "--limit", "3")
	if code != 0 {
		t.Fatalf("list exit %d:\n%s", code, screen)
	}
	if strings.Contains(screen, "CATEGORY") || !regexp.MustCompile(`│ psp: 503 Service Unavail…? +│`).MatchString(screen) {
		t.Errorf("list --category keeps its category column or starves the error:\n%s", screen)
	}
	screen, code = onTerminal(t, 200, nil, "--source", src, "--no-color", "list", "--category", "malformed")
	if code != 0 {
		t.Fatalf("list exit %d:\n%s", code, screen)
	}
	if !regexp.MustCompile(`│ 20261129T082640Z-0014 .*│ payments +│ capture payment: context deadline exceeded \(malformed: no event_id\) +│`).MatchString(screen) {
		t.Errorf("a malformed entry hides its origin or last error:\n%s", screen)
	}
}

// TestColourObeysNoColor checks the real terminal path: dispositions are
// coloured, and a non-empty NO_COLOR or --no-color removes every escape.
func TestColourObeysNoColor(t *testing.T) {
	src := incidentSource(t)
	// lipgloss reads TERM from the process environment.
	t.Setenv("TERM", "xterm-256color")
	t.Setenv("CI", "") // termenv takes a set CI for "not a terminal"
	t.Setenv("NO_COLOR", "")
	screen, _ := onTerminal(t, 120, nil, "--source", src, "categorize")
	if !strings.Contains(screen, "\x1b[32m") {
		t.Fatalf("the redrive disposition is not green on a colour terminal: %q", screen)
	}
	for _, args := range [][]string{{"--no-color"}, {}} {
		e := map[string]string{"NO_COLOR": "1"}
		if len(args) > 0 {
			e = nil
		}
		screen, _ := onTerminal(t, 120, e, append([]string{"--source", src, "categorize"}, args...)...)
		if strings.Contains(screen, "\x1b[") {
			t.Errorf("%v %v: escapes on the screen: %q", e, args, screen)
		}
	}
}

// TestRunOnEightyColumns applies a small plan on an 80-column terminal: the
// progress bar shows the batch and position, and the batch table and the
// summary fit.
func TestRunOnEightyColumns(t *testing.T) {
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
	if _, errOut, code := run(t, env, "--source", src, "redrive", "plan", "--category", "transient", "--max", "12",
		"--ramp", "5", "--settle", "0s", "--reason", "r", "--out", plan); code != 0 {
		t.Fatalf("plan: %s", errOut)
	}
	if _, errOut, code := run(t, env, "redrive", "approve", plan, "--by", "bob"); code != 0 {
		t.Fatalf("approve: %s", errOut)
	}
	screen, code := onTerminal(t, 80, env, "--source", src, "--no-color", "redrive", "apply", plan)
	if code != 0 {
		t.Fatalf("apply exit %d:\n%s", code, screen)
	}
	for _, want := range []string{"batch 1 [", "batch 3 [", "12/12", "BATCH  SIZE  MOVED", "Redrive complete! 12 moved, 0 remaining"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%q", want, screen)
		}
	}
	batchTableFits(t, screen, 80)
}

// TestShowPrettyPrintsOnATerminal: a JSON payload is indented, one field a
// line, and the ids are whole.
func TestShowPrettyPrintsOnATerminal(t *testing.T) {
	screen, code := onTerminal(t, 80, nil, "--source", incidentSource(t), "--no-color", "show", "20261129T083821Z-0027")
	if code != 0 {
		t.Fatalf("show exit %d:\n%s", code, screen)
	}
	for _, want := range []string{"20261129T083821Z-0027", "differs: currency"} {
		if !strings.Contains(screen, want) {
			t.Errorf("show on a terminal lacks %q:\n%s", want, screen)
		}
	}
	if !regexp.MustCompile(`(?m)^ {20,}  "eventType": "OrderPlaced",$`).MatchString(screen) {
		t.Errorf("the payload is not indented one field a line:\n%s", screen)
	}
}

// TestShowRedactsForPeople: show hides personal data on a terminal and in
// markdown (a ticket) unless --reveal; piped tables and JSON, which scripts
// read, carry the payload whole.
func TestShowRedactsForPeople(t *testing.T) {
	src := incidentSource(t)
	const email = "noah.dubois@example.com"
	screen, code := onTerminal(t, 80, nil, "--source", src, "--no-color", "show", "20261129T082640Z-0014")
	if code != 0 || strings.Contains(screen, email) || !strings.Contains(screen, `"email": "[redacted]"`) ||
		!strings.Contains(screen, "--reveal") {
		t.Errorf("show on a terminal (exit %d) did not redact, or did not say how to reveal:\n%s", code, screen)
	}
	screen, _ = onTerminal(t, 80, nil, "--source", src, "--no-color", "show", "20261129T082640Z-0014", "--reveal")
	if !strings.Contains(screen, email) {
		t.Errorf("show --reveal hid the payload:\n%s", screen)
	}
	out, _, _ := run(t, nil, "--source", src, "-o", "markdown", "show", "20261129T082640Z-0014")
	if strings.Contains(out, email) || !strings.Contains(out, "[redacted]") {
		t.Errorf("show -o markdown did not redact:\n%s", out)
	}
	for _, format := range []string{"table", "json"} {
		out, _, _ = run(t, nil, "--source", src, "-o", format, "show", "20261129T082640Z-0014")
		if !strings.Contains(out, email) {
			t.Errorf("piped show -o %s redacted what a script reads:\n%s", format, out)
		}
	}
	// A conflict's differing personal field is named, its values hidden.
	screen, _ = onTerminal(t, 120, nil, "--source", src, "--no-color", "show", "20261129T083821Z-0027")
	if !strings.Contains(screen, "differs: currency") {
		t.Errorf("show of a conflict lost its diff:\n%s", screen)
	}
}

// TestPlanLeftOutAtEightyColumns: a plan's left-out entries name the older
// entry that holds each back, whole, at 80 columns: it is the entry to act
// on next.
func TestPlanLeftOutAtEightyColumns(t *testing.T) {
	src := incidentSource(t)
	plan := filepath.Join(t.TempDir(), "p.json")
	env := map[string]string{"DLQCTL_APPROVAL_KEY": "test-approval-key-0123456789abcdef"}
	if _, errOut, code := run(t, env, "--source", src, "redrive", "plan", "--category", "transient", "--reason", "r", "--out", plan); code != 0 {
		t.Fatalf("plan: %s", errOut)
	}
	screen, code := onTerminal(t, 80, env, "--no-color", "redrive", "show", plan)
	if code != 0 {
		t.Fatalf("redrive show exit %d:\n%s", code, screen)
	}
	if !regexp.MustCompile(`(?m)^HELD BY   20261129T\d{6}Z-\d{4}$`).MatchString(screen) {
		t.Errorf("the entry holding one back is not shown whole:\n%s", screen)
	}
	// The digest is too wide for its column: whole, on a line of its own.
	if !regexp.MustCompile(`(?m)^digest\n(sha256:[0-9a-f]{64})$`).MatchString(screen) {
		t.Errorf("the plan's digest is not whole on a line of its own:\n%s", screen)
	}
	for _, line := range strings.Split(screen, "\n") {
		if w := lipgloss.Width(line); w > 80 {
			t.Errorf("line is %d columns wide: %q", w, line)
		}
	}
}

// TestWatchFitsTheScreen: stats --watch repaints an 80×24 screen without
// scrolling its header (total, change, growth) off the top.
func TestWatchFitsTheScreen(t *testing.T) {
	screen, code := onScreen(t, 80, 24, nil, "--source", incidentSource(t), "--no-color", "stats", "--watch", "--count", "1")
	if code != 0 {
		t.Fatalf("stats --watch exit %d:\n%s", code, screen)
	}
	view := screen[strings.LastIndex(screen, "\x1b[2J")+len("\x1b[2J"):]
	lines := strings.Split(strings.TrimSuffix(view, "\n"), "\n")
	if len(lines) > 23 {
		t.Errorf("the view is %d lines on a 24-line screen (the cursor needs the last):\n%s", len(lines), view)
	}
	for _, want := range []string{"total", "change", "growth", "Dead letters per"} {
		if !strings.Contains(view, want) {
			t.Errorf("the view lacks %q:\n%s", want, view)
		}
	}
	for _, l := range lines {
		if w := lipgloss.Width(l); w > 80 {
			t.Errorf("line is %d columns wide: %q", w, l)
		}
	}
}

// TestHelpWrapsToTheTerminal: flag descriptions wrap to the terminal's
// width, lined up under their column, and redrive plan's --limit and --max
// say how they differ.
func TestHelpWrapsToTheTerminal(t *testing.T) {
	for _, cols := range []int{80, 100} {
		screen, code := onTerminal(t, cols, nil, "redrive", "plan", "--help")
		if code != 0 {
			t.Fatalf("help exit %d:\n%s", code, screen)
		}
		flags := screen[strings.Index(screen, "\nFlags:"):]
		for _, line := range strings.Split(flags, "\n") {
			if w := lipgloss.Width(line); w > cols {
				t.Errorf("a flag line is %d columns wide on %d columns: %q", w, cols, line)
			}
		}
		joined := strings.Join(strings.Fields(flags), " ")
		if !strings.Contains(joined, "use --max") || !strings.Contains(joined, "left-out entries do not count") {
			t.Errorf("--limit and --max do not say how they differ:\n%s", screen)
		}
	}
}

// TestResumedBarCountsFromTheTotalMoved: a run stopped in the middle of a
// batch and resumed on a terminal shows its bar from the total moved so
// far, not from the start of the batch.
func TestResumedBarCountsFromTheTotalMoved(t *testing.T) {
	root := smallDLQ(t, 8)
	plan := filepath.Join(root, "p.json")
	io, _, out, errOut := TestIO()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(900*time.Millisecond, cancel)
	f := &Factory{Deps: Deps{Backends: testBackends(), IO: io, Now: time.Now, Getenv: func(string) string { return "" }}}
	code := Execute(ctx, f, []string{"--source", "dir:" + root, "redrive", "--category", "transient", "--ramp", "8",
		"--rate", "4", "--burst", "1", "--settle", "0s", "--reason", "r", "--yes", "--out", plan})
	if code != ExitInterrupted {
		t.Fatalf("exit %d, want %d:\n%s%s", code, ExitInterrupted, out, errOut)
	}
	moved, _ := filepath.Glob(filepath.Join(root, "inbox", "*"))
	if len(moved) == 0 || len(moved) >= 7 {
		t.Skipf("the stop came at a batch's edge (%d moved): nothing to resume mid-batch", len(moved))
	}
	screen, code := onTerminal(t, 80, nil, "--no-color", "redrive", "resume", strings.TrimSuffix(plan, ".json")+".journal", "--yes")
	if code != 0 {
		t.Fatalf("resume exit %d:\n%s", code, screen)
	}
	bars := regexp.MustCompile(`\] (\d+)/\d+`).FindAllStringSubmatch(screen, -1)
	if len(bars) == 0 {
		t.Fatalf("no progress bar on the terminal:\n%q", screen)
	}
	if first, _ := strconv.Atoi(bars[0][1]); first <= len(moved) {
		t.Errorf("the resumed bar starts at %d with %d already moved:\n%q", first, len(moved), screen)
	}
}

// TestTrippedGateOnEightyColumns: a batch whose event came back to the DLQ
// trips the re-dead-lettered gate; on an 80-column terminal its row is not
// wrapped mid-word and its verdicts are whole.
func TestTrippedGateOnEightyColumns(t *testing.T) {
	root := smallDLQ(t, 4)
	screen, code := trippedOnEighty(t, root, filepath.Join(root, "p.json"))
	if code != ExitGate {
		t.Fatalf("exit %d, want %d:\n%s", code, ExitGate, screen)
	}
	batchTableFits(t, screen, 80)
	if !regexp.MustCompile(`(?m)^    1     2      2 .* re-dead-lettered\s*$`).MatchString(screen) ||
		!regexp.MustCompile(`(?m)^ +re-dead-lettered=1 unverified=1$`).MatchString(screen) {
		t.Errorf("the tripped gate's row or its verdicts are cut or wrapped:\n%s", screen)
	}
}

// trippedOnEighty runs the one-step redrive of the transients of
// smallDLQ root on an 80-column terminal in batches of 2, its plan at
// plan, and puts the first moved entry back into the DLQ while the batch
// settles: the re-dead-lettered gate trips in batch 1.
func trippedOnEighty(t *testing.T, root, plan string) (string, int) {
	t.Helper()
	time.AfterFunc(600*time.Millisecond, func() {
		moved, _ := filepath.Glob(filepath.Join(root, "inbox", "*"))
		if len(moved) > 0 {
			b, _ := os.ReadFile(moved[0])
			os.WriteFile(filepath.Join(root, "error", "29991231T000000Z-0001.json"), b, 0o644)
		}
	})
	return onScreenAt(t, 80, 60, time.Now, nil, "--no-color", "--source", "dir:"+root, "redrive", "--category", "transient",
		"--ramp", "2", "--unverified-ok", "--rate", "0", "--settle", "3s", "--reason", "r", "--yes", "--out", plan)
}

// batchTableFits checks the batch table on a screen: from its header to
// the blank line after it, no line is wider than cols. (Log lines with a
// long temporary path may wrap; the table must not.)
func batchTableFits(t *testing.T, screen string, cols int) {
	t.Helper()
	inTable := false
	for _, line := range strings.Split(screen, "\n") {
		// What the terminal shows of a line is what follows its last \r.
		shown := ansiEscape.ReplaceAllString(line[strings.LastIndex(line, "\r")+1:], "")
		if strings.HasPrefix(shown, "BATCH") {
			inTable = true
		}
		if shown == "" {
			inTable = false
		}
		if w := lipgloss.Width(shown); inTable && w > cols {
			t.Errorf("batch table line is %d columns wide: %q", w, shown)
		}
	}
}

// TestWideIsBorderlessOnATerminal: -o wide on an 80-column terminal cuts
// nothing and draws no border, so that `less -S` pages its long lines.
func TestWideIsBorderlessOnATerminal(t *testing.T) {
	screen, code := onTerminal(t, 80, nil, "--source", incidentSource(t), "--no-color", "-o", "wide", "list", "--limit", "3")
	if code != 0 {
		t.Fatalf("list -o wide exit %d:\n%s", code, screen)
	}
	if strings.ContainsAny(screen, "│╭─") || strings.Contains(screen, "…") {
		t.Errorf("-o wide drew a border or cut a value:\n%s", screen)
	}
	if !regexp.MustCompile(`(?m)^20261129T081352Z-0003   evt-441aced0e699 .* orders +fraud check rejected order order-99819 \(score 0\.97\)$`).MatchString(screen) {
		t.Errorf("-o wide rows are not whole, aligned columns:\n%s", screen)
	}
}

// TestResumeRowWholeAtEightyColumns: the summary's resume command, with a
// journal path too long for an 80-column terminal, is one line that is
// never wrapped: pasted, it runs.
func TestResumeRowWholeAtEightyColumns(t *testing.T) {
	root := smallDLQ(t, 4)
	plans := filepath.Join(root, "plans-of-the-incident-with-a-long-name", "payments-psp-outage-2026-11-29")
	if err := os.MkdirAll(plans, 0o755); err != nil {
		t.Fatal(err)
	}
	screen, code := trippedOnEighty(t, root, filepath.Join(plans, "p.json"))
	if code != ExitGate {
		t.Fatalf("exit %d, want %d:\n%s", code, ExitGate, screen)
	}
	journal := filepath.Join(plans, "p.journal")
	if !regexp.MustCompile(`(?m)^resume\r?\n` + regexp.QuoteMeta("dlqctl redrive resume "+journal+" --past-gate --yes") + `\r?$`).MatchString(screen) {
		t.Errorf("the resume row is not the whole command on a line of its own:\n%s", screen)
	}
}
