package report

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"charm.land/lipgloss/v2"
)

// Bar is one bucket of a histogram.
type Bar struct {
	Label string
	Count int64
}

const (
	// labelMaxWidth caps a bar's label in display columns.
	labelMaxWidth = 30
	// minBarWidth is the longest bar drawn even on a very narrow terminal.
	minBarWidth = 10
)

// WriteHistogram draws a horizontal bar chart on a terminal, the longest bar
// filling the width left after labels and counts; writes "label<TAB>count"
// lines when piped; and a label/count markdown table in markdown.
func WriteHistogram(w io.Writer, title string, bars []Bar, o Options) error {
	m, err := o.mode("a histogram")
	if err != nil {
		return err
	}
	labels := make([]string, len(bars))
	counts := make([]string, len(bars))
	for i, b := range bars {
		labels[i] = Truncate(b.Label, labelMaxWidth)
		counts[i] = strconv.FormatInt(b.Count, 10)
	}
	bw := bufio.NewWriter(w)
	switch m {
	case modeTTY:
		re := o.renderer(w)
		if title != "" {
			fmt.Fprintln(bw, re.text(o.bold(re).Render(Truncate(title, 0))))
		}
		bar := re.NewStyle()
		if !o.NoColor {
			bar = bar.Foreground(lipgloss.Color("4"))
		}
		labelWidth, countWidth := 0, 0
		var most int64
		for i, b := range bars {
			labelWidth = max(labelWidth, lipgloss.Width(labels[i]))
			countWidth = max(countWidth, len(counts[i]))
			most = max(most, b.Count)
		}
		barWidth := max(o.width()-labelWidth-countWidth-2, minBarWidth)
		for i, b := range bars {
			n := 0
			if b.Count > 0 {
				n = max(1, int(math.Round(float64(b.Count)/float64(most)*float64(barWidth))))
			}
			line := padRight(labels[i], labelWidth) + " "
			if n > 0 {
				line += bar.Render(strings.Repeat("█", n)) + " "
			}
			fmt.Fprintln(bw, re.text(line+counts[i]))
		}
	case modePlain:
		for i := range bars {
			fmt.Fprintf(bw, "%s\t%s\n", labels[i], counts[i])
		}
	case modeMarkdown:
		if title != "" {
			fmt.Fprintf(bw, "### %s\n\n", Truncate(title, 0))
		}
		fmt.Fprintln(bw, markdownRow([]string{"label", "count"}))
		fmt.Fprintln(bw, markdownSeparator(2))
		for i := range bars {
			fmt.Fprintln(bw, markdownRow([]string{labels[i], counts[i]}))
		}
	}
	return bw.Flush()
}
