package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// Field is one line of a key/value block; Value takes the same kinds as a
// table cell.
type Field struct {
	Key   string
	Value any
}

const (
	// fieldMaxWidth caps a value in display columns; -o json shows it all.
	fieldMaxWidth = 4096
	// keyMaxWidth caps a key so that one long key cannot push every value
	// off the screen.
	keyMaxWidth = 30
	// minValueWidth is the narrowest a value is wrapped to on a terminal.
	minValueWidth = 20
)

// WriteFields writes a key/value block (show, the stats headline): aligned
// bold keys with values wrapped to the terminal width on a terminal, times
// shown both exactly and relatively; "key<TAB>value" lines when piped; a
// two-column markdown table in markdown.
func WriteFields(w io.Writer, title string, fs []Field, o Options) error {
	m, err := o.mode("a key/value block")
	if err != nil {
		return err
	}
	now := o.now()
	keys := make([]string, len(fs))
	values := make([]string, len(fs))
	for i, f := range fs {
		keys[i] = Truncate(f.Key, keyMaxWidth)
		values[i] = Truncate(text(f.Value, m, now, true), fieldMaxWidth)
	}
	bw := bufio.NewWriter(w)
	switch m {
	case modeTTY:
		re := o.renderer(w)
		bold := o.bold(re)
		if title != "" {
			fmt.Fprintln(bw, bold.Render(Truncate(title, 0)))
		}
		keyWidth := 0
		for _, k := range keys {
			keyWidth = max(keyWidth, lipgloss.Width(k))
		}
		valueWidth := max(o.width()-keyWidth-2, minValueWidth)
		wrap := re.NewStyle().Width(valueWidth)
		for i, k := range keys {
			lines := strings.Split(wrap.Render(values[i]), "\n")
			for j, line := range lines {
				lead := strings.Repeat(" ", keyWidth+2)
				if j == 0 {
					lead = bold.Render(k) + strings.Repeat(" ", keyWidth+2-lipgloss.Width(k))
				}
				fmt.Fprintln(bw, strings.TrimRight(lead+line, " "))
			}
		}
	case modePlain:
		for i, k := range keys {
			fmt.Fprintf(bw, "%s\t%s\n", k, values[i])
		}
	case modeMarkdown:
		if title != "" {
			fmt.Fprintf(bw, "### %s\n\n", Truncate(title, 0))
		}
		fmt.Fprintln(bw, markdownRow([]string{"field", "value"}))
		fmt.Fprintln(bw, markdownSeparator(2))
		for i, k := range keys {
			fmt.Fprintln(bw, markdownRow([]string{k, values[i]}))
		}
	}
	return bw.Flush()
}
