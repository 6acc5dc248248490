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
	root := NewRootCmd(&Factory{Deps: Deps{Backends: testBackends(), IO: io, Getenv: func(string) string { return "" }}})
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

// TestOneCategoryOrder: stats, categorize and sample list the incident's
// categories in the same order (by count, largest first).
func TestOneCategoryOrder(t *testing.T) {
	src := incidentSource(t)
	order := func(out string, col int, skipTo string) []string {
		var names []string
		seen := map[string]bool{}
		in := skipTo == ""
		for _, l := range strings.Split(out, "\n") {
			if !in {
				in = l == skipTo
				continue
			}
			if l == "" {
				if len(names) > 0 && skipTo != "" {
					break
				}
				continue
			}
			f := strings.Split(l, "\t")
			if len(f) <= col || f[col] == "CATEGORY" || seen[f[col]] {
				continue
			}
			seen[f[col]] = true
			names = append(names, f[col])
		}
		return names
	}
	stats, _, _ := run(t, nil, "--source", src, "stats")
	cat, _, _ := run(t, nil, "--source", src, "categorize")
	sample, _, _ := run(t, nil, "--source", src, "sample", "--seed", "1")
	want := strings.Join(order(stats, 0, "CATEGORY\tCOUNT"), " ")
	if want != "transient schema missing-reference code-defect permission unknown malformed conflict" {
		t.Fatalf("stats orders categories %s", want)
	}
	for name, got := range map[string][]string{"categorize": order(cat, 0, ""), "sample": order(sample, 0, "")} {
		if strings.Join(got, " ") != want {
			t.Errorf("%s orders categories %v, stats %s", name, got, want)
		}
	}
}
