package cmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// helpWidth is the width help is wrapped to when the terminal's is not
// known (piped into a pager or a file).
const helpWidth = 80

// usageFunc writes cobra's usage text with the flag descriptions wrapped
// to the terminal (pflag's FlagUsagesWrapped), each continuation lined up
// under its description, instead of one line per flag that the terminal
// folds back to its left edge.
func usageFunc(f *Factory) func(*cobra.Command) error {
	return func(c *cobra.Command) error {
		width := helpWidth
		if f.IO.OutTTY && f.IO.Width > 0 {
			width = f.IO.Width
		}
		// pflag lets a description's last line run up to 4 columns past
		// the width it is given rather than leave a short word alone.
		writeUsage(c.OutOrStderr(), c, width-4)
		return nil
	}
}

// writeUsage follows cobra's default usage template (this CLI uses no
// command groups or aliases).
func writeUsage(w io.Writer, c *cobra.Command, width int) {
	fmt.Fprint(w, "Usage:")
	if c.Runnable() {
		fmt.Fprintf(w, "\n  %s", c.UseLine())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\n  %s [command]", c.CommandPath())
	}
	if c.HasExample() {
		fmt.Fprintf(w, "\n\nExamples:\n%s", c.Example)
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\n\nAvailable Commands:")
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() || sub.Name() == "help" {
				fmt.Fprintf(w, "\n  %-*s %s", sub.NamePadding(), sub.Name(), sub.Short)
			}
		}
	}
	if c.HasAvailableLocalFlags() {
		fmt.Fprintf(w, "\n\nFlags:\n%s", strings.TrimRight(c.LocalFlags().FlagUsagesWrapped(width), " \n"))
	}
	if c.HasAvailableInheritedFlags() {
		fmt.Fprintf(w, "\n\nGlobal Flags:\n%s", strings.TrimRight(c.InheritedFlags().FlagUsagesWrapped(width), " \n"))
	}
	if c.HasHelpSubCommands() {
		fmt.Fprintf(w, "\n\nAdditional help topics:")
		for _, sub := range c.Commands() {
			if sub.IsAdditionalHelpTopicCommand() {
				fmt.Fprintf(w, "\n  %-*s %s", sub.CommandPathPadding(), sub.CommandPath(), sub.Short)
			}
		}
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\n\nUse \"%s [command] --help\" for more information about a command.", c.CommandPath())
	}
	fmt.Fprintln(w)
}
