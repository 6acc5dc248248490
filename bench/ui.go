package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
)

// caseRedisUI: `dlqctl ui` on a real pty over a Redis DLQ of N entries,
// against `dlqctl list --category NAME --limit 50` on the same stream.
const caseRedisUI = "redis-ui"

// uiCategory is the category whose first page is timed: a sparse one
// (about 4 % of the generated entries), so a page walks well past 50
// entries.
const uiCategory = "permission"

// UIResult is the redis-ui case.
type UIResult struct {
	N        int
	Seed     time.Duration
	Category string
	Runs     []UIRun
	Command  string
	List     string
}

// UIRun is one alternation: the browser's milestones from its start, and
// the time of the list command it is compared with.
type UIRun struct {
	FirstFrame  time.Duration // the categories screen is drawn (title, progress line)
	FirstCounts time.Duration // the first category row with a count
	ScanDone    time.Duration // "scan complete"
	FirstPage   time.Duration // Enter on the category after the scan → its first page drawn
	// EarlyPage is Enter pressed as soon as the counts appear, the scan
	// still running: the page waits for the scan's first pass, since
	// conflicts decide categories, as list's own conflict pass does.
	EarlyPage time.Duration
	List      time.Duration // `dlqctl list --category … --limit 50 -o json`, a subprocess
}

func (c Config) runUI(ctx context.Context, d *dlqctl, now time.Time, res *Results) error {
	srv, rdb, stop, err := startRedis()
	if err != nil {
		return err
	}
	defer stop()
	key := "dlq:bench:ui"
	c.logf("redis-ui: seeding %s with %d entries", key, c.N)
	start := time.Now()
	if err := seedStream(ctx, rdb, key, c.N, now); err != nil {
		return err
	}
	source := srv.URL(0, key)
	r := &UIResult{N: c.N, Seed: time.Since(start), Category: uiCategory}
	res.UI = r
	planDir, err := os.MkdirTemp("", "dlqctl-bench-ui-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(planDir)
	uiArgs := []string{"--config", d.config, "--source", source, "ui", "--plan-dir", planDir}
	listArgs := []string{"--config", d.config, "--source", source, "list", "--category", uiCategory, "--limit", "50", "-o", "json"}
	r.Command = "dlqctl " + strings.Join(uiArgs[2:], " ")
	r.List = "dlqctl " + strings.Join(listArgs[2:], " ")
	for i := range c.Runs {
		var run UIRun
		if err := d.timeUI(ctx, uiArgs, &run, false); err != nil {
			return err
		}
		if err := d.timeUI(ctx, uiArgs, &run, true); err != nil {
			return err
		}
		took, err := d.timeList(ctx, listArgs)
		if err != nil {
			return err
		}
		run.List = took
		r.Runs = append(r.Runs, run)
		c.logf("redis-ui run %d/%d: first frame %s, first counts %s, scan %s, first page %s (early %s); list %s", i+1, c.Runs,
			run.FirstFrame.Round(time.Millisecond), run.FirstCounts.Round(time.Millisecond), run.ScanDone.Round(time.Millisecond),
			run.FirstPage.Round(time.Millisecond), run.EarlyPage.Round(time.Millisecond), run.List.Round(time.Millisecond))
	}
	return nil
}

var uiEscapes = regexp.MustCompile(`\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]`)

// ptyWatch keeps what a program drew on a pty and says when a text first
// appeared, on the screen (through a terminal emulator: ui redraws only the
// cells that change) or in what was drawn since the last key. It answers
// the queries a terminal answers (background colour, cursor position) the
// way a terminal does, so that the times are a terminal's whatever the
// program asks.
type ptyWatch struct {
	mu      sync.Mutex
	raw     bytes.Buffer
	screen  *vt.Emulator
	mark    int
	scanned int // raw offset up to which queries were looked for
	done    chan struct{}
}

var terminalAnswers = []struct{ query, answer string }{
	{"\x1b]11;?", "\x1b]11;rgb:0000/0000/0000\x1b\\"},
	{"\x1b[6n", "\x1b[1;1R"},
}

func (p *ptyWatch) copyFrom(rw io.ReadWriter) {
	defer close(p.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := rw.Read(buf)
		p.mu.Lock()
		p.raw.Write(buf[:n])
		_, _ = p.screen.Write(buf[:n])
		// Queries may straddle two reads: look again from a little before
		// where the last look ended.
		from := max(p.scanned-8, 0)
		seen := p.raw.String()[from:]
		p.scanned = p.raw.Len()
		p.mu.Unlock()
		type hit struct {
			at     int
			answer string
		}
		var hits []hit
		for _, q := range terminalAnswers {
			for i := 0; ; {
				j := strings.Index(seen[i:], q.query)
				if j < 0 {
					break
				}
				// A query that ended before this read was answered already.
				if from+i+j+len(q.query) > p.scanned-n {
					hits = append(hits, hit{i + j, q.answer})
				}
				i += j + len(q.query)
			}
		}
		// In the order asked: termenv reads the colour answer, then the
		// cursor position.
		slices.SortFunc(hits, func(a, b hit) int { return a.at - b.at })
		for _, h := range hits {
			_, _ = io.WriteString(rw, h.answer)
		}
		if err != nil {
			return
		}
	}
}

// wait returns once text has been drawn since the last press, polling
// every millisecond (the resolution of the times reported).
func (p *ptyWatch) wait(ctx context.Context, text string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		p.mu.Lock()
		seen := uiEscapes.ReplaceAllString(p.raw.String()[p.mark:], "")
		if p.raw.Len() > p.mark {
			seen = p.screen.String() + "\n" + seen
		}
		p.mu.Unlock()
		if strings.Contains(seen, text) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("dlqctl ui never drew %q in %s; it drew:\n%s", text, limit, tail(seen, 2000))
		}
		time.Sleep(time.Millisecond)
	}
}

