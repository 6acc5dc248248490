package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
)

// terminalQuery matches what a program sends a terminal to get an answer
// back: the background or foreground colour (OSC 10/11), the cursor
// position (DSR 6), a mode's state (DECRQM), the device attributes (DA).
var terminalQuery = regexp.MustCompile(`\x1b\]1[01];\?|\x1b\[6n|\x1b\[\?[0-9;]*\$p|\x1b\[[>=]?c`)

// terminalAnswers is what an answering terminal (xterm) replies.
var terminalAnswers = []struct{ query, answer string }{
	{"\x1b]11;?", "\x1b]11;rgb:0000/0000/0000\x1b\\"},
	{"\x1b]10;?", "\x1b]10;rgb:ffff/ffff/ffff\x1b\\"},
	{"\x1b[6n", "\x1b[1;1R"},
	{"\x1b[?2026$p", "\x1b[?2026;2$y"},
	{"\x1b[?2027$p", "\x1b[?2027;0$y"},
}

// fakeTerminal is the other end of a real pty that a dlqctl process runs
// on. An answering one replies to queries the way xterm does; a silent one
// (an Emacs shell, script, expect, some CI runners) never replies.
type fakeTerminal struct {
	ptmx    *os.File
	answers bool
	mu      sync.Mutex
	raw     bytes.Buffer
	screen  *vt.Emulator // ui redraws only the cells that change
	mark    int
	done    chan struct{}
}

func (f *fakeTerminal) read() {
	defer close(f.done)
	buf := make([]byte, 4096)
	scanned := 0
	for {
		n, err := f.ptmx.Read(buf)
		f.mu.Lock()
		f.raw.Write(buf[:n])
		_, _ = f.screen.Write(buf[:n])
		// A query may straddle two reads: look from a little before the
		// last look's end, and answer only queries that end after it.
		from := max(scanned-16, 0)
		seen := f.raw.String()[from:]
		end := scanned
		scanned = f.raw.Len()
		f.mu.Unlock()
		if f.answers {
			for _, q := range terminalAnswers {
				for i := 0; ; {
					j := strings.Index(seen[i:], q.query)
					if j < 0 {
						break
					}
					if from+i+j+len(q.query) > end {
						_, _ = io.WriteString(f.ptmx, q.answer)
					}
					i += j + len(q.query)
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *fakeTerminal) output() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raw.String()
}

// since is the screen as it stands and what was drawn since the last key,
// the escapes stripped; nothing if nothing was drawn since.
func (f *fakeTerminal) since() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	drawn := escapes.ReplaceAllString(f.raw.String()[f.mark:], "")
	if f.raw.Len() == f.mark {
		return drawn
	}
	return f.screen.String() + "\n" + drawn
}

// startOnTerminal starts the built dlqctl on a new pty, as the session
// leader with the pty as its controlling terminal and in the foreground,
// as a shell would start it.
func startOnTerminal(t *testing.T, bin string, answers bool, env []string, args ...string) (*fakeTerminal, *exec.Cmd, time.Time) {
	t.Helper()
	c := exec.Command(bin, args...)
	c.Env = env
	start := time.Now()
	ptmx, err := pty.StartWithSize(c, &pty.Winsize{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close() })
	f := &fakeTerminal{ptmx: ptmx, answers: answers, screen: vt.NewEmulator(100, 30), done: make(chan struct{})}
	// The emulator's own answers would block it; they go nowhere.
	go func() { _, _ = io.Copy(io.Discard, f.screen) }()
	t.Cleanup(func() { f.mu.Lock(); f.screen.Close(); f.mu.Unlock() })
	go f.read()
	return f, c, start
}

// waitProcess waits at most limit for c to exit, killing it after that.
func waitProcess(t *testing.T, c *exec.Cmd, limit time.Duration) (int, bool) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), true
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, true
	case <-time.After(limit):
		_ = c.Process.Kill()
		<-exited
		return -1, false
	}
}

