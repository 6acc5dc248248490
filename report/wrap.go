package report

import (
	"strings"

	"charm.land/lipgloss/v2"
)

// wrapWords breaks s (already made safe by Truncate) into lines of at most
// width display columns, at spaces. A word wider than width is never split:
// it gets a line of its own, whole, so that a digest, fingerprint or URL
// copied from the screen is one piece. width <= 0 means one line.
func wrapWords(s string, width int) []string {
	if width <= 0 || lipgloss.Width(s) <= width {
		return []string{s}
	}
	var lines []string
	line, lineWidth, started := "", 0, false
	// Split on single spaces so that runs of spaces inside the value are
	// kept; only the space a line breaks at is dropped.
	for _, word := range strings.Split(s, " ") {
		w := lipgloss.Width(word)
		switch {
		case !started:
			line, lineWidth, started = word, w, true
		case lineWidth+1+w <= width:
			line += " " + word
			lineWidth += 1 + w
		case word == "":
			// A space that does not fit ends the line; it is not carried.
		default:
			lines = append(lines, line)
			line, lineWidth = word, w
		}
	}
	return append(lines, line)
}

// breakWords is wrapWords for free text that may be cut: a word wider
// than width is broken across lines instead of kept whole.
func breakWords(s string, width int) []string {
	var out []string
	for _, l := range wrapWords(s, width) {
		for lipgloss.Width(l) > width {
			head := Truncate(l, width+1) // width columns and the ellipsis
			head = strings.TrimSuffix(head, ellipsis)
			out = append(out, head)
			l = l[len(head):]
		}
		out = append(out, l)
	}
	return out
}

// capLines keeps at most n lines, the last one ending in "…" when some
// were left out.
func capLines(lines []string, n, width int) []string {
	if n <= 0 || len(lines) <= n {
		return lines
	}
	lines = append([]string(nil), lines[:n]...)
	last := lines[n-1]
	if lipgloss.Width(last)+1 > width {
		// Room for the ellipsis: a line that fits exactly is cut too.
		last = Truncate(last, max(width-1, 1))
		if !strings.HasSuffix(last, ellipsis) {
			last += ellipsis
		}
	} else {
		last += ellipsis
	}
	lines[n-1] = last
	return lines
}

// keyedLines lays out one key and its value on a terminal of the given
// width: the key padded to keyWidth, then the value word-wrapped in the
// room left, continuation lines indented under the value. A key wider than
// keyWidth is written whole on a line of its own, its value under it. A
// word too wide for the value's room starts a line of its own at the left
// edge, whole, so that the terminal (which wraps without indenting) keeps
// it in one piece for copying. key is drawn by styleKey; the result is
// unstyled otherwise.
func keyedLines(key string, value []string, keyWidth, width int, styleKey func(string) string) []string {
	valueWidth := max(width-keyWidth-2, minValueWidth)
	indent := strings.Repeat(" ", keyWidth+2)
	var out []string
	lead := styleKey(key) + strings.Repeat(" ", max(keyWidth+2-lipgloss.Width(key), 0))
	if lipgloss.Width(key) > keyWidth {
		out = append(out, styleKey(key))
		lead = indent
	}
	first := true
	for _, v := range value {
		if lipgloss.Width(v) > valueWidth {
			if first {
				out = append(out, strings.TrimRight(lead, " "))
				first = false
			}
			out = append(out, v)
			continue
		}
		if first {
			out = append(out, strings.TrimRight(lead+v, " "))
			first = false
			continue
		}
		out = append(out, strings.TrimRight(indent+v, " "))
	}
	if first {
		out = append(out, strings.TrimRight(lead, " "))
	}
	return out
}

// WrapProse wraps the prose of a message to a terminal of the given width:
// each line that starts with a letter is word-wrapped, a word wider than
// width kept whole on a line of its own (an ID, a path). A line that
// starts with a space or a tab — a command to copy, a value set apart —
// is never wrapped: pasted, a wrapped command would be two. A "#" comment
// line wraps into comment lines, so that a pasted note stays a note.
// Control characters are made harmless. width <= 0 leaves the lines whole.
func WrapProse(s string, width int) string {
	lines := strings.Split(s, "\n")
	var out []string
	for _, l := range lines {
		l = Truncate(l, 0)
		switch {
		case width <= 0 || l == "" || l[0] == ' ' || l[0] == '\t' || lipgloss.Width(l) <= width:
			out = append(out, l)
		case l[0] == '#':
			body := strings.TrimLeft(strings.TrimPrefix(l, "#"), " ")
			for _, w := range wrapWords(body, width-2) {
				out = append(out, "# "+w)
			}
		default:
			out = append(out, wrapWords(l, width)...)
		}
	}
	return strings.Join(out, "\n")
}