func (p *ptyWatch) press(w io.Writer, key string) error {
	p.mu.Lock()
	p.mark = p.raw.Len()
	p.mu.Unlock()
	_, err := io.WriteString(w, key)
	return err
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// timeUI runs the built binary's ui on a 120×40 pty and times its
// milestones: first frame, first counts, scan complete; then opens the
// category and times its first page; then quits and checks exit 0. With
// early, it opens the category as soon as the counts appear instead.
func (d *dlqctl) timeUI(ctx context.Context, args []string, run *UIRun, early bool) error {
	c := exec.CommandContext(ctx, d.bin, args...)
	c.Env = append(d.env, "TERM=xterm-256color")
	start := time.Now()
	ptmx, err := pty.StartWithSize(c, &pty.Winsize{Cols: 120, Rows: 40})
	if err != nil {
		return err
	}
	defer ptmx.Close()
	w := &ptyWatch{screen: vt.NewEmulator(120, 40), done: make(chan struct{})}
	// The emulator's own answers would block it; they go nowhere.
	go func() { _, _ = io.Copy(io.Discard, w.screen) }()
	defer func() { w.mu.Lock(); w.screen.Close(); w.mu.Unlock() }()
	go w.copyFrom(ptmx)
	fail := func(err error) error {
		_ = c.Process.Kill()
		_ = c.Wait()
		return err
	}
	if err := w.wait(ctx, "dlqctl ui ·", time.Minute); err != nil {
		return fail(err)
	}
	firstFrame := time.Since(start)
	if err := w.wait(ctx, "DISPOSITION", time.Minute); err != nil {
		return fail(err)
	}
	firstCounts := time.Since(start)
	if !early {
		run.FirstFrame, run.FirstCounts = firstFrame, firstCounts
		if err := w.wait(ctx, "scan complete", 10*time.Minute); err != nil {
			return fail(err)
		}
		run.ScanDone = time.Since(start)
	}
	// Rows are ordered by count, which the running scan may still change:
	// move down until the cursor is drawn on the category (the browser
	// keeps it there while rows reorder).
	for i := 0; ; i++ {
		if i == 12 {
			return fail(fmt.Errorf("the cursor never reached %s", uiCategory))
		}
		if err := w.press(ptmx, "j"); err != nil {
			return fail(err)
		}
		if w.wait(ctx, "› "+uiCategory, 200*time.Millisecond) == nil {
			break
		}
	}
	opened := time.Now()
	if err := w.press(ptmx, "\r"); err != nil {
		return fail(err)
	}
	if err := w.wait(ctx, "page 1 · entries 1–50", 10*time.Minute); err != nil {
		return fail(err)
	}
	if early {
		run.EarlyPage = time.Since(opened)
	} else {
		run.FirstPage = time.Since(opened)
	}
	if err := w.wait(ctx, "› "+uiCategory, time.Second); err != nil {
		return fail(fmt.Errorf("the page drawn is not %s's: %v", uiCategory, err))
	}
	if err := w.press(ptmx, "q"); err != nil {
		return fail(err)
	}
	if err := c.Wait(); err != nil {
		return fmt.Errorf("dlqctl ui: %v", err)
	}
	return nil
}

// timeList runs the list command as a subprocess and checks it printed a
// full page of the category.
func (d *dlqctl) timeList(ctx context.Context, args []string) (time.Duration, error) {
	c := exec.CommandContext(ctx, d.bin, args...)
	c.Env = d.env
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	start := time.Now()
	if err := c.Run(); err != nil {
		return 0, fmt.Errorf("dlqctl list: %v\n%s", err, stderr.Bytes())
	}
	took := time.Since(start)
	var doc struct {
		Items []struct {
			Category string `json:"category"`
		} `json:"items"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		return 0, fmt.Errorf("dlqctl list: %v", err)
	}
	if len(doc.Items) != 50 || doc.Items[0].Category != uiCategory {
		return 0, fmt.Errorf("dlqctl list printed %d items, want 50 of %s", len(doc.Items), uiCategory)
	}
	return took, nil
}

func (r *UIResult) write(w io.Writer) {
	fmt.Fprintf(w, "\n### redis-ui — N = %s entries (seeded in %s)\n\n", group(float64(r.N)), r.Seed.Round(100*time.Millisecond))
	fmt.Fprintf(w, "`%s` on a 120×40 pty; first page of `%s`; against `%s`.\n\n", r.Command, r.Category, r.List)
	fmt.Fprintln(w, "| run | first frame s | first counts s | scan complete s | first page s | page during scan s | list s | first page ÷ list | page during scan ÷ list |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	for i, run := range r.Runs {
		fmt.Fprintf(w, "| %d | %.3f | %.3f | %.2f | %.3f | %.2f | %.2f | %.3f | %.2f |\n", i+1, run.FirstFrame.Seconds(), run.FirstCounts.Seconds(),
			run.ScanDone.Seconds(), run.FirstPage.Seconds(), run.EarlyPage.Seconds(), run.List.Seconds(),
			run.FirstPage.Seconds()/run.List.Seconds(), run.EarlyPage.Seconds()/run.List.Seconds())
	}
}
