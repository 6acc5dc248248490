package cmd

import (
	"bytes"
	"context"
	"fmt"
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
	streams := &IOStreams{In: tty, Out: tty, ErrOut: tty, InTTY: true, OutTTY: true, ErrTTY: true, Width: w, ErrWidth: w, Height: h}
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
// the room. On 80 columns that room is narrow, so an error wraps in its
// cell rather than being cut: schema errors that differ only at their end
// read apart, and a malformed entry shows why it is malformed, first, as
// well as its own last error.
func TestEightyColumnsListOneCategory(t *testing.T) {
	src := incidentSource(t)
	screen, code := onTerminal(t, 80, nil, "--source", src, "--no-color", "list", "--category", "transient", "--limit", "3")
	if code != 0 {
		t.Fatalf("list exit %d:\n%s", code, screen)
	}
	if strings.Contains(screen, "CATEGORY") || !regexp.MustCompile(`│ psp: 503 Service +│\n.*│ Unavailable: upstream +│`).MatchString(screen) {
		t.Errorf("list --category keeps its category column or starves the error:\n%s", screen)
	}
	cell := func(screen string) string { // the ERROR cells' text, joined
		var b strings.Builder
		for _, m := range regexp.MustCompile(`(?m)│ ([^│]*?) *│$`).FindAllStringSubmatch(screen, -1) {
			b.WriteString(m[1] + " ")
		}
		return b.String()
	}
	screen, code = onTerminal(t, 80, nil, "--source", src, "--no-color", "list", "--category", "schema", "--limit", "0")
	if code != 0 {
		t.Fatalf("list exit %d:\n%s", code, screen)
	}
	for _, want := range []string{`deserialize ShipmentRequested: missing field "weightGrams"`,
		`json: cannot unmarshal string into Go struct field Order.amount of type int`,
		`validate order: required field "currency" is missing`} {
		if !strings.Contains(cell(screen), want) {
			t.Errorf("at 80 columns the schema errors lose %q:\n%s", want, screen)
		}
	}
	screen, code = onTerminal(t, 80, nil, "--source", src, "--no-color", "list", "--category", "malformed")
	if code != 0 {
		t.Fatalf("list exit %d:\n%s", code, screen)
	}
	if !strings.Contains(cell(screen), "(malformed: no event_id) capture payment: context deadline exceeded") {
		t.Errorf("at 80 columns a malformed entry hides why it is malformed:\n%s", screen)
	}
	for _, line := range strings.Split(screen, "\n") {
		if w := lipgloss.Width(line); w > 80 {
			t.Errorf("line is %d columns wide: %q", w, line)
		}
	}
	screen, code = onTerminal(t, 200, nil, "--source", src, "--no-color", "list", "--category", "malformed")
	if code != 0 {
		t.Fatalf("list exit %d:\n%s", code, screen)
	}
	if !regexp.MustCompile(`│ 20261129T082640Z-0014 .*│ payments +│ \(malformed: no event_id\) capture payment: context deadline exceeded +│`).MatchString(screen) {
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

// TestShowRedactsEverywhere: show hides personal data in every format —
// on a terminal, piped (an operator piping show into a ticket), in JSON
// and in markdown — unless --reveal, which shows it whole everywhere. What
// is not personal (an item's name, a product) is shown.
func TestShowRedactsEverywhere(t *testing.T) {
	src := incidentSource(t)
	const email, holder = "noah.dubois@example.com", "Noah Dubois"
	screen, code := onTerminal(t, 80, nil, "--source", src, "--no-color", "show", "20261129T082640Z-0014")
	if code != 0 || strings.Contains(screen, email) || strings.Contains(screen, holder) || !strings.Contains(screen, `"email": "[redacted]"`) ||
		!strings.Contains(screen, "--reveal") {
		t.Errorf("show on a terminal (exit %d) did not redact, or did not say how to reveal:\n%s", code, screen)
	}
	screen, _ = onTerminal(t, 80, nil, "--source", src, "--no-color", "show", "20261129T082640Z-0014", "--reveal")
	if !strings.Contains(screen, email) {
		t.Errorf("show --reveal hid the payload:\n%s", screen)
	}
	for _, format := range []string{"table", "json", "markdown"} {
		out, _, _ := run(t, nil, "--source", src, "-o", format, "show", "20261129T082640Z-0014")
		if strings.Contains(out, email) || strings.Contains(out, holder) || !strings.Contains(out, "[redacted]") {
			t.Errorf("piped show -o %s leaks personal data:\n%s", format, out)
		}
		out, _, _ = run(t, nil, "--source", src, "-o", format, "show", "20261129T082640Z-0014", "--reveal")
		if !strings.Contains(out, email) {
			t.Errorf("piped show -o %s --reveal hid the payload:\n%s", format, out)
		}
	}
	out, _, _ := run(t, nil, "--source", src, "-o", "json", "--jq", "[.payload_redacted, .envelope.fingerprint]", "show", "20261129T082640Z-0014")
	if !strings.Contains(out, "true") || !strings.Contains(out, "sha256:") {
		t.Errorf("show -o json does not say that it redacted, or lost the stored fingerprint:\n%s", out)
	}
	// An order's items and its customer: the item names are shown, the
	// customer's name is not.
	out, _, _ = run(t, nil, "--source", src, "-o", "json", "--jq", ".envelope.payload", "show", "20261129T083821Z-0027")
	if !strings.Contains(out, `"name":"[redacted]"`) || !regexp.MustCompile(`"items":\[\{[^]]*"name":"[^[]`).MatchString(out) {
		t.Errorf("show redacts what is no one's, or shows a customer's name:\n%s", out)
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
// trips the re-dead-lettered gate; on an 80-column terminal its row keeps
// the gate under GATE, its verdicts are whole on the line below, and the
// explanation and the halt's advice are wrapped to the terminal, while
// each command it prints stays one line to copy.
func TestTrippedGateOnEightyColumns(t *testing.T) {
	root := smallDLQ(t, 4)
	screen, code := trippedOnEighty(t, root, filepath.Join(root, "p.json"))
	if code != ExitGate {
		t.Fatalf("exit %d, want %d:\n%s", code, ExitGate, screen)
	}
	batchTableFits(t, screen, 80)
	if !regexp.MustCompile(`(?m)^BATCH +SIZE +MOVED +ATTEMPTS +EFFECTS +UNIQUE +DLQ +GATE$`).MatchString(screen) ||
		!regexp.MustCompile(`(?m)^    1     2      2 .* re-dead-lettered$`).MatchString(screen) ||
		!regexp.MustCompile(`(?m)^ +verdicts: re-dead-lettered=1 unverified=1$`).MatchString(screen) {
		t.Errorf("the tripped gate's row or its verdicts are cut or out of line:\n%s", screen)
	}
	shown := ansiEscape.ReplaceAllString(screen, "")
	column := func(line, s string) int { return lipgloss.Width(line[:strings.Index(line, s)]) }
	header := regexp.MustCompile(`(?m)^BATCH .*$`).FindString(shown)
	row := regexp.MustCompile(`(?m)^    1 .*re-dead-lettered$`).FindString(shown)
	if row == "" || column(row, "re-dead-lettered") != column(header, "GATE") {
		t.Errorf("the tripped gate is not under GATE:\n%s", shown)
	}
	var commands int
	for _, line := range strings.Split(shown, "\n") {
		line = line[strings.LastIndex(line, "\r")+1:]
		if strings.HasPrefix(strings.TrimLeft(line, " "), "dlqctl ") {
			commands++ // a command to copy: one line, whatever its width
			continue
		}
		if strings.HasPrefix(line, "run ") && strings.Contains(line, ", journal ") {
			continue // apply's start line, written before the run (not a halt's)
		}
		if w := lipgloss.Width(line); w > 80 {
			t.Errorf("a line of prose is %d columns wide on an 80-column terminal: %q", w, line)
		}
	}
	if commands == 0 || !strings.Contains(shown, "batch 1 stopped by the re-dead-lettered gate") ||
		!strings.Contains(shown, "dlqctl: stopped by the re-dead-lettered gate") {
		t.Errorf("the halt lost its explanation or its commands:\n%s", shown)
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

// conflictedDLQ is a dir DLQ of n entries in which each of the first
// conflicts event IDs has two entries with different payloads.
func conflictedDLQ(t *testing.T, n, conflicts int) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"error", "inbox"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		event := i
		if i < 2*conflicts {
			event = i / 2
		}
		e := fmt.Sprintf(`{"schema":"dlqctl.envelope/v1","id":"e%05d","event_id":"evt-%05d","origin":{"backend":"dir","topic":"payments"},`+
			`"dead_lettered_at":"2026-11-29T08:00:00Z","last_error":"timeout calling payments","payload":{"n":%d}}`, i, event, i)
		if err := os.WriteFile(filepath.Join(root, "error", fmt.Sprintf("e%05d.json", i)), []byte(e), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return "dir:" + root
}

// TestStatsOnALargeConflictedDLQ: stats on a terminal shows how far it has
// read a large DLQ while it reads (on stderr, gone before the report), and
// names a few of its 360 conflicting event IDs rather than every one
// ahead of the report; -o json lists them all.
func TestStatsOnALargeConflictedDLQ(t *testing.T) {
	src := conflictedDLQ(t, 2400, 360)
	screen, code := onTerminal(t, 80, nil, "--no-color", "--source", src, "stats")
	if code != 0 {
		t.Fatalf("stats exit %d:\n%s", code, screen)
	}
	for _, want := range []string{"\rreading the DLQ: 1,000 of 2,400 entries", "\rreading the DLQ: 2,000 of 2,400 entries",
		"\rconflicts found, reading again: 2,000 of 2,400 entries"} {
		if !strings.Contains(screen, want) {
			t.Errorf("no progress %q on the terminal:\n%q", want, screen[:min(len(screen), 600)])
		}
	}
	if !regexp.MustCompile(`\r\x1b\[KDLQ `).MatchString(screen) {
		t.Errorf("the progress line is not cleared before the report:\n%q", screen[:min(len(screen), 600)])
	}
	joined := strings.Join(strings.Fields(screen), " ")
	if !strings.Contains(joined, " conflicts 360: evt-00000, evt-00001, evt-00002, evt-00003, evt-00004 … and 355 more (-o json lists them all) malformed ") {
		t.Errorf("the conflicts line is not the first few and a count:\n%s", screen)
	}
	if head := screen[:strings.Index(screen, "By category")]; strings.Count(head, "\n") > 20 {
		t.Errorf("%d lines before the counts by category:\n%s", strings.Count(head, "\n"), head)
	}
	out, _, code := run(t, nil, "--source", src, "stats", "-o", "json", "--jq", ".conflict_event_ids | length")
	if code != 0 || strings.TrimSpace(out) != "360" {
		t.Errorf("-o json lists %s conflicting event IDs (exit %d), want all 360", out, code)
	}
}

// TestWatchLabelsDaysByTheirDay: a timeline of whole days counts each day's
// dead letters under that day's label: the seven of 11-29 under 11-29, not
// in a rolling 24 hours labelled 11-28 because it began the day before.
func TestWatchLabelsDaysByTheirDay(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"error", "inbox"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var times []time.Time
	for day := 11; day <= 28; day++ {
		times = append(times, time.Date(2026, 11, day, 10, 0, 0, 0, time.UTC))
	}
	times = append(times, time.Date(2026, 11, 28, 20, 0, 0, 0, time.UTC), time.Date(2026, 11, 28, 20, 30, 0, 0, time.UTC))
	for i := range 7 {
		times = append(times, time.Date(2026, 11, 29, 8, 10*i, 0, 0, time.UTC))
	}
	for i, at := range times {
		e := fmt.Sprintf(`{"schema":"dlqctl.envelope/v1","id":"e%03d","event_id":"evt-%03d","dead_lettered_at":%q,"last_error":"timeout","payload":{}}`,
			i, i, at.Format(time.RFC3339))
		if err := os.WriteFile(filepath.Join(root, "error", fmt.Sprintf("e%03d.json", i)), []byte(e), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	screen, code := onScreen(t, 80, 60, nil, "--no-color", "--source", "dir:"+root, "stats", "--watch", "--count", "1")
	if code != 0 {
		t.Fatalf("stats --watch exit %d:\n%s", code, screen)
	}
	for _, want := range []string{`(?m)^Dead letters per 1d$`, `(?m)^11-29 +█+ 7$`, `(?m)^11-28 +█+ 3$`, `(?m)^11-11 +█+ 1$`} {
		if !regexp.MustCompile(want).MatchString(screen) {
			t.Errorf("the timeline lacks %s:\n%s", want, screen)
		}
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
