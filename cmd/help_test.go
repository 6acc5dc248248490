package cmd

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type pflagFlag = pflag.Flag

// Every runnable command's --help has an Examples: section, and no help
// text cites the product contract by section: users do not have it.
func TestHelpHasExamplesAndStandsAlone(t *testing.T) {
	io, _, _, _ := TestIO()
	root := NewRootCmd(&Factory{IO: io, Getenv: func(string) string { return "" }})
	walk(root, func(c *cobra.Command) {
		text := c.Short + c.Long + c.Example
		c.Flags().VisitAll(func(fl *pflagFlag) { text += fl.Usage })
		if strings.Contains(text, "SPEC") {
			t.Errorf("%s: help cites SPEC", c.CommandPath())
		}
		if c.Runnable() && !c.Hidden && c.Name() != "help" && c.Name() != "__complete" && c.Name() != "__completeNoDesc" &&
			c.CommandPath() != "dlqctl" && !strings.HasPrefix(c.Name(), "__") && strings.TrimSpace(c.Example) == "" {
			if len(c.Commands()) == 0 || c.RunE != nil {
				t.Errorf("%s --help has no Examples: section", c.CommandPath())
			}
		}
	})
}

// TestCompletionOffersWhatTheCommandTakes: -o completes the formats the
// command writes (openmetrics only for stats and check), and --source the
// URL schemes of the backends this build registers, then folders after
// dir:.
func TestCompletionOffersWhatTheCommandTakes(t *testing.T) {
	complete := func(args ...string) []string {
		out, _, _ := run(t, nil, append([]string{"__complete"}, args...)...)
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if l != "" && !strings.HasPrefix(l, ":") {
				lines = append(lines, l)
			}
		}
		return lines
	}
	if got := strings.Join(complete("list", "-o", ""), " "); got != "table wide json ndjson markdown" {
		t.Errorf("list -o completes %q", got)
	}
	if got := strings.Join(complete("stats", "-o", ""), " "); !strings.HasSuffix(got, "markdown openmetrics") {
		t.Errorf("stats -o completes %q", got)
	}
	got := strings.Join(complete("--source", ""), " ")
	for _, want := range []string{"dir:", "redis://", "rediss://", "kafka://", "sqs://", "pulsar://"} {
		if !strings.Contains(" "+got+" ", " "+want+" ") {
			t.Errorf("--source completes %q, without %s", got, want)
		}
	}
	if got := complete("--source", "dir:../testdata/inc"); !slices.Contains(got, "dir:../testdata/incident/") {
		t.Errorf("--source dir:../testdata/inc completes %q", got)
	}
}
