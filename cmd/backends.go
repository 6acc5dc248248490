package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newDocsBackendsCmd prints docs/backends.md from the backend registry.
func newDocsBackendsCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "backends",
		Short:   "Print the backend capability table (docs/backends.md) from the registry",
		Example: "  dlqctl docs backends > docs/backends.md",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			_, err := fmt.Fprint(f.IO.Out, f.Backends.Markdown())
			return err
		},
	}
}
