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
	// usableTextWidth: a table that would cut a free-text column to fewer
	// columns than this (errors, rules, payloads read as "psp: …") is drawn
	// as one block per row instead, as kubectl describe does.
	usableTextWidth = 20
	// verticalTextLines caps a free-text value in the one-block-per-row
	// layout.
	verticalTextLines = 3
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
	// WrapLines, on a Text column, word-wraps its cells on a terminal to the
	// column's width, up to that many lines (the last ending in "…" when
	// more would follow), instead of cutting each to one line: an error
	// whose end tells it from the next (`missing field "currency"`) stays
	// readable in a narrow column. MaxWidth is then the width of a line.
	WrapLines int
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

// wraps says whether the column's cells wrap rather than cut (WrapLines).
func (c Column) wraps() bool { return c.cuttable() && c.WrapLines > 1 }

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
	rows, err := t.cells(m, o, false)
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
		if o.wide() {
			writeBorderless(bw, w, t, headers, rows, o)
			break
		}
		cols, fh, fr, usable := fitColumns(headers, rows, t.Columns, o.width())
		if !usable {
			if rows, err = t.cells(m, o, true); err != nil {
				return err
			}
			writeVertical(bw, w, t, headers, rows, o)
			break
		}
		writeTTYTable(bw, w, t.Title, cols, fh, fr, o)
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

// cells turns every value into safe, capped text for mode m. vertical
// cells are for the one-block-per-row layout: free text is capped at
// verticalTextLines lines rather than at its column's MaxWidth.
func (t Table) cells(m mode, o Options, vertical bool) ([][]string, error) {
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
				if col.wraps() && limit > 0 {
					limit *= col.WrapLines // cut to its lines when the table is drawn
				}
				if vertical && limit > 0 {
					limit = max(limit, verticalTextLines*(o.width()-verticalKeyWidth(t.Columns)-2))
				}
			}
			cells[j] = Truncate(text(v, m, now, false), limit)
		}
		rows[i] = cells
	}
	return rows, nil
}

// writeTTYTable draws with a renderer made for dst, the caller's writer, so
// the colour profile follows the real terminal rather than the buffer.
func writeTTYTable(bw *bufio.Writer, dst io.Writer, title string, cols []Column, headers []string, rows [][]string, o Options) {
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
	if title != "" {
		fmt.Fprintln(bw, re.text(o.bold(re).Render(Truncate(title, 0))))
	}
	fmt.Fprintln(bw, re.text(out))
}

// writeBorderless is -o wide on a terminal: nothing cut, columns apart by
// three spaces and no border, so that a line wider than the terminal reads
// in `less -S` (a bordered table the terminal wraps is noise).
func writeBorderless(bw *bufio.Writer, dst io.Writer, t Table, headers []string, rows [][]string, o Options) {
	if len(headers) == 0 {
		return
	}
	re := o.renderer(dst)
	bold := o.bold(re)
	widths := make([]int, len(headers))
	for j, h := range headers {
		widths[j] = lipgloss.Width(h)
		for _, r := range rows {
			widths[j] = max(widths[j], lipgloss.Width(r[j]))
		}
	}
	line := func(cells []string, style func(j int, c string) string) string {
		var b strings.Builder
		for j, c := range cells {
			pad := strings.Repeat(" ", widths[j]-lipgloss.Width(c))
			if j > 0 {
				b.WriteString("   ")
			}
			switch {
			case t.Columns[j].Right:
				b.WriteString(pad + style(j, c))
			case j == len(cells)-1:
				b.WriteString(style(j, c))
			default:
				b.WriteString(style(j, c) + pad)
			}
		}
		return re.text(b.String())
	}
	if t.Title != "" {
		fmt.Fprintln(bw, re.text(bold.Render(Truncate(t.Title, 0))))
	}
	fmt.Fprintln(bw, line(headers, func(_ int, c string) string { return bold.Render(c) }))
	for _, r := range rows {
		fmt.Fprintln(bw, line(r, func(j int, c string) string {
			if tone := t.Columns[j].Tone; tone != nil {
				return o.tone(re.NewStyle(), tone(c)).Render(c)
			}
			return c
		}))
	}
}

// verticalKeyWidth is the width of the keys in the one-block-per-row
// layout: the longest column name.
func verticalKeyWidth(cols []Column) int {
	w := 0
	for _, c := range cols {
		w = max(w, lipgloss.Width(Truncate(c.Name, 0)))
	}
	return w
}

