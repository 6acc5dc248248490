package report

import (
	"strings"
	"testing"
	"unicode/utf8"

	"charm.land/lipgloss/v2"
)

func TestTUIListShrinksFreeTextFirst(t *testing.T) {
	tui := NewTUI(true)
	cols := []TUIColumn{{Name: "id", Keep: true}, {Name: "category", Keep: true}, {Name: "origin", Min: 6}, {Name: "error", Min: 10}}
	// 2 + 21 + 17 + 6 + 10 + 3 gaps of 2 = 62: over 60 even at the minimums.
	rows := [][]string{
		{"20261129T080713Z-0001", "missing-reference", "payments-eu-west", strings.Repeat("customer record not found ", 6)},
		{"20261129T080820Z-0002", "transient", "orders", "timeout"},
	}
	out := tui.TUIList(cols, rows, 1, 0, 10, 60)
	lines := strings.Split(out, "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want a header and 2 rows:\n%s", len(lines), out)
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 60 {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
	for _, want := range []string{"20261129T080713Z-0001", "missing-reference", "custome…"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(lines[2], "› 20261129T080820Z-0002") || !strings.HasPrefix(lines[1], "  20261129T080713Z-0001") {
		t.Errorf("the cursor row is not marked by › alone:\n%s", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("no-colour list has an escape: %q", out)
	}
}

func TestKeyLineFitsTheWidth(t *testing.T) {
	tui := NewTUI(true)
	hints := []KeyHint{{"enter", "open"}, {"/", "filter"}, {"p", "plan a redrive"}, {"r", "reload"}, {"?", "keys"}, {"q", "quit"}}
	for w := 10; w <= 80; w++ {
		got := tui.KeyLine(hints, 2, w)
		if n := utf8.RuneCountInString(got); n > w {
			t.Errorf("width %d: a key line of %d columns", w, n)
		}
		if w >= 20 && !strings.HasSuffix(got, "? keys • q quit") {
			t.Errorf("width %d: help and quit are not shown: %q", w, got)
		}
	}
	if got := tui.KeyLine(hints, 2, 45); got != "enter open • / filter • … • ? keys • q quit" {
		t.Errorf("45 columns: %q", got)
	}
	if got := tui.KeyLine(hints, 2, 200); got != "enter open • / filter • p plan a redrive • r reload • ? keys • q quit" {
		t.Errorf("wide: %q", got)
	}
	for _, l := range tui.KeyColumns([][]KeyHint{hints[:3], hints[3:]}, 80) {
		if utf8.RuneCountInString(l) > 80 {
			t.Errorf("a key column line is too wide: %q", l)
		}
	}
}

func TestTUIWrapDefusesControlCharacters(t *testing.T) {
	lines := TUIWrap("evil \x1b[2J\x1b]0;title\x07 text that goes on and on past the width", 20)
	for _, l := range lines {
		if strings.ContainsAny(l, "\x1b\x07") {
			t.Errorf("a control character reached the terminal: %q", l)
		}
		if utf8.RuneCountInString(l) > 20 {
			t.Errorf("a wrapped line of %d columns: %q", utf8.RuneCountInString(l), l)
		}
	}
}

// TestTUITitleKeepsTheBreadcrumb: a long source is cut from the left so
// the breadcrumb stays whole; a line that fits is left alone; a width too
// small for the breadcrumb itself cuts the line.
func TestTUITitleKeepsTheBreadcrumb(t *testing.T) {
	src := "dir:/a/very/long/checkout/path/of/some/ci/runner/testdata/incident"
	crumbs := "categories › unknown › fraud check rejected order <*> (score <*>)"
	got := TUITitle(src, crumbs, 100)
	if lipgloss.Width(got) > 100 || !strings.HasSuffix(got, " · "+crumbs) || !strings.Contains(got, "…") || !strings.Contains(got, "testdata/incident · ") {
		t.Errorf("TUITitle at 100 = %q", got)
	}
	if got := TUITitle("dir:x", "categories", 100); got != "dlqctl ui · dir:x · categories" {
		t.Errorf("a line that fits: %q", got)
	}
	if got := TUITitle(src, crumbs, 40); lipgloss.Width(got) != 40 || !strings.HasSuffix(got, "…") {
		t.Errorf("TUITitle at 40 = %q", got)
	}
}