// buildDlqctl builds the dlqctl binary: what a terminal does to a process
// at its start (a query sent from an init function, say) happens only in a
// process of its own.
func buildDlqctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dlqctl")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestTerminalThatNeverAnswers runs dlqctl on a pty that answers terminal
// queries and on one that answers none. No command but ui may query the
// terminal: each returns at once, and with NO_COLOR or a format that is
// not for people, writes no escape at all. ui starts, takes keys and
// quits on both.
func TestTerminalThatNeverAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the dlqctl binary")
	}
	bin := buildDlqctl(t)
	src := incidentSource(t)
	home := t.TempDir()
	env := []string{"TERM=xterm-256color", "HOME=" + home, "PATH=" + os.Getenv("PATH")}
	// Well under the 5 s a query waits for its answer, and leaves room
	// for a busy machine.
	const quick = time.Second

	cases := []struct {
		name      string
		env       []string
		args      []string
		noEscapes bool
		want      string
	}{
		{"version", nil, []string{"version"}, true, "dlqctl"},
		{"help", nil, []string{"--help"}, true, "Usage:"},
		{"stats json", nil, []string{"--source", src, "stats", "-o", "json"}, true, `"schema"`},
		{"table NO_COLOR", []string{"NO_COLOR=1"}, []string{"--source", src, "categorize"}, true, "missing-reference"},
		{"table --no-color", nil, []string{"--source", src, "--no-color", "list", "--limit", "3"}, true, "ID"},
		// Colour comes from TERM, not from asking the terminal.
		{"table in colour", nil, []string{"--source", src, "categorize"}, false, "\x1b[32m"},
	}
	for _, answers := range []bool{true, false} {
		kind := "silent"
		if answers {
			kind = "answering"
		}
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				f, c, start := startOnTerminal(t, bin, answers, append(env, tc.env...), tc.args...)
				code, exited := waitProcess(t, c, 15*time.Second)
				took := time.Since(start)
				<-f.done
				out := f.output()
				if !exited {
					t.Fatalf("did not exit in 15 s; the terminal got %q", out)
				}
				if code != 0 {
					t.Fatalf("exit %d: %q", code, out)
				}
				if took > quick {
					t.Errorf("took %s on the %s terminal, want under %s", took.Round(time.Millisecond), kind, quick)
				}
				if q := terminalQuery.FindString(out); q != "" {
					t.Errorf("queried the terminal with %q", q)
				}
				if tc.noEscapes && strings.Contains(out, "\x1b") {
					t.Errorf("escape codes in the output: %q", out)
				}
				if !strings.Contains(out, tc.want) {
					t.Errorf("output lacks %q: %q", tc.want, out)
				}
				if tc.name == "stats json" {
					var doc map[string]any
					if err := json.Unmarshal([]byte(strings.ReplaceAll(out, "\r\n", "\n")), &doc); err != nil {
						t.Errorf("stats -o json is not one JSON document: %v\n%q", err, out)
					}
				}
			})
		}
		t.Run(kind+"/ui", func(t *testing.T) {
			f, c, start := startOnTerminal(t, bin, answers, env, "--source", src, "ui", "--plan-dir", t.TempDir())
			waitDrawn := func(want string, limit time.Duration) {
				t.Helper()
				deadline := time.Now().Add(limit)
				for !strings.Contains(f.since(), want) {
					if time.Now().After(deadline) {
						_ = c.Process.Kill()
						t.Fatalf("ui never drew %q in %s; it drew:\n%s", want, limit, f.since())
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			press := func(keys string) {
				t.Helper()
				f.mu.Lock()
				f.mark = f.raw.Len()
				f.mu.Unlock()
				for _, r := range keys {
					if _, err := f.ptmx.WriteString(string(r)); err != nil {
						t.Fatal(err)
					}
					time.Sleep(15 * time.Millisecond)
				}
			}
			waitDrawn("dlqctl ui ·", 2*quick)
			if took := time.Since(start); took > 2*quick {
				t.Errorf("first frame after %s on the %s terminal", took.Round(time.Millisecond), kind)
			}
			// Keys typed straight away, before the scan ends, are keys.
			press("?")
			waitDrawn("scroll down", 5*time.Second)
			waitDrawn("scan complete", 15*time.Second)
			press("?j\r")
			waitDrawn("page 1 · entries", 5*time.Second)
			press("q")
			code, exited := waitProcess(t, c, 5*time.Second)
			if !exited {
				t.Fatalf("q did not end ui; it drew:\n%s", f.since())
			}
			if code != 0 {
				t.Fatalf("ui exit %d; it drew:\n%s", code, f.since())
			}
			<-f.done
			if !strings.Contains(f.output(), "\x1b[?1049l") {
				t.Error("q left the terminal on the alternate screen")
			}
		})
	}
}
