package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"charm.land/lipgloss/v2"
	"charm.land/lipgloss/v2/table"
)

const (
	// defaultMaxWidth caps free-text cells of a Column whose MaxWidth is 0,
	// on a terminal only.
	defaultMaxWidth = 60
	// minColumnWidth is the narrowest a text column is cut to on a terminal.
	minColumnWidth = 3
	// narrowWidth: below it, Optional columns are dropped from a table that
	// does not fit, before any free text is cut to the bone.
	narrowWidth = 100
)

// Kind says how a column may be cut to fit a terminal.
type Kind int

const (
	// Text is free text (errors, payloads, reasons): capped at MaxWidth on
	// a terminal and the first to shrink when the table is too wide.
	Text Kind = iota
	// Key is what people copy into another command (ids, event IDs,
	// categories, dispositions): never cut, in any format.
	Key
	// Number is never cut either; Right aligns it.
	Number
)

// Column describes one table column.
type Column struct {
	Name string
	// Kind decides whether the column may be cut; the zero value is Text.
	Kind Kind
	// MaxWidth caps a Text cell on a terminal in display columns (see
	// Truncate): 0 means 60, a negative value means no cap. Piped output,
	// markdown and -o wide never cut anything.
	MaxWidth int
	// Right aligns the column to the right on a terminal (numbers). A Right
	// column is never cut, whatever its Kind.
	Right bool
	// Optional columns are left out on a terminal narrower than 100 columns
	// when the table would not fit otherwise (lowest value first: the last
	// Optional column goes first).
	Optional bool
	// Tone colours each cell on a colour terminal from its text (see
	// DispositionTone, VerdictTone); nil draws it plain.
	Tone func(cell string) Tone
}

func (c Column) maxWidth() int {
	switch {
	case c.Kind != Text || c.Right || c.MaxWidth < 0:
		return 0
	case c.MaxWidth == 0:
		return defaultMaxWidth
	}
	return c.MaxWidth
}

func (c Column) cuttable() bool { return c.Kind == Text && !c.Right }

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
			limit := 0
			if m == modeTTY && !o.wide() {
				limit = col.maxWidth()
			}
			cells[j] = Truncate(text(v, m, now, false), limit)
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
	cols := t.Columns
	if !o.wide() {
		cols, headers, rows = fitColumns(headers, rows, t.Columns, o.width())
	}
	cell := re.NewStyle().Padding(0, 1)
	header := cell
	if !o.NoColor {
		header = header.Bold(true)
	}
	styleFunc := func(row, col int) lipgloss.Style {
		s := cell
		if row == table.HeaderRow {
			s = header
		} else if col < len(cols) && cols[col].Tone != nil && row >= 0 && row < len(rows) {
			s = o.tone(s, cols[col].Tone(rows[row][col]))
		}
		if col < len(cols) && cols[col].Right {
			s = s.Align(lipgloss.Right)
		}
		return s
	}
	out := table.New().
		Border(lipgloss.RoundedBorder()).
		BorderStyle(re.NewStyle()).
		Headers(headers...).
		Rows(rows...).
		StyleFunc(styleFunc).
		String()
	if t.Title != "" {
		fmt.Fprintln(bw, re.text(o.bold(re).Render(Truncate(t.Title, 0))))
	}
	fmt.Fprintln(bw, re.text(out))
}

// tableWidth is the drawn width of columns of these widths: one space of
// padding either side and a border on the left of each, one more border on
// the right.
func tableWidth(widths []int) int {
	total := 1
	for _, w := range widths {
		total += w + 3
	}
	return total
}

// fitColumns makes the table fit width. On a terminal narrower than 100
// columns it first leaves out Optional columns, last first, until the rest
// fits at their full width or only essential ones are left; then it narrows
// the widest free-text columns, one column at a time. Key and Number
// columns are never cut, text headers only when cutting every text cell
// down to its header is not enough, and a text column keeps at least
// minColumnWidth. A table that still does not fit is left for the terminal
// to wrap: lipgloss would crop its right edge instead, and a cut ID is worse
// than a wrapped line.
func fitColumns(headers []string, rows [][]string, cols []Column, width int) ([]Column, []string, [][]string) {
	measure := func() []int {
		widths := make([]int, len(headers))
		for j, h := range headers {
			widths[j] = lipgloss.Width(h)
			for _, r := range rows {
				widths[j] = max(widths[j], lipgloss.Width(r[j]))
			}
		}
		return widths
	}
	widths := measure()
	if tableWidth(widths) <= width {
		return cols, headers, rows
	}
	if width < narrowWidth {
		// What free text needs at least, so that dropping stops once the
		// text columns can be narrowed into the room left.
		floorWidth := func(ws []int, cs []Column) int {
			fl := make([]int, len(ws))
			for j, w := range ws {
				fl[j] = w
				if cs[j].cuttable() {
					fl[j] = min(w, max(minColumnWidth, min(lipgloss.Width(headers[j]), 12)))
				}
			}
			return tableWidth(fl)
		}
		for j := len(cols) - 1; j >= 0 && floorWidth(widths, cols) > width; j-- {
			if !cols[j].Optional {
				continue
			}
			cols = append(cols[:j:j], cols[j+1:]...)
			headers = append(headers[:j:j], headers[j+1:]...)
			dropped := make([][]string, len(rows))
			for i, r := range rows {
				dropped[i] = append(r[:j:j], r[j+1:]...)
			}
			rows = dropped
			widths = append(widths[:j:j], widths[j+1:]...)
		}
	}
	total := tableWidth(widths)
	floors := []func(j int) int{
		func(j int) int { return lipgloss.Width(headers[j]) },
		func(j int) int { return min(lipgloss.Width(headers[j]), minColumnWidth) },
	}
	for _, floor := range floors {
		for total > width {
			widest := -1
			for j, w := range widths {
				if cols[j].cuttable() && w > floor(j) && (widest < 0 || w > widths[widest]) {
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
			if cols[j].cuttable() {
				c = Truncate(c, widths[j])
			}
			out[j] = c
		}
		return out
	}
	fitted := make([][]string, len(rows))
	for i, r := range rows {
		fitted[i] = cut(r)
	}
	return cols, cut(headers), fitted
}
