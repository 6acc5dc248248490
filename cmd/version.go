package cmd

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

func newVersionCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the commit it was built from",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			b := f.Build
			if f.format.IsJSON() {
				doc := struct {
					Schema  string `json:"schema"`
					Version string `json:"version"`
					Commit  string `json:"commit"`
					Date    string `json:"date,omitempty"`
					Go      string `json:"go"`
				}{"dlqctl.version/v1", b.Version, b.Commit, b.Date, runtime.Version()}
				_, err := f.emitJSON(doc)
				return err
			}
			_, err := fmt.Fprintf(f.IO.Out, "dlqctl %s (commit %s, %s)\n", b.Version, b.Commit, runtime.Version())
			return err
		},
	}
}

func newDocsCmd(f *Factory, root *cobra.Command) *cobra.Command {
	docs := &cobra.Command{Use: "docs", Short: "Generate documentation"}
	var dir string
	man := &cobra.Command{
		Use:   "man",
		Short: "Write man pages for every command into --dir",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			root.DisableAutoGenTag = true
			header := &doc.GenManHeader{Title: "DLQCTL", Section: "1", Source: "dlqctl " + f.Build.Version}
			if err := doc.GenManTree(root, header, dir); err != nil {
				return fmt.Errorf("docs man: %w", err)
			}
			fmt.Fprintf(f.IO.ErrOut, "man pages written to %s\n", dir)
			return nil
		},
	}
	man.Flags().StringVar(&dir, "dir", "man", "folder to write the pages into (must exist)")
	var mdDir string
	md := &cobra.Command{
		Use:   "markdown",
		Short: "Write a markdown reference page for every command into --dir",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			root.DisableAutoGenTag = true
			if err := doc.GenMarkdownTree(root, mdDir); err != nil {
				return fmt.Errorf("docs markdown: %w", err)
			}
			fmt.Fprintf(f.IO.ErrOut, "markdown written to %s\n", mdDir)
			return nil
		},
	}
	md.Flags().StringVar(&mdDir, "dir", "docs/commands", "folder to write the pages into (must exist)")
	docs.AddCommand(man, md, newDocsBackendsCmd(f))
	return docs
}
