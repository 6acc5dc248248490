package report

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Gauge is one OpenMetrics gauge family: a name, its help text, and one
// sample per label set.
type Gauge struct {
	Name    string
	Help    string
	Samples []Sample
}

// Sample is one value of a gauge with its labels.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// WriteOpenMetrics writes gauges in the OpenMetrics text format (what a
// node_exporter textfile collector or a CI artefact reads): TYPE and HELP
// per family, labels sorted and escaped, and the closing "# EOF".
func WriteOpenMetrics(w io.Writer, gauges []Gauge) error {
	bw := bufio.NewWriter(w)
	for _, g := range gauges {
		fmt.Fprintf(bw, "# TYPE %s gauge\n", g.Name)
		if g.Help != "" {
			fmt.Fprintf(bw, "# HELP %s %s\n", g.Name, escapeHelp(g.Help))
		}
		for _, s := range g.Samples {
			bw.WriteString(g.Name)
			if len(s.Labels) > 0 {
				keys := make([]string, 0, len(s.Labels))
				for k := range s.Labels {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				bw.WriteString("{")
				for i, k := range keys {
					if i > 0 {
						bw.WriteString(",")
					}
					fmt.Fprintf(bw, "%s=\"%s\"", k, escapeLabel(s.Labels[k]))
				}
				bw.WriteString("}")
			}
			fmt.Fprintf(bw, " %s\n", strconv.FormatFloat(s.Value, 'g', -1, 64))
		}
	}
	bw.WriteString("# EOF\n")
	return bw.Flush()
}

// escapeLabel escapes a label value: backslash, double quote and newline.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}
