package report

import (
	"strings"

	"charm.land/bubbles/v2/textinput"
	"charm.land/lipgloss/v2"
)

// TUI draws the pieces of the interactive browser (dlqctl ui). The ui
// package builds the screens and hands plain strings here, so that styling
// stays in this package like every other output of dlqctl.
type TUI struct {
	noColor bool
}

// NewTUI draws for the terminal the browser runs on. With noColor
// (--no-color, NO_COLOR) no style emits an escape sequence: selection and
// emphasis are then carried by characters alone (a "›" marker), never by
// colour or reverse video. Colours are drawn in full otherwise; the
// browser's program cuts them down to what the terminal shows, judged from
// the environment, never by asking the terminal.
func NewTUI(noColor bool) TUI {
	return TUI{noColor: noColor}
}

// NoColor says that the browser must draw no style at all.
func (t TUI) NoColor() bool { return t.noColor }

// style is s, or no style at all without colour.
func (t TUI) style(s lipgloss.Style) lipgloss.Style {
	if t.noColor {
		return lipgloss.NewStyle()
	}
	return s
}

func plain() lipgloss.Style { return lipgloss.NewStyle() }

// Title is a screen's heading.
func (t TUI) Title(s string) string {
	return t.style(plain().Bold(true).Foreground(lipgloss.Color("6"))).Render(s)
}

// Dim is secondary text: the progress line, hints.
func (t TUI) Dim(s string) string { return t.style(plain().Faint(true)).Render(s) }

// Bad is an error or a warning.
func (t TUI) Bad(s string) string {
	return t.style(plain().Bold(true).Foreground(lipgloss.Color("1"))).Render(s)
}

// Good is a completed action (a plan written).
func (t TUI) Good(s string) string { return t.style(plain().Foreground(lipgloss.Color("2"))).Render(s) }

// Label is a field name in the envelope screen.
func (t TUI) Label(s string) string { return t.style(plain().Bold(true)).Render(s) }

// StyleInput gives a text input this terminal's styles (the bubbles
// defaults draw on lipgloss's process-wide renderer, which knows nothing
// of --no-color).
func (t TUI) StyleInput(m *textinput.Model) {
	st := textinput.DefaultStyles(true)
	for _, s := range []*textinput.StyleState{&st.Focused, &st.Blurred} {
		s.Prompt = t.style(plain().Bold(true))
		s.Text = plain()
		s.Placeholder = t.style(plain().Faint(true))
		s.Suggestion = t.style(plain().Faint(true))
	}
	m.SetStyles(st)
}

// KeyHint is one key and what it does, for the key help.
type KeyHint struct{ Key, Desc string }

// KeyLine is the one-line key help: the hints in order, as many as fit
// in width, then "…" for those left out, then always the last `always`
// hints (help and quit: the way to every other key and the way out must
// show on any terminal). bubbles/help can overflow the width by one item,
// so it is drawn here.
func (t TUI) KeyLine(hints []KeyHint, always, width int) string {
	const sep, more = " • ", "…"
	key, desc := t.style(plain().Bold(true)), t.style(plain().Faint(true))
	always = min(max(always, 0), len(hints))
	head, tail := hints[:len(hints)-always], hints[len(hints)-always:]
	sepWidth := lipgloss.Width(sep)
	hintWidth := func(h KeyHint) int { return lipgloss.Width(h.Key) + 1 + lipgloss.Width(h.Desc) }
	var b strings.Builder
	used := 0
	add := func(text string, w int) {
		if used > 0 {
			b.WriteString(desc.Render(sep))
			used += sepWidth
		}
		b.WriteString(text)
		used += w
	}
	gap := func() int { // the separator the next item needs
		if used > 0 {
			return sepWidth
		}
		return 0
	}
	tailWidth := 0
	for _, h := range tail {
		tailWidth += sepWidth + hintWidth(h)
	}
	for i, h := range head {
		reserve := tailWidth
		if i < len(head)-1 {
			reserve += sepWidth + lipgloss.Width(more) // room to say more would follow
		}
		if used+gap()+hintWidth(h)+reserve > width {
			if used+gap()+lipgloss.Width(more) <= width {
				add(desc.Render(more), lipgloss.Width(more))
			}
			break
		}
		add(key.Render(h.Key)+" "+desc.Render(h.Desc), hintWidth(h))
	}
	for _, h := range tail {
		if used+gap()+hintWidth(h) > width {
			break // a terminal too narrow even for these
		}
		add(key.Render(h.Key)+" "+desc.Render(h.Desc), hintWidth(h))
	}
	return b.String()
}

// KeyColumns is the full key help (`?`): one column per group, as many
// columns as fit in width.
func (t TUI) KeyColumns(groups [][]KeyHint, width int) []string {
	key, desc := t.style(plain().Bold(true)), t.style(plain().Faint(true))
	var lines []string
	used := 0
	for _, g := range groups {
		kw, dw := 0, 0
		for _, h := range g {
			kw, dw = max(kw, lipgloss.Width(h.Key)), max(dw, lipgloss.Width(h.Desc))
		}
		colWidth := kw + 1 + dw
		gap := 0
		if used > 0 {
			gap = 4
		}
		if used+gap+colWidth > width {
			break
		}
		for i, h := range g {
			for len(lines) <= i {
				lines = append(lines, strings.Repeat(" ", used))
			}
			cur := lipgloss.Width(lines[i])
			lines[i] += strings.Repeat(" ", used+gap-cur) + key.Render(padRight(h.Key, kw)) + " " + desc.Render(padRight(h.Desc, dw))
		}
		for i := len(g); i < len(lines); i++ {
			lines[i] += strings.Repeat(" ", used+gap+colWidth-lipgloss.Width(lines[i]))
		}
		used += gap + colWidth
	}
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return lines
}

