package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/table"
)

const (
	// defaultMaxWidth caps string cells of a Column whose MaxWidth is 0.
	defaultMaxWidth = 60
	// minColumnWidth is the narrowest a text column is cut to on a terminal.
	minColumnWidth = 3
)

// Column describes one table column.
type Column struct {
	Name string
	// MaxWidth caps the cell in display columns (see Truncate): 0 means 60,
	// a negative value means no cap (the cell is still made safe).
	MaxWidth int
	// Right aligns the column to the right on a terminal (numbers).
	Right bool
}

func (c Column) maxWidth() int {
	switch {
	case c.MaxWidth == 0:
		return defaultMaxWidth
	case c.MaxWidth < 0:
		return 0
	}
	return c.MaxWidth
}

// Table is rows of cells. A cell is a string, []byte, int, int64, float64,
// bool, time.Time (a point in time), Age, or nil (empty); anything else is
// shown with fmt.Sprint. A row may be shorter than Columns (the rest is
// empty) but not longer.
type Table struct {
	Title   string
	Columns []Column
	Rows    [][]any
}

// WriteTable writes t as a lipgloss table on a terminal, as tab-separated
// text with an upper-case header row when piped, or as a GitHub markdown
// table. JSON formats are refused: their documents need a schema field, so
// commands build those and call WriteJSON.
func WriteTable(w io.Writer, t Table, o Options) error {
	m, err := o.mode("a table")
	if err != nil {
		return err
	}
	rows, err := t.cells(m, o)
	if err != nil {
		return err
	}
	headers := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		headers[i] = Truncate(c.Name, 0)
		if m != modeMarkdown {
			headers[i] = strings.ToUpper(headers[i])
		}
	}
	bw := bufio.NewWriter(w)
	switch m {
	case modeTTY:
		writeTTYTable(bw, w, t, headers, rows, o)
	case modePlain:
		for _, r := range append([][]string{headers}, rows...) {
			fmt.Fprintln(bw, strings.Join(r, "\t"))
		}
	case modeMarkdown:
		if t.Title != "" {
			fmt.Fprintf(bw, "### %s\n\n", Truncate(t.Title, 0))
		}
		fmt.Fprintln(bw, markdownRow(headers))
		fmt.Fprintln(bw, markdownSeparator(len(headers)))
		for _, r := range rows {
			fmt.Fprintln(bw, markdownRow(r))
		}
	}
	return bw.Flush()
}

// cells turns every value into safe, capped text for mode m.
func (t Table) cells(m mode, o Options) ([][]string, error) {
	now := o.now()
	rows := make([][]string, len(t.Rows))
	for i, row := range t.Rows {
		if len(row) > len(t.Columns) {
			return nil, fmt.Errorf("report: table %q row %d has %d cells for %d columns", t.Title, i, len(row), len(t.Columns))
		}
		cells := make([]string, len(t.Columns))
		for j, col := range t.Columns {
			var v any
			if j < len(row) {
				v = row[j]
			}
			cells[j] = Truncate(text(v, m, now, false), col.maxWidth())
		}
		rows[i] = cells
	}
	return rows, nil
}

// writeTTYTable draws with a renderer made for dst, the caller's writer, so
// the colour profile follows the real terminal rather than the buffer.
func writeTTYTable(bw *bufio.Writer, dst io.Writer, t Table, headers []string, rows [][]string, o Options) {
	if len(headers) == 0 {
		return
	}
	re := o.renderer(dst)
	cell := re.NewStyle().Padding(0, 1)
	header := cell
	if !o.NoColor {
		header = header.Bold(true)
	}
	styleFunc := func(row, col int) lipgloss.Style {
		s := cell
		if row == table.HeaderRow {
			s = header
		}
		if col < len(t.Columns) && t.Columns[col].Right {
			s = s.Align(lipgloss.Right)
		}
		return s
	}
	headers, rows = fitColumns(headers, rows, t.Columns, o.width())
	out := table.New().
		Border(lipgloss.RoundedBorder()).
		BorderStyle(re.NewStyle()).
		Headers(headers...).
		Rows(rows...).
		StyleFunc(styleFunc).
		String()
	if t.Title != "" {
		fmt.Fprintln(bw, o.bold(re).Render(Truncate(t.Title, 0)))
	}
	fmt.Fprintln(bw, out)
}

// fitColumns narrows the widest text columns, one column at a time, until
// the table fits width. Numbers (Right columns) are never cut, and headers
// only when cutting every text cell down to its header is not enough; a text
// column keeps at least minColumnWidth. A table that still does not fit is
// left for the terminal to wrap: lipgloss would crop its right edge instead.
func fitColumns(headers []string, rows [][]string, cols []Column, width int) ([]string, [][]string) {
	widths := make([]int, len(headers))
	for j, h := range headers {
		widths[j] = lipgloss.Width(h)
		for _, r := range rows {
			widths[j] = max(widths[j], lipgloss.Width(r[j]))
		}
	}
	// Each column has one space of padding either side and a border on its
	// left; the table has one more border on the right.
	total := 1
	for _, w := range widths {
		total += w + 3
	}
	if total <= width {
		return headers, rows
	}
	floors := []func(j int) int{
		func(j int) int { return lipgloss.Width(headers[j]) },
		func(j int) int { return min(lipgloss.Width(headers[j]), minColumnWidth) },
	}
	for _, floor := range floors {
		for total > width {
			widest := -1
			for j, w := range widths {
				if !cols[j].Right && w > floor(j) && (widest < 0 || w > widths[widest]) {
					widest = j
				}
			}
			if widest < 0 {
				break
			}
			widths[widest]--
			total--
		}
	}
	cut := func(r []string) []string {
		out := make([]string, len(r))
		for j, c := range r {
			out[j] = Truncate(c, widths[j])
		}
		return out
	}
	fitted := make([][]string, len(rows))
	for i, r := range rows {
		fitted[i] = cut(r)
	}
	return cut(headers), fitted
}
