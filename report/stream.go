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
// have fixed widths from the header and the terminal width: Key and Number
// cells are never cut (a longer one pushes its line wider), the Text
// column takes what is left and is cut to it. Piped it is tab-separated,
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
		// Two spaces between columns.
		s.widths[text] = max(o.width()-fixed-2*(len(cols)-1), lipgloss.Width(cols[text].Name), 10)
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
		re := s.re
		parts := make([]string, len(texts))
		for j, t := range texts {
			c := s.cols[j]
			if c.cuttable() && s.widths[j] > 0 {
				t = Truncate(t, s.widths[j])
			}
			pad := s.widths[j] - lipgloss.Width(t)
			styled := t
			if c.Tone != nil {
				styled = s.o.tone(re.NewStyle(), c.Tone(t)).Render(t)
			}
			switch {
			case pad <= 0:
				parts[j] = styled
			case c.Right:
				parts[j] = strings.Repeat(" ", pad) + styled
			case j == len(texts)-1:
				parts[j] = styled
			default:
				parts[j] = styled + strings.Repeat(" ", pad)
			}
		}
		b.WriteString(re.text(strings.Join(parts, "  ")) + "\n")
	}
	_, err := io.WriteString(s.w, b.String())
	return err
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