// TUIColumn is one column of a TUI list.
type TUIColumn struct {
	Name  string
	Right bool
	// Keep marks an identifier (id, event ID, category, disposition):
	// never cut. Free text shrinks first, down to Min columns.
	Keep bool
	Min  int
}

// TUIList draws rows[top:top+height] of a list in width columns, the row
// at cursor marked. Widths follow the rows given (one page), so a page of
// short IDs leaves more room for the error text.
func (t TUI) TUIList(cols []TUIColumn, rows [][]string, cursor, top, height, width int) string {
	const marker, gap = 2, 2
	widths := tuiWidths(cols, rows, width, marker, gap)
	cell := func(s string, i int) string {
		s = Truncate(s, widths[i])
		if cols[i].Right {
			return strings.Repeat(" ", widths[i]-lipgloss.Width(s)) + s
		}
		return padRight(s, widths[i])
	}
	line := func(r []string) string {
		parts := make([]string, len(cols))
		for i := range cols {
			v := ""
			if i < len(r) {
				v = r[i]
			}
			parts[i] = cell(v, i)
		}
		// Identifiers wider than the terminal itself are cut at its edge
		// rather than wrapped into the next row.
		return Truncate(strings.TrimRight(strings.Join(parts, strings.Repeat(" ", gap)), " "), width-marker)
	}
	var b strings.Builder
	head := make([]string, len(cols))
	for i, c := range cols {
		head[i] = strings.ToUpper(c.Name)
	}
	b.WriteString("  " + t.style(plain().Bold(true)).Render(line(head)))
	end := min(len(rows), top+height)
	for i := top; i < end; i++ {
		b.WriteByte('\n')
		l := line(rows[i])
		if i == cursor {
			b.WriteString("› " + t.style(plain().Reverse(true)).Render(l))
			continue
		}
		b.WriteString("  " + l)
	}
	return b.String()
}

// tuiWidths are the columns' widths for rows in width columns, with room
// for the cursor marker and the gaps between columns: each column as wide
// as its widest cell, then the widest free text shrunk until the row fits.
func tuiWidths(cols []TUIColumn, rows [][]string, width, marker, gap int) []int {
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = lipgloss.Width(c.Name)
	}
	for _, r := range rows {
		for i := range cols {
			if i < len(r) {
				// Capped, so that a huge error text costs no more than a long one.
				widths[i] = max(widths[i], lipgloss.Width(Truncate(r[i], width)))
			}
		}
	}
	total := func() int {
		n := marker
		for _, w := range widths {
			n += w
		}
		return n + gap*(len(widths)-1)
	}
	// Shrink the widest free-text column a column at a time: the error
	// text goes before the origin, and identifiers never do.
	// Min is a floor only while the identifiers fit: below it, free text
	// goes down to one column before anything else.
	for _, useMin := range []bool{true, false} {
		for total() > width {
			best := -1
			for i, c := range cols {
				floor := 1
				if useMin {
					floor = max(c.Min, 1)
				}
				if !c.Keep && widths[i] > floor && (best < 0 || widths[i] > widths[best]) {
					best = i
				}
			}
			if best < 0 {
				break
			}
			widths[best]--
		}
	}
	return widths
}

// TUILine cuts a line of plain text to width columns; the ui calls it on
// every free-text line before styling it, so nothing wraps on 80 columns.
func TUILine(s string, width int) string { return Truncate(s, width) }

// TUIWrap word-wraps plain text to width columns, control characters made
// harmless first: an envelope's text comes from whoever wrote to the DLQ,
// and must not drive the terminal.
func TUIWrap(s string, width int) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		line = Truncate(line, 0)
		if width <= 0 || lipgloss.Width(line) <= width {
			out = append(out, line)
			continue
		}
		wrapped := lipgloss.NewStyle().Width(width).Render(line)
		for _, w := range strings.Split(wrapped, "\n") {
			out = append(out, strings.TrimRight(w, " "))
		}
	}
	return out
}

// TUIField lays out one key and its value as `show` does, for the
// browser: the key bold, the value word-wrapped in the room beside it, and
// a word too wide for that room (a fingerprint, a URL) whole on a line of
// its own from the left edge, so that copying it from the screen gives one
// piece. Control characters are made harmless.
func (t TUI) TUIField(key, value string, keyWidth, width int) []string {
	valueWidth := max(width-keyWidth-2, minValueWidth)
	var lines []string
	for _, l := range strings.Split(value, "\n") {
		lines = append(lines, wrapWords(Truncate(l, 0), valueWidth)...)
	}
	return keyedLines(Truncate(key, 0), lines, keyWidth, width, t.Label)
}

// TUITitle is the browser's title line, "dlqctl ui · SOURCE · CRUMBS",
// fitted to width. The breadcrumb says where the operator is, so the
// source gives way first, cut from the left (its end names the DLQ, and a
// long absolute path must not hide the screen's name); only when that is
// not enough is the whole line cut.
func TUITitle(source, crumbs string, width int) string {
	source, crumbs = Truncate(source, 0), Truncate(crumbs, 0)
	const head, sep = "dlqctl ui · ", " · "
	line := head + source + sep + crumbs
	if width <= 0 || lipgloss.Width(line) <= width {
		return line
	}
	if room := width - lipgloss.Width(head+sep+crumbs) - lipgloss.Width(ellipsis); room >= 12 {
		rs := []rune(source)
		i, w := len(rs), 0
		for i > 0 {
			cw := lipgloss.Width(string(rs[i-1]))
			if w+cw > room {
				break
			}
			w += cw
			i--
		}
		line = head + ellipsis + string(rs[i:]) + sep + crumbs
	}
	return Truncate(line, width)
}
