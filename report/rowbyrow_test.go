package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
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
