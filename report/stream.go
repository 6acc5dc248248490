package report

import (
	"fmt"
	"io"
	"strings"

	"charm.land/lipgloss/v2"
)

// Stream is a table whose rows arrive one at a time (a run's batches): the
// header is written once, before the first row, and each row is appended
// as it comes, so a long run reads as one table. On a terminal the columns
// have fixed widths from the header and the terminal width: nothing is
// cut; a Key or Number cell longer than its column pushes its line wider,
// and the Text column's cell goes on the lines below its row when it does
// not fit in what is left. Piped it is tab-separated,
// in markdown a GitHub table; neither is ever cut.
type Stream struct {
	w      io.Writer
	title  string
	cols   []Column
	o      Options
	m      mode
	widths []int
	header bool
	re     renderer // decided once: the profile does not change mid-table
}

// NewStream starts a streamed table; nothing is written before Row.
func NewStream(w io.Writer, title string, cols []Column, o Options) (*Stream, error) {
	m, err := o.mode("a table")
	if err != nil {
		return nil, err
	}
	s := &Stream{w: w, title: title, cols: cols, o: o, m: m, widths: make([]int, len(cols))}
	if m == modeTTY {
		s.re = o.renderer(w)
	}
	fixed, text := 0, -1
	for j, c := range cols {
		s.widths[j] = max(lipgloss.Width(c.Name), c.MaxWidth, minColumnWidth)
		if c.cuttable() && text < 0 {
			text = j
			continue
		}
		fixed += s.widths[j]
	}
	if text >= 0 {
		// Two spaces between columns. The text column is never cut: what
		// does not fit goes on the lines below (see writeTTYRow).
		s.widths[text] = max(o.width()-fixed-2*(len(cols)-1), lipgloss.Width(cols[text].Name))
		if o.wide() {
			s.widths[text] = 0
		}
	}
	return s, nil
}

// Row appends one row; cells take the same kinds as a Table's.
func (s *Stream) Row(cells ...any) error {
	if len(cells) > len(s.cols) {
		return fmt.Errorf("report: stream row has %d cells for %d columns", len(cells), len(s.cols))
	}
	now := s.o.now()
	texts := make([]string, len(s.cols))
	for j := range s.cols {
		var v any
		if j < len(cells) {
			v = cells[j]
		}
		texts[j] = Truncate(text(v, s.m, now, false), 0)
	}
	var b strings.Builder
	if !s.header {
		s.header = true
		s.writeHeader(&b)
	}
	switch s.m {
	case modePlain:
		b.WriteString(strings.Join(texts, "\t") + "\n")
	case modeMarkdown:
		b.WriteString(markdownRow(texts) + "\n")
	case modeTTY:
		s.writeTTYRow(&b, texts)
	}
	_, err := io.WriteString(s.w, b.String())
	return err
}

// writeTTYRow lays out one row in the stream's fixed columns. Key and
// Number cells are never cut; one wider than its column (a tripped gate's
// name) pushes the rest of its line right. The free-text cell is never cut
// either: when it does not fit in what is left of the line, it goes on the
// lines below, word-wrapped and lined up under its column (or past the
// first column when its own starts too far right), so the terminal never
// wraps a row mid-word.
func (s *Stream) writeTTYRow(b *strings.Builder, texts []string) {
	re := s.re
	styled := func(j int, t string) string {
		if c := s.cols[j]; c.Tone != nil {
			return s.o.tone(re.NewStyle(), c.Tone(t)).Render(t)
		}
		return t
	}
	var line strings.Builder
	at, textAt, textCol := 0, 0, -1
	for j, t := range texts {
		c := s.cols[j]
		if j > 0 {
			line.WriteString("  ")
			at += 2
		}
		if c.cuttable() && s.widths[j] > 0 && textCol < 0 {
			textCol, textAt = j, at
		}
		if j == textCol {
			if !s.o.wide() && (at+lipgloss.Width(t) > s.o.width() || j != len(texts)-1) {
				// Placed below; keep the columns after it lined up.
				t = ""
			}
		}
		pad := strings.Repeat(" ", max(s.widths[j]-lipgloss.Width(t), 0))
		switch {
		case c.Right:
			line.WriteString(pad + styled(j, t))
		case j == len(texts)-1:
			line.WriteString(styled(j, t))
		default:
			line.WriteString(styled(j, t) + pad)
		}
		at += max(s.widths[j], lipgloss.Width(t))
	}
	b.WriteString(re.text(strings.TrimRight(line.String(), " ")) + "\n")
	if textCol < 0 || s.o.wide() || lipgloss.Width(texts[textCol]) == 0 || (textCol == len(texts)-1 && textAt+lipgloss.Width(texts[textCol]) <= s.o.width()) {
		return
	}
	indent := textAt
	if s.o.width()-indent < minValueWidth {
		// Past the first column, so that the row's first cell (a batch
		// number) still starts every row.
		indent = s.widths[0] + 2
	}
	for _, l := range wrapWords(texts[textCol], s.o.width()-indent) {
		b.WriteString(re.text(strings.Repeat(" ", indent)+styled(textCol, l)) + "\n")
	}
}

// Close writes the header if no row came, so that an empty streamed table
// reads as WriteTable's empty table does. It writes nothing after a row.
func (s *Stream) Close() error {
	if s.header {
		return nil
	}
	s.header = true
	var b strings.Builder
	s.writeHeader(&b)
	_, err := io.WriteString(s.w, b.String())
	return err
}

func (s *Stream) writeHeader(b *strings.Builder) {
	names := make([]string, len(s.cols))
	for j, c := range s.cols {
		names[j] = Truncate(c.Name, 0)
	}
	switch s.m {
	case modePlain:
		b.WriteString(strings.ToUpper(strings.Join(names, "\t")) + "\n")
	case modeMarkdown:
		if s.title != "" {
			fmt.Fprintf(b, "### %s\n\n", Truncate(s.title, 0))
		}
		b.WriteString(markdownRow(names) + "\n" + markdownSeparator(len(names)) + "\n")
	case modeTTY:
		re := s.re
		bold := s.o.bold(re)
		if s.title != "" {
			b.WriteString(re.text(bold.Render(Truncate(s.title, 0))) + "\n")
		}
		parts := make([]string, len(names))
		for j, n := range names {
			n = strings.ToUpper(n)
			pad := max(s.widths[j]-lipgloss.Width(n), 0)
			if s.cols[j].Right {
				parts[j] = strings.Repeat(" ", pad) + bold.Render(n)
			} else if j == len(names)-1 {
				parts[j] = bold.Render(n)
			} else {
				parts[j] = bold.Render(n) + strings.Repeat(" ", pad)
			}
		}
		b.WriteString(re.text(strings.Join(parts, "  ")) + "\n")
	}
}
