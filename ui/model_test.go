package ui

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"

	"github.com/dlqctl/dlqctl/envelope"
	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/report"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// testModel is a browser whose reads are never run: the tests feed it the
// messages those reads would send, so they see exactly what Update and
// View do with them.
func testModel(t *testing.T) *Model {
	t.Helper()
	d := Deps{
		Walker: inspect.Walker{Classifier: envelope.NewClassifier(envelope.DefaultRules()), Now: now},
		Selector: func(f Filter, category string) (inspect.Selector, error) {
			sel := inspect.Selector{EventIDs: f.EventIDs, Origins: f.Origins, Owners: f.Owners}
			if category != "" {
				sel.Categories = []string{category}
			}
			if f.Error != "" {
				re, err := regexp.Compile(f.Error)
				if err != nil {
					return sel, err
				}
				sel.Error = re
			}
			return sel, nil
		},
		Plan: func(context.Context, Filter, string, string) (PlanResult, error) {
			t.Fatal("the test model makes no plan")
			return PlanResult{}, nil
		},
		Source:   "dir:/tmp/incident",
		Styles:   report.NewTUI(true),
		Redactor: inspect.NewRedactor(nil),
		Now:      func() time.Time { return now },
	}
	m := New(context.Background(), d)
	m.walker = d.Walker
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	return m
}

func keys(m *Model, ks ...tea.KeyPressMsg) {
	for _, k := range ks {
		m.Update(k)
	}
}

// runes is text typed as one key event: one rune is a key, more are text
// read in one go.
func runes(s string) tea.KeyPressMsg {
	if rs := []rune(s); len(rs) == 1 {
		return tea.KeyPressMsg{Code: rs[0], Text: s}
	}
	return tea.KeyPressMsg{Code: tea.KeyExtended, Text: s}
}

var (
	enter = tea.KeyPressMsg{Code: tea.KeyEnter}
	esc   = tea.KeyPressMsg{Code: tea.KeyEscape}
)

func scanned(m *Model, seen int, done bool, rows ...catRow) {
	msg := scanMsg{gen: m.gen, pass: 1, seen: seen, total: 5000, rows: rows, done: done}
	if done {
		msg.conflicts = envelope.NewConflictTracker()
		msg.conflicts.ConflictCount()
	}
	m.Update(scanEnvelope{msg: msg})
}

