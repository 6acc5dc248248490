package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"charm.land/lipgloss/v2"
)

// Field is one line of a key/value block; Value takes the same kinds as a
// table cell.
type Field struct {
	Key   string
	Value any
}

// Block is a multi-line value (a pretty-printed payload): on a terminal its
// lines are drawn under the key, each made safe; piped it is Flat, one line;
// in markdown it follows the table as a fenced code block. Nothing is cut.
type Block struct {
	Lines []string
	Flat  string
	Lang  string // the fence's info string in markdown, e.g. "json"
}

// Command is a value someone copies to run (a resume command): on a
// terminal it is never wrapped, so that it pastes as one line. When it
// does not fit beside its key it goes whole on a line of its own.
type Command string

const (
	// keyMaxWidth: on a terminal, keys up to this wide set the column the
	// values line up in; a longer key goes whole on a line of its own, so
	// that one long key cannot push every value off the screen.
	keyMaxWidth = 30
	// minValueWidth is the narrowest a value is wrapped to on a terminal.
	minValueWidth = 20
)

// WriteFields writes a key/value block (show, the stats headline): aligned
// bold keys with values word-wrapped to the terminal width on a terminal
// (a value too wide for its room, such as a digest or a URL, goes whole on
// a line of its own), times
// shown both exactly and relatively; "key<TAB>value" lines when piped; a
// two-column markdown table in markdown.
func WriteFields(w io.Writer, title string, fs []Field, o Options) error {
	m, err := o.mode("a key/value block")
	if err != nil {
		return err
	}
	now := o.now()
	c := fieldCells{keys: make([]string, len(fs)), values: make([]string, len(fs)), blocks: make([]*Block, len(fs)), whole: make([]bool, len(fs))}
	for i, f := range fs {
		// Never cut: six kafka_dlt-original-* headers must stay apart.
		c.keys[i] = Truncate(f.Key, 0)
		_, c.whole[i] = f.Value.(Command)
		if b, ok := f.Value.(Block); ok {
			c.blocks[i] = &b
			c.values[i] = Truncate(b.Flat, 0)
			continue
		}
		c.values[i] = Truncate(text(f.Value, m, now, true), 0)
	}
	bw := bufio.NewWriter(w)
	switch m {
	case modeTTY:
		writeFieldsTTY(bw, o.renderer(w), title, c, o)
	case modePlain:
		for i, k := range c.keys {
			fmt.Fprintf(bw, "%s\t%s\n", k, c.values[i])
		}
	case modeMarkdown:
		writeFieldsMarkdown(bw, title, c)
	}
	return bw.Flush()
}

// fieldCells are a key/value block's keys and values as text; blocks[i]
// is field i's Block, nil when its value is not one.
type fieldCells struct {
	keys, values []string
	blocks       []*Block
	// whole[i]: field i's value is never wrapped (a Command).
	whole []bool
}

// writeFieldsTTY writes the block for a terminal: bold keys aligned, values
// wrapped to the room left.
func writeFieldsTTY(bw *bufio.Writer, re renderer, title string, c fieldCells, o Options) {
	bold := o.bold(re)
	if title != "" {
		fmt.Fprintln(bw, re.text(bold.Render(Truncate(title, 0))))
	}
	keyWidth := 0
	for _, k := range c.keys {
		if w := lipgloss.Width(k); w <= keyMaxWidth {
			keyWidth = max(keyWidth, w)
		}
	}
	valueWidth := max(o.width()-keyWidth-2, minValueWidth)
	wrap := re.NewStyle().Width(valueWidth)
	styleKey := func(k string) string { return bold.Render(k) }
	for i, k := range c.keys {
		var lines []string
		if b := c.blocks[i]; b != nil {
			for _, l := range b.Lines {
				// Keep the block's indentation; wrap only what is too long.
				lines = append(lines, strings.Split(wrap.Render(Truncate(l, 0)), "\n")...)
			}
		} else if c.whole[i] {
			lines = []string{c.values[i]}
		} else {
			lines = wrapWords(c.values[i], valueWidth)
		}
		for _, line := range keyedLines(k, lines, keyWidth, o.width(), styleKey) {
			fmt.Fprintln(bw, re.text(line))
		}
	}
}

// writeFieldsMarkdown writes the block as a two-column table, each Block
// after it in a code fence of its own.
func writeFieldsMarkdown(bw *bufio.Writer, title string, c fieldCells) {
	if title != "" {
		fmt.Fprintf(bw, "### %s\n\n", Truncate(title, 0))
	}
	fmt.Fprintln(bw, markdownRow([]string{"field", "value"}))
	fmt.Fprintln(bw, markdownSeparator(2))
	for i, k := range c.keys {
		v := c.values[i]
		if c.blocks[i] != nil {
			v = "(below)"
		}
		fmt.Fprintln(bw, markdownRow([]string{k, v}))
	}
	for i, b := range c.blocks {
		if b == nil {
			continue
		}
		fmt.Fprintf(bw, "\n**%s**\n\n", markdownCell(c.keys[i]))
		fence := "```"
		for strings.Contains(strings.Join(b.Lines, "\n"), fence) {
			fence += "`"
		}
		fmt.Fprintln(bw, fence+b.Lang)
		for _, l := range b.Lines {
			fmt.Fprintln(bw, Truncate(l, 0))
		}
		fmt.Fprintln(bw, fence)
	}
}
