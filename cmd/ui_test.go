package cmd

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"

	"github.com/dlqctl/dlqctl/backends/redis/redistest"
	"github.com/dlqctl/dlqctl/redrive"
)

// ptyScreen is a terminal that dlqctl ui draws on: the pty's other end is
// read into a buffer, and into a terminal emulator because ui redraws only
// the cells that change (a count going from 120 to 125 is drawn as "5").
// Tests search both: the screen as it stands, and what was drawn since the
// last key with the escapes stripped (text drawn and gone again).
type ptyScreen struct {
	t    *testing.T
	ptmx *os.File
	mu   sync.Mutex
	raw  strings.Builder
	vt   *vt.Emulator
	mark int // searches look only after this offset
}

var escapes = regexp.MustCompile(`\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]`)

func (s *ptyScreen) read() {
	buf := make([]byte, 4096)
	for {
		n, err := s.ptmx.Read(buf)
		s.mu.Lock()
		s.raw.Write(buf[:n])
		_, _ = s.vt.Write(buf[:n])
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (s *ptyScreen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	drawn := escapes.ReplaceAllString(s.raw.String()[s.mark:], "")
	if s.raw.Len() == s.mark {
		return drawn // nothing drawn since the last key: the screen is old
	}
	return s.vt.String() + "\n" + drawn
}

// waitFor waits until everything in want has been drawn since the last
// step, and fails with what was drawn when it does not come.
func (s *ptyScreen) waitFor(want ...string) {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		txt := s.text()
		missing := ""
		for _, w := range want {
			if !strings.Contains(txt, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the screen never showed %q; it showed:\n%s", missing, txt)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// drew says whether the raw bytes seq reached the terminal since the last
// press, allowing the pty a moment to pass on the last bytes written.
func (s *ptyScreen) drew(seq string) bool {
	for range 50 {
		s.mu.Lock()
		ok := strings.Contains(s.raw.String()[s.mark:], seq)
		s.mu.Unlock()
		if ok {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// press types keys, after marking the screen so that the next waitFor
// looks only at what they made it draw.
func (s *ptyScreen) press(keys string) {
	s.t.Helper()
	s.mu.Lock()
	s.mark = s.raw.Len()
	s.mu.Unlock()
	// One key at a time, as a person types: a terminal read that holds
	// several runes is taken as one paste.
	for _, r := range keys {
		if _, err := s.ptmx.WriteString(string(r)); err != nil {
			s.t.Fatal(err)
		}
		time.Sleep(15 * time.Millisecond)
	}
}

// startUI runs `dlqctl ARGS` in-process with a real pty as its terminal.
func startUI(t *testing.T, cols, rows uint16, env map[string]string, args ...string) (*ptyScreen, <-chan int) {
	s, done, _ := startUICancel(t, cols, rows, env, args...)
	return s, done
}

// startUICancel is startUI that also returns the command's context's
// cancel, which is what SIGINT or SIGTERM does to a real process.
func startUICancel(t *testing.T, cols, rows uint16, env map[string]string, args ...string) (*ptyScreen, <-chan int, context.CancelFunc) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { ptmx.Close(); tty.Close() })
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: cols, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	s := &ptyScreen{t: t, ptmx: ptmx, vt: vt.NewEmulator(int(cols), int(rows))}
	// The emulator's answers to queries would block it; ui gets none.
	go func() { _, _ = io.Copy(io.Discard, s.vt) }()
	t.Cleanup(func() { s.mu.Lock(); s.vt.Close(); s.mu.Unlock() })
	go s.read()
	io := &IOStreams{In: tty, Out: tty, ErrOut: tty, InTTY: true, OutTTY: true, ErrTTY: true, Width: int(cols)}
	f := &Factory{Deps: Deps{Backends: testBackends(), IO: io, Now: func() time.Time { return testNow }, Getenv: func(k string) string { return env[k] }}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan int, 1)
	go func() { done <- Execute(ctx, f, args) }()
	return s, done, cancel
}

func waitExit(t *testing.T, s *ptyScreen, done <-chan int) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(15 * time.Second):
		t.Fatalf("dlqctl ui did not exit; the screen showed:\n%s", s.text())
	}
	return -1
}

// TestUIOnAPty drives the browser on the sample incident through a real
// pty: the categories with their counts, a category's entries, one
// envelope with its payload redacted and revealed, a plan written, q.
func TestUIOnAPty(t *testing.T) {
	// A colour terminal, so that the NO_COLOR test below is not passing
	// only because the test's environment has no TERM.
	t.Setenv("TERM", "xterm-256color")
	t.Setenv("CI", "") // termenv takes a set CI for "not a terminal"
	t.Setenv("NO_COLOR", "")
	os.Unsetenv("NO_COLOR")
	planDir := t.TempDir()
	s, done := startUI(t, 80, 24, nil, "--source", incidentSource(t), "ui", "--plan-dir", planDir)

	s.waitFor("scan complete: 284 entries read, 284 selected in 8 categories")
	s.waitFor("transient", "125", "missing-reference", "34", "malformed", "8")

	// transient is the largest category: first.
	s.press("\r")
	s.waitFor("categories › transient", "page 1 · entries 1–50 · ] next page")
	s.press("]")
	s.waitFor("page 2 · entries 51–100")
	s.press("[")
	s.waitFor("page 1 · entries 1–50")

	s.press("\r")
	s.waitFor("fingerprint", "(match)", "transient → redrive", "rule")
	s.press("G")
	s.waitFor("payload (personal data hidden; v reveals)")
	s.press("v")
	s.waitFor("payload (revealed; v hides)")
	s.press("\x1b")
	s.waitFor("page 1 · entries 1–50")

	s.press("p")
	s.waitFor("reason:")
	s.press("psp is back up\r")
	s.waitFor("plan written:", "left out")

	s.press("q")
	if code := waitExit(t, s, done); code != 0 {
		t.Fatalf("exit %d, want 0; screen:\n%s", code, s.text())
	}
	if !s.drew("\x1b[?1049l") {
		t.Error("q left the terminal on the alternate screen")
	}
	s.mu.Lock()
	colour := regexp.MustCompile(`\x1b\[[0-9;]*3[0-7]m`).MatchString(s.raw.String())
	s.mu.Unlock()
	if !colour {
		t.Error("no colour was drawn on a colour terminal")
	}

	plans, _ := filepath.Glob(filepath.Join(planDir, "*.plan.json"))
	if len(plans) != 1 {
		t.Fatalf("plans written: %v, want one", plans)
	}
	plan, err := redrive.ReadPlan(plans[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Verify(); err != nil {
		t.Fatalf("the plan does not verify: %v", err)
	}
	if plan.Reason != "psp is back up" || plan.Kind != redrive.KindRedrive {
		t.Errorf("plan reason %q kind %q", plan.Reason, plan.Kind)
	}
	if !slices.Equal(plan.Selectors.Categories, []string{"transient"}) {
		t.Errorf("plan selectors %+v, want the category shown", plan.Selectors)
	}
	if got := plan.Entries.Len() + len(plan.Excluded); got != 125 {
		t.Errorf("plan has %d entries and %d left out; the screen showed 125 transient entries", plan.Entries.Len(), len(plan.Excluded))
	}
	for e := range plan.Entries.All() {
		if e.Category != "transient" {
			t.Errorf("plan entry %s is %s, not transient", e.ID, e.Category)
		}
	}

	// The same planner as redrive plan: the same selection gives the same entries.
	ref := filepath.Join(t.TempDir(), "ref.plan.json")
	if _, stderr, code := run(t, nil, "--source", incidentSource(t), "redrive", "plan", "--category", "transient", "--reason", "psp is back up", "--out", ref); code != 0 {
		t.Fatalf("redrive plan: exit %d: %s", code, stderr)
	}
	want, err := redrive.ReadPlan(ref)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(plan.Entries.Slice()), ids(want.Entries.Slice())) || len(plan.Excluded) != len(want.Excluded) {
		t.Errorf("ui plan entries %v (%d left out), redrive plan %v (%d left out)", ids(plan.Entries.Slice()), len(plan.Excluded), ids(want.Entries.Slice()), len(want.Excluded))
	}
}

func ids(es []redrive.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// TestUIFilterAndNoColor filters by origin on a colourless terminal:
// counts follow the filter and no colour escape is drawn.
func TestUIFilterAndNoColor(t *testing.T) {
	t.Setenv("TERM", "xterm-256color")
	t.Setenv("CI", "") // termenv takes a set CI for "not a terminal"
	s, done := startUI(t, 80, 30, map[string]string{"NO_COLOR": "1"}, "--source", incidentSource(t), "ui", "--plan-dir", t.TempDir())
	s.waitFor("scan complete: 284 entries read")
	s.press("/")
	s.waitFor("error regex:")
	s.press("\t\torders\r")
	s.waitFor("filter: origin=orders", "scan complete: 284 entries read, 102 selected in 6 categories", "52")
	s.press("?")
	s.waitFor("reload", "plan a redrive", "quit")
	s.press("q")
	if code := waitExit(t, s, done); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	s.mu.Lock()
	raw := s.raw.String()
	s.mu.Unlock()
	if m := regexp.MustCompile(`\x1b\[[0-9;]*m`).FindString(raw); m != "" && m != "\x1b[0m" && m != "\x1b[m" {
		t.Errorf("NO_COLOR: the screen has the style escape %q", m)
	}
}

// TestUIOnRedis browses the sample incident imported into a real Redis
// stream: the same counts, pages by stream-ID cursors, an envelope read
// again with r (Get), and a plan equal to redrive plan's on that stream.
func TestUIOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	dump := filepath.Join(t.TempDir(), "incident.ndjson")
	if _, stderr, code := run(t, nil, "--source", incidentSource(t), "export", "--out", dump); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	source := srv.URL(0, "orders-dlq")
	if _, stderr, code := run(t, nil, "--source", source, "import", dump); code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	planDir := t.TempDir()
	s, done := startUI(t, 100, 30, nil, "--source", source, "ui", "--plan-dir", planDir, "--reason", "psp is back up")
	s.waitFor("scan complete: 284 entries read, 284 selected in 8 categories")
	s.waitFor("transient", "125", "missing-reference", "34")
	s.press("\r")
	s.waitFor("categories › transient", "page 1 · entries 1–50 · ] next page")
	s.press("]")
	s.waitFor("page 2 · entries 51–100 · ] next page · [ previous")
	s.press("]")
	s.waitFor("page 3 · entries 101–125")
	s.press("\r")
	s.waitFor("transient → redrive", "(match)")
	s.press("r")
	s.waitFor("read again from the DLQ at 12:00:00")
	// Esc and [ as two presses, the list back on screen in between: sent
	// as one write, the two bytes are the start of a CSI sequence, which is
	// how a terminal would send them too.
	s.press("\x1b")
	s.waitFor("page 3 · entries 101–125")
	s.press("[")
	s.waitFor("page 2 · entries 51–100")
	s.press("p\r")
	s.waitFor("plan written:", "left out")
	s.press("q")
	if code := waitExit(t, s, done); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	plans, _ := filepath.Glob(filepath.Join(planDir, "*.plan.json"))
	if len(plans) != 1 {
		t.Fatalf("plans written: %v, want one", plans)
	}
	got, err := redrive.ReadPlan(plans[0])
	if err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(t.TempDir(), "ref.plan.json")
	if _, stderr, code := run(t, nil, "--source", source, "redrive", "plan", "--category", "transient", "--reason", "psp is back up", "--out", ref); code != 0 {
		t.Fatalf("redrive plan: exit %d: %s", code, stderr)
	}
	want, err := redrive.ReadPlan(ref)
	if err != nil {
		t.Fatal(err)
	}
	if got.Source != want.Source || !slices.Equal(ids(got.Entries.Slice()), ids(want.Entries.Slice())) || len(got.Excluded) != len(want.Excluded) {
		t.Errorf("ui plan (%s) %d entries, %d left out; redrive plan (%s) %d, %d", got.Source, got.Entries.Len(), len(got.Excluded), want.Source, want.Entries.Len(), len(want.Excluded))
	}
}

// screenLines is the terminal's screen as it stands, one string a row.
func (s *ptyScreen) screenLines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(s.vt.String(), "\n")
}

// waitForLine waits until a row of the screen matches re, and fails with
// the screen when none does.
func (s *ptyScreen) waitForLine(re *regexp.Regexp) string {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, l := range s.screenLines() {
			if re.MatchString(strings.TrimRight(l, " ")) {
				return l
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no row of the screen matches %s:\n%s", re, strings.Join(s.screenLines(), "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUIOnEightyColumns: on an 80×24 terminal every screen's key line
// ends with the way to the other keys and the way out, and an entry's
// fingerprint is drawn whole on one row, to be copied.
func TestUIOnEightyColumns(t *testing.T) {
	s, done := startUI(t, 80, 24, nil, "--no-color", "--source", incidentSource(t), "ui", "--plan-dir", t.TempDir())
	s.waitFor("scan complete")
	footer := regexp.MustCompile(`• \? keys • q quit$`)
	s.waitForLine(footer)
	s.press("\r")
	s.waitFor("page 1 · entries 1–50")
	s.waitForLine(footer)
	s.press("\r")
	s.waitFor("fingerprint")
	s.waitForLine(regexp.MustCompile(`^(fingerprint +)?sha256:[0-9a-f]{64}( \(match\))?$`))
	s.waitForLine(footer)
	s.press("q")
	if code := waitExit(t, s, done); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
}

// TestUIFollowsAResize: the example errors are cut to fit 60 columns, and
// drawn whole once the terminal is widened.
func TestUIFollowsAResize(t *testing.T) {
	s, done, _ := startUICancel(t, 60, 24, nil, "--source", incidentSource(t), "ui", "--plan-dir", t.TempDir())
	s.waitFor("scan complete")
	if strings.Contains(s.text(), "disconnect/reset before headers") {
		t.Fatal("a whole example error was drawn on 60 columns")
	}
	if err := pty.Setsize(s.ptmx, &pty.Winsize{Cols: 160, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	// The kernel signals the pty's foreground process group, which an
	// in-process test is not; the signal is sent to the test itself.
	s.press("")
	if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	s.waitFor("psp: 503 Service Unavailable: upstream connect error or disconnect/reset before headers")
	s.press("q")
	if code := waitExit(t, s, done); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
}

// TestUIInterrupted: a signal (the context ending) stops the browser with
// exit 130 and gives the terminal back.
func TestUIInterrupted(t *testing.T) {
	s, done, cancel := startUICancel(t, 80, 24, nil, "--source", incidentSource(t), "ui", "--plan-dir", t.TempDir())
	s.waitFor("scan complete: 284 entries read")
	s.press("\r")
	s.waitFor("page 1 · entries 1–50")
	cancel()
	if code := waitExit(t, s, done); code != ExitInterrupted {
		t.Fatalf("exit %d, want %d", code, ExitInterrupted)
	}
	if !s.drew("\x1b[?1049l") {
		t.Error("the terminal was left on the alternate screen")
	}
}

// TestUIRefusesWithoutATerminal: piped, ui exits 2 and points to list.
func TestUIRefusesWithoutATerminal(t *testing.T) {
	_, stderr, code := run(t, nil, "--source", incidentSource(t), "ui")
	if code != ExitUsage {
		t.Fatalf("exit %d, want %d", code, ExitUsage)
	}
	if !strings.Contains(stderr, "dlqctl list") {
		t.Errorf("stderr %q does not point to dlqctl list", stderr)
	}
}