func TestCountsClimbWhileTheScanRuns(t *testing.T) {
	m := testModel(t)
	scanned(m, 1000, false, catRow{Name: "transient", Disposition: "redrive", Count: 700, OldestAge: 2 * time.Hour, ExampleError: "timeout"})
	v := m.render()
	for _, want := range []string{"scanning… 1,000 of 5,000 entries read, 700 selected", "transient", "redrive", "700", "2h"} {
		if !strings.Contains(v, want) {
			t.Errorf("first snapshot: view lacks %q:\n%s", want, v)
		}
	}
	scanned(m, 5000, true,
		catRow{Name: "schema", Disposition: "fix-then-redrive", Count: 1200, ExampleError: "cannot parse"},
		catRow{Name: "transient", Disposition: "redrive", Count: 3800, ExampleError: "timeout"})
	v = m.render()
	for _, want := range []string{"scan complete: 5,000 entries read, 5,000 selected in 2 categories", "1,200", "3,800"} {
		if !strings.Contains(v, want) {
			t.Errorf("final: view lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, " 700 ") {
		t.Errorf("the first snapshot's count is still drawn:\n%s", v)
	}
}

// TestCursorStaysOnItsCategory: rows are ordered by count, which a
// running scan changes; the cursor follows its category, so Enter opens
// the one the operator chose.
func TestCursorStaysOnItsCategory(t *testing.T) {
	m := testModel(t)
	scanned(m, 100, false, catRow{Name: "transient", Count: 60}, catRow{Name: "permission", Count: 40})
	m.catCursor = 1
	scanned(m, 300, false, catRow{Name: "permission", Count: 200}, catRow{Name: "transient", Count: 100})
	if got := m.rows[m.catCursor].Name; got != "permission" {
		t.Fatalf("the cursor is on %s after the rows reordered, want permission", got)
	}
	scanned(m, 400, true, catRow{Name: "transient", Count: 400})
	if m.catCursor != 0 {
		t.Fatalf("the cursor is on row %d of 1 once its category is gone", m.catCursor)
	}
}

func TestStaleScanMessagesAreIgnored(t *testing.T) {
	m := testModel(t)
	old := m.gen
	m.gen++ // as a reload does
	m.Update(scanEnvelope{msg: scanMsg{gen: old, seen: 9, rows: []catRow{{Name: "ghost", Count: 9}}}})
	if strings.Contains(m.render(), "ghost") {
		t.Error("a replaced scan's counts were drawn")
	}
}

func TestLinesFitTheTerminal(t *testing.T) {
	m := testModel(t)
	long := strings.Repeat("upstream connect error or disconnect/reset before headers ", 5)
	scanned(m, 3, true,
		catRow{Name: "missing-reference", Disposition: "resolve", Count: 1, OldestAge: 50 * time.Hour, ExampleError: long},
		catRow{Name: "transient", Disposition: "redrive", Count: 2, ExampleError: long})
	for _, width := range []int{80, 60, 120} {
		for _, height := range []int{24, 10} {
			m.Update(tea.WindowSizeMsg{Width: width, Height: height})
			v := m.render()
			lines := strings.Split(v, "\n")
			if len(lines) != height {
				t.Errorf("%dx%d: %d lines drawn", width, height, len(lines))
			}
			for _, l := range lines {
				if n := utf8.RuneCountInString(l); n > width {
					t.Errorf("%dx%d: a line of %d columns: %q", width, height, n, l)
				}
			}
			if !strings.Contains(v, "missing-reference") || !strings.Contains(v, "resolve") {
				t.Errorf("%dx%d: an identifier was cut:\n%s", width, height, v)
			}
		}
	}
}

func TestBadFilterIsRefusedAndKept(t *testing.T) {
	m := testModel(t)
	scanned(m, 1, true, catRow{Name: "transient", Disposition: "redrive", Count: 1})
	keys(m, runes("/"), runes("("), enter)
	v := m.render()
	if m.mode != inputFilter || !strings.Contains(v, "missing closing )") {
		t.Errorf("an invalid regex was not refused in the form:\n%s", v)
	}
	if m.filter.Error != "" {
		t.Errorf("the filter took %q", m.filter.Error)
	}
	keys(m, esc)
	if m.mode != inputNone {
		t.Error("esc did not close the form")
	}
}

func TestEntriesPageAndEnvelope(t *testing.T) {
	m := testModel(t)
	scanned(m, 2, true, catRow{Name: "transient", Disposition: "redrive", Count: 2})
	keys(m, enter)
	if m.screen != screenEntries || !m.loading {
		t.Fatalf("enter on a category: screen %d, loading %v", m.screen, m.loading)
	}
	e := envelope.Envelope{
		ID: "1732890000000-0", EventID: "E42", Origin: envelope.Origin{Backend: "redis", Topic: "orders"},
		Attempts: 5, LastError: "timeout calling payments", DeadLetteredAt: now.Add(-90 * time.Minute),
		PayloadEncoding: envelope.EncodingJSON, Payload: []byte(`{"orderId":"o-1","email":"ann@example.com"}`),
		Properties: map[string]string{"tenant": "acme"},
	}
	e.FillFingerprint()
	cl := m.deps.Walker.Classifier
	m.Update(pageMsg{gen: m.pageGen, items: []inspect.Item{{Envelope: e, Class: cl.Classify(e, false)}}, next: "1732890000000-0"})
	v := m.render()
	for _, want := range []string{"categories › transient", "1732890000000-0", "E42", "1h30m", "orders", "page 1 · entries 1–1 · ] next page"} {
		if !strings.Contains(v, want) {
			t.Errorf("entries: view lacks %q:\n%s", want, v)
		}
	}
	keys(m, enter)
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 60})
	v = m.render()
	for _, want := range []string{"(computed)", "transient → redrive", "properties.tenant", "acme", "payload (personal data hidden", `"email": "[redacted]"`} {
		if !strings.Contains(v, want) {
			t.Errorf("envelope: view lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "ann@example.com") {
		t.Errorf("the email is shown before v:\n%s", v)
	}
	keys(m, runes("v"))
	if v = m.render(); !strings.Contains(v, "ann@example.com") {
		t.Errorf("v did not reveal the payload:\n%s", v)
	}
	keys(m, esc)
	if m.screen != screenEntries {
		t.Errorf("esc from the envelope: screen %d", m.screen)
	}
	keys(m, esc)
	if m.screen != screenCategories {
		t.Errorf("esc from the entries: screen %d", m.screen)
	}
}

// TestEscEscReadTogether: Esc pressed twice faster than the terminal is
// read arrives as one alt+esc, and goes back twice.
func TestEscEscReadTogether(t *testing.T) {
	m := testModel(t)
	scanned(m, 1, true, catRow{Name: "transient", Count: 1})
	keys(m, enter)
	e := envelope.Envelope{ID: "1-0", EventID: "E1", LastError: "timeout"}
	e.FillFingerprint()
	m.Update(pageMsg{gen: m.pageGen, items: []inspect.Item{{Envelope: e, Class: m.deps.Walker.Classifier.Classify(e, false)}}})
	keys(m, enter)
	if m.screen != screenEnvelope {
		t.Fatalf("enter on an entry: screen %d", m.screen)
	}
	keys(m, tea.KeyPressMsg{Code: tea.KeyEscape, Mod: tea.ModAlt})
	if m.screen != screenCategories {
		t.Errorf("esc esc from the envelope: screen %d, want the categories", m.screen)
	}
}

func TestEntriesWaitForTheConflictPass(t *testing.T) {
	m := testModel(t)
	scanned(m, 10, false, catRow{Name: "transient", Disposition: "redrive", Count: 10})
	keys(m, enter)
	if !m.waiting || m.loading {
		t.Fatalf("a page was read before conflicts were known: waiting %v loading %v", m.waiting, m.loading)
	}
	if v := m.render(); !strings.Contains(v, "waiting for the first pass") {
		t.Errorf("the wait is not said:\n%s", v)
	}
	scanned(m, 20, true, catRow{Name: "transient", Disposition: "redrive", Count: 20})
	if m.waiting || !m.loading {
		t.Errorf("the page did not start when the first pass ended: waiting %v loading %v", m.waiting, m.loading)
	}
}

func TestPlanNeedsAReason(t *testing.T) {
	m := testModel(t)
	scanned(m, 1, true, catRow{Name: "transient", Disposition: "redrive", Count: 1})
	keys(m, runes("p"), enter)
	if m.mode != inputReason || !strings.Contains(m.render(), "a reason is required") {
		t.Errorf("an empty reason was taken:\n%s", m.render())
	}
}

func TestQuit(t *testing.T) {
	m := testModel(t)
	_, cmd := m.Update(runes("q"))
	if cmd == nil {
		t.Fatal("q returned no command")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Error("q does not quit")
	}
}

// TestPlanOfWhatIsShown: p plans the filter and, on the entries screen,
// the open category; the status names the file and the next command.
func TestPlanOfWhatIsShown(t *testing.T) {
	type call struct {
		f        Filter
		category string
		reason   string
	}
	var calls []call
	m := testModel(t)
	m.deps.Plan = func(_ context.Context, f Filter, category, reason string) (PlanResult, error) {
		calls = append(calls, call{f, category, reason})
		return PlanResult{Path: "redrive-x.plan.json", Entries: 3, Excluded: 1, Next: "dlqctl redrive approve redrive-x.plan.json"}, nil
	}
	m.filter = Filter{Origins: []string{"orders"}}
	scanned(m, 4, true, catRow{Name: "transient", Disposition: "redrive", Count: 4})
	plan := func(reason string) {
		t.Helper()
		// The prompt starts with the last reason given; ctrl+u clears it.
		keys(m, runes("p"), tea.KeyPressMsg{Code: 'u', Mod: tea.ModCtrl}, runes(reason))
		_, cmd := m.Update(enter)
		if cmd == nil {
			t.Fatal("enter on the reason made no plan")
		}
		if !strings.Contains(m.render(), "planning…") {
			t.Errorf("no planning… while the plan is made:\n%s", m.render())
		}
		m.Update(cmd())
	}
	plan("psp back")
	keys(m, enter)
	plan("only transient")
	want := []call{{Filter{Origins: []string{"orders"}}, "", "psp back"}, {Filter{Origins: []string{"orders"}}, "transient", "only transient"}}
	if len(calls) != 2 || calls[0].category != want[0].category || calls[1].category != want[1].category ||
		calls[0].reason != want[0].reason || calls[1].reason != want[1].reason || calls[1].f.Origins[0] != "orders" {
		t.Fatalf("plans made: %+v, want %+v", calls, want)
	}
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 24})
	if v := m.render(); !strings.Contains(v, "plan written: 3 entries, 1 left out: redrive-x.plan.json. Next: dlqctl redrive approve redrive-x.plan.json") {
		t.Errorf("the status does not say what was written and what is next:\n%s", v)
	}
}

// TestKeysReadTogether: "jj" read in one go moves the cursor twice.
func TestKeysReadTogether(t *testing.T) {
	m := testModel(t)
	scanned(m, 3, true, catRow{Name: "a", Count: 1}, catRow{Name: "b", Count: 1}, catRow{Name: "c", Count: 1})
	keys(m, runes("jj"))
	if m.catCursor != 2 {
		t.Errorf("cursor at %d after jj, want 2", m.catCursor)
	}
}

// TestTypedTextIsNotAKey: "up" typed in one read into the reason is text,
// not the up arrow.
func TestTypedTextIsNotAKey(t *testing.T) {
	m := testModel(t)
	scanned(m, 1, true, catRow{Name: "transient", Count: 1})
	keys(m, runes("p"), runes("back "), runes("up"))
	if got := m.inputs[0].Value(); got != "back up" {
		t.Errorf("reason %q, want %q", got, "back up")
	}
}