// writeVertical is a table too wide for the terminal drawn as one block
// per row, every column on a line of its own (kubectl describe): keys are
// never cut, free text is word-wrapped in the room the terminal has, and a
// value too wide for that room goes whole on a line of its own. A blank
// line separates the rows.
func writeVertical(bw *bufio.Writer, dst io.Writer, t Table, headers []string, rows [][]string, o Options) {
	re := o.renderer(dst)
	bold := o.bold(re)
	keyWidth := verticalKeyWidth(t.Columns)
	valueWidth := max(o.width()-keyWidth-2, minValueWidth)
	if t.Title != "" {
		fmt.Fprintln(bw, re.text(bold.Render(Truncate(t.Title, 0))))
	}
	for i, r := range rows {
		if i > 0 || t.Title != "" {
			fmt.Fprintln(bw)
		}
		for j, c := range r {
			col := t.Columns[j]
			value := wrapWords(c, valueWidth)
			if col.cuttable() {
				value = capLines(breakWords(c, valueWidth), verticalTextLines, valueWidth)
			} else if col.Tone != nil && !strings.Contains(c, " ") {
				value = []string{o.tone(re.NewStyle(), col.Tone(c)).Render(c)}
			}
			styleKey := func(k string) string { return bold.Render(k) }
			if j == 0 {
				// The first column names the block: its value is bold too.
				value = []string{bold.Render(c)}
			}
			for _, l := range keyedLines(headers[j], value, keyWidth, o.width(), styleKey) {
				fmt.Fprintln(bw, re.text(l))
			}
		}
	}
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
// The last result says whether the table is still worth reading: false
// when it does not fit, or when a free-text column would be cut to fewer
// than usableTextWidth columns of a longer text; the caller then draws one
// block per row instead.
func fitColumns(headers []string, rows [][]string, cols []Column, width int) ([]Column, []string, [][]string, bool) {
	widths := measureColumns(headers, rows)
	for j, c := range cols {
		if c.wraps() && c.maxWidth() > 0 {
			// A wrapping column is as wide as its lines may be.
			widths[j] = min(widths[j], max(c.maxWidth(), lipgloss.Width(headers[j])))
		}
	}
	if tableWidth(widths) <= width {
		fitted := make([][]string, len(rows))
		for i, r := range rows {
			fitted[i] = cutCells(cols, widths, r) // wraps what wraps; cuts nothing
		}
		return cols, headers, fitted, true
	}
	if width < narrowWidth {
		cols, headers, rows, widths = dropOptional(cols, headers, rows, widths, width)
	}
	natural := append([]int(nil), widths...)
	total := narrowColumns(cols, headers, widths, width)
	usable := total <= width
	for j, w := range widths {
		if cols[j].cuttable() && w < min(natural[j], usableTextWidth) {
			usable = false
		}
	}
	fitted := make([][]string, len(rows))
	for i, r := range rows {
		fitted[i] = cutCells(cols, widths, r)
	}
	return cols, cutCells(cols, widths, headers), fitted, usable
}

// measureColumns is each column's natural width: its widest cell or header.
func measureColumns(headers []string, rows [][]string) []int {
	widths := make([]int, len(headers))
	for j, h := range headers {
		widths[j] = lipgloss.Width(h)
		for _, r := range rows {
			widths[j] = max(widths[j], lipgloss.Width(r[j]))
		}
	}
	return widths
}

// dropOptional leaves out Optional columns, last first, until what free
// text needs to stay usable fits width, so that dropping stops once the
// text columns can be narrowed into the room left.
func dropOptional(cols []Column, headers []string, rows [][]string, widths []int, width int) ([]Column, []string, [][]string, []int) {
	floorWidth := func(ws []int, cs []Column) int {
		fl := make([]int, len(ws))
		for j, w := range ws {
			fl[j] = w
			if cs[j].cuttable() {
				fl[j] = min(w, usableTextWidth)
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
	return cols, headers, rows, widths
}

// narrowColumns narrows the widest free-text column by one, again and
// again, until the table fits width: first down to its header's width,
// then, if that is not enough, down to minColumnWidth. It returns the
// table's width after.
func narrowColumns(cols []Column, headers []string, widths []int, width int) int {
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
	return total
}

// cutCells is row r with its free-text cells cut to widths, or wrapped
// to them (WrapLines).
func cutCells(cols []Column, widths []int, r []string) []string {
	out := make([]string, len(r))
	for j, c := range r {
		switch {
		case cols[j].wraps():
			c = strings.Join(capLines(breakWords(c, widths[j]), cols[j].WrapLines, widths[j]), "\n")
		case cols[j].cuttable():
			c = Truncate(c, widths[j])
		}
		out[j] = c
	}
	return out
}
