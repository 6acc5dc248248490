package cmd

import (
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
	root := NewRootCmd(&Factory{Deps: Deps{IO: io, Getenv: func(string) string { return "" }}})
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
