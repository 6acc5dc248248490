package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"charm.land/lipgloss/v2"
)

// TestStreamMatchesTable: where RowByRow says so, a streamed table is
// byte for byte the table WriteTable writes, rows and empty alike, and each
// row reaches the writer during its Row call (nothing is held back).
func TestStreamMatchesTable(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cols := []Column{
		{Name: "id", Kind: Key}, {Name: "age", Right: true}, {Name: "n", Right: true, Optional: true},
		{Name: "error", MaxWidth: 10},
	}
	rows := [][]any{
		{"1-0", Age(90 * time.Second), 3, "a very long error that a terminal would cut"},
		{"2-0", nil, 12, "tab\tand\nnewline"},
		{"3-0", now.Add(-time.Hour), int64(7), ""},
	}
	for _, o := range []Options{{Format: FormatTable, Now: now}, {Format: FormatWide, Now: now}, {Format: FormatMarkdown, Now: now}, {Format: FormatMarkdown, TTY: true, Now: now}} {
		if !o.RowByRow() {
			t.Fatalf("%+v: RowByRow false", o)
		}
		for _, n := range []int{0, len(rows)} {
			var table bytes.Buffer
			if err := WriteTable(&table, Table{Columns: cols, Rows: rows[:n]}, o); err != nil {
				t.Fatal(err)
			}
			var streamed bytes.Buffer
			s, err := NewStream(&streamed, "", cols, o)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range rows[:n] {
				if err := s.Row(r...); err != nil {
					t.Fatal(err)
				}
				if got := strings.Count(streamed.String(), "\n"); got < i+2 {
					t.Fatalf("%s: %d lines written after row %d: the row was held back", o.Format, got, i+1)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if streamed.String() != table.String() {
				t.Errorf("%s (tty %v), %d rows: streamed\n%q\nwant the table's\n%q", o.Format, o.TTY, n, streamed.String(), table.String())
			}
		}
	}
	for _, o := range []Options{{Format: FormatTable, TTY: true}, {Format: FormatWide, TTY: true}, {Format: FormatJSON}, {Format: FormatNDJSON}, {Format: FormatOpenMetrics}} {
		if o.RowByRow() {
			t.Errorf("%s (tty %v): RowByRow true", o.Format, o.TTY)
		}
	}
}

// TestStreamTrippedGateAtEightyColumns: a run's batch table on an
// 80-column terminal. The gate's column holds the longest gate's name, so
// a tripped gate keeps its row in line under its header; the verdicts,
// which 80 columns leave too little room for, go under each row,
// labelled, whole; no line is wider than the terminal (which would wrap
// it mid-word). On a wider terminal they stay in their column.
func TestStreamTrippedGateAtEightyColumns(t *testing.T) {
	cols := []Column{
		{Name: "batch", Right: true}, {Name: "size", Right: true}, {Name: "moved", Right: true},
		{Name: "attempts", Right: true}, {Name: "effects", Right: true}, {Name: "unique", Right: true},
		{Name: "dlq", Kind: Key, MaxWidth: 9}, {Name: "gate", Kind: Key, MaxWidth: 16, Tone: VerdictTone},
		{Name: "verdicts"},
	}
	verdicts := "absorbed-duplicate=1 applied=40 re-dead-lettered=9"
	rows := [][]any{
		{1, 5, 5, 5, 5, 5, "60→55", "pass", "applied=5"},
		{2, 50, 50, 50, 50, 50, "55→14", "re-dead-lettered", verdicts},
	}
	draw := func(width int) string {
		var buf bytes.Buffer
		s, err := NewStream(&buf, "Batches", cols, Options{TTY: true, NoColor: true, Width: width})
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			if err := s.Row(row...); err != nil {
				t.Fatal(err)
			}
		}
		out := buf.String()
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if w := lipgloss.Width(line); w > width {
				t.Errorf("line is %d columns wide on %d: %q", w, width, line)
			}
		}
		if strings.Contains(out, "…") {
			t.Errorf("a value was cut:\n%s", out)
		}
		return out
	}
	out := draw(80)
	column := func(out, s string) int {
		i := strings.Index(out, s)
		return lipgloss.Width(out[strings.LastIndex(out[:i], "\n")+1 : i])
	}
	for _, gate := range []string{" pass\n", " re-dead-lettered\n"} {
		if column(out, gate)+1 != column(out, "GATE") {
			t.Errorf("%q is not under GATE:\n%s", gate, out)
		}
	}
	if strings.Contains(out, "VERDICTS") || !strings.Contains(out, "\n       verdicts: applied=5\n") ||
		!strings.Contains(out, "\n       verdicts: "+verdicts+"\n") {
		t.Errorf("the verdicts are not under their rows, labelled:\n%s", out)
	}
	out = draw(140)
	if !strings.Contains(out, "VERDICTS\n") || !strings.Contains(out, "re-dead-lettered  "+verdicts+"\n") {
		t.Errorf("at 120 columns the verdicts left their column:\n%s", out)
	}
}

// TestWrapProse: prose wraps at words to the terminal, a word wider than
// the terminal stays whole on its own line, a command (an indented line)
// is never broken, and a comment wraps into comment lines.
func TestWrapProse(t *testing.T) {
	path := "/var/lib/dlqctl/" + strings.Repeat("x", 40) + "/inc2211.plan.journal"
	cmd := "  dlqctl redrive resume " + path + " --past-gate --key-file /etc/dlqctl/approval.key"
	in := "stopped by the duplicate-effect gate: 1 event produced more than one effect (journal " + path + ").\n" +
		cmd + "\n# DLQCTL_AMQP_PASSWORD must hold the source's password: set it from your secret store before you run this"
	got := strings.Split(WrapProse(in, 60), "\n")
	for _, l := range got {
		if lipgloss.Width(l) > 60 && l != path+")." && l != cmd {
			t.Errorf("line %q is %d columns wide", l, lipgloss.Width(l))
		}
		if l != cmd && strings.Contains(l, "--past-gate") {
			t.Errorf("the command was broken: %q", l)
		}
	}
	joined := strings.Join(got, "\n")
	if !strings.Contains(joined, "\n"+path+").\n") || !strings.Contains(joined, "\n"+cmd+"\n") {
		t.Errorf("the path or the command is not whole on its line:\n%s", joined)
	}
	for _, l := range got[len(got)-2:] {
		if !strings.HasPrefix(l, "# ") {
			t.Errorf("a comment wrapped out of its #: %q\n%s", l, joined)
		}
	}
	if WrapProse(in, 0) != in {
		t.Errorf("width 0 changed the text")
	}
}
