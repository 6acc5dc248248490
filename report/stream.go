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
// have fixed widths from the header, MaxWidth and the terminal width:
// nothing is cut; a Key or Number cell longer than its column pushes its
// line wider, and the Text column's cell goes on the lines below its row
// when it does not fit in what is left. When the terminal leaves the Text
// column fewer than usableTextWidth columns (a run's batch table on 80
// columns), the column leaves the header and every row's text goes below
// it, labelled with the column's name. Piped it is tab-separated, in
// markdown a GitHub table; neither is ever cut.
type Stream struct {
	w      io.Writer
	title  string
	cols   []Column
	o      Options
	m      mode
	widths []int
	header bool
	// textCol is the free-text column (-1: none); below says it is drawn
	// under each row, labelled, rather than in the row's line.
	textCol int
	below   bool
	re      renderer // decided once: the profile does not change mid-table
}

// NewStream starts a streamed table; nothing is written before Row.
func NewStream(w io.Writer, title string, cols []Column, o Options) (*Stream, error) {
	m, err := o.mode("a table")
	if err != nil {
		return nil, err
	}
	s := &Stream{w: w, title: title, cols: cols, o: o, m: m, widths: make([]int, len(cols)), textCol: -1}
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
		room := o.width() - fixed - 2*(len(cols)-1)
		s.widths[text] = max(room, lipgloss.Width(cols[text].Name))
		s.textCol = text
		s.below = room < usableTextWidth && !o.wide()
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
// Number cells are never cut; one wider than its column pushes the rest
// of its line right. The free-text cell is never cut either: when it does
// not fit in what is left of the line, it goes on the lines below,
// word-wrapped and lined up under its column (or past the first column
// when its own starts too far right), so the terminal never wraps a row
// mid-word. A stream whose text column is below (see Stream) writes it
// there on every row, after its label.
func (s *Stream) writeTTYRow(b *strings.Builder, texts []string) {
	re := s.re
	styled := func(j int, t string) string {
		if c := s.cols[j]; c.Tone != nil {
			return s.o.tone(re.NewStyle(), c.Tone(t)).Render(t)
		}
		return t
	}
	var line strings.Builder
	at, textAt, last := 0, 0, len(texts)-1
	if s.below && s.textCol == last {
		last--
	}
	for j, t := range texts {
		if s.below && j == s.textCol {
			continue
		}
		if at > 0 {
			line.WriteString("  ")
			at += 2
		}
		if j == s.textCol {
			textAt = at
			if !s.o.wide() && (at+lipgloss.Width(t) > s.o.width() || j != last) {
				// Placed below; keep the columns after it lined up.
				t = ""
			}
		}
		pad := strings.Repeat(" ", max(s.widths[j]-lipgloss.Width(t), 0))
		switch {
		case s.cols[j].Right:
			line.WriteString(pad + styled(j, t))
		case j == last:
			line.WriteString(styled(j, t))
		default:
			line.WriteString(styled(j, t) + pad)
		}
		at += max(s.widths[j], lipgloss.Width(t))
	}
	b.WriteString(re.text(strings.TrimRight(line.String(), " ")) + "\n")
	if s.textCol < 0 || s.o.wide() || lipgloss.Width(texts[s.textCol]) == 0 {
		return
	}
	text := texts[s.textCol]
	if !s.below && s.textCol == last && textAt+lipgloss.Width(text) <= s.o.width() {
		return
	}
	indent := textAt
	if s.below || s.o.width()-indent < minValueWidth {
		// Past the first column, so that the row's first cell (a batch
		// number) still starts every row.
		indent = s.widths[0] + 2
	}
	label := ""
	if s.below {
		label = strings.ToLower(Truncate(s.cols[s.textCol].Name, 0)) + ": "
	}
	hang := strings.Repeat(" ", lipgloss.Width(label))
	for i, l := range wrapWords(text, s.o.width()-indent-lipgloss.Width(label)) {
		lead := hang
		if i == 0 {
			lead = label
		}
		b.WriteString(re.text(strings.Repeat(" ", indent)+lead+styled(s.textCol, l)) + "\n")
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
		var parts []string
		for j, n := range names {
			if s.below && j == s.textCol {
				continue
			}
			n = strings.ToUpper(n)
			pad := max(s.widths[j]-lipgloss.Width(n), 0)
			switch {
			case s.cols[j].Right:
				parts = append(parts, strings.Repeat(" ", pad)+bold.Render(n))
			case j == len(names)-1 || (s.below && j == len(names)-2 && s.textCol == len(names)-1):
				parts = append(parts, bold.Render(n))
			default:
				parts = append(parts, bold.Render(n)+strings.Repeat(" ", pad))
			}
		}
		b.WriteString(re.text(strings.Join(parts, "  ")) + "\n")
	}
}
