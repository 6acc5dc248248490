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
// 80-column terminal. A tripped gate's long name pushes its row, and
// verdicts too long for what is left go whole on the line below, so no
// line is wider than the terminal (which would wrap it mid-word) and no
// verdict is cut.
func TestStreamTrippedGateAtEightyColumns(t *testing.T) {
	cols := []Column{
		{Name: "batch", Right: true}, {Name: "size", Right: true}, {Name: "moved", Right: true},
		{Name: "attempts", Right: true}, {Name: "effects", Right: true}, {Name: "unique", Right: true},
		{Name: "dlq", Kind: Key, MaxWidth: 9}, {Name: "gate", Kind: Key, MaxWidth: 7, Tone: VerdictTone},
		{Name: "verdicts"},
	}
	var buf bytes.Buffer
	s, err := NewStream(&buf, "Batches", cols, Options{TTY: true, NoColor: true, Width: 80})
	if err != nil {
		t.Fatal(err)
	}
	verdicts := "absorbed-duplicate=1 applied=40 re-dead-lettered=9"
	for _, row := range [][]any{
		{1, 5, 5, 5, 5, 5, "60→55", "pass", "applied=5"},
		{2, 50, 50, 50, 50, 50, "55→14", "re-dead-lettered", verdicts},
	} {
		if err := s.Row(row...); err != nil {
			t.Fatal(err)
		}
	}
	out := buf.String()
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if w := lipgloss.Width(line); w > 80 {
			t.Errorf("line is %d columns wide: %q", w, line)
		}
	}
	if strings.Contains(out, "…") || !strings.Contains(out, "pass     applied=5\n") ||
		!strings.Contains(out, "re-dead-lettered\n") || !strings.Contains(out, " "+verdicts+"\n") {
		t.Errorf("a verdict was cut or misplaced:\n%s", out)
	}
}
