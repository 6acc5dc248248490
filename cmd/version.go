package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

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
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("docs man: %w", err)
			}
			if err := writeManTree(root, header, dir); err != nil {
				return fmt.Errorf("docs man: %w", err)
			}
			fmt.Fprintf(f.IO.ErrOut, "man pages written to %s\n", dir)
			return nil
		},
	}
	man.Flags().StringVar(&dir, "dir", "man", "folder to write the pages into (created when missing)")
	var mdDir string
	md := &cobra.Command{
		Use:   "markdown",
		Short: "Write a markdown reference page for every command into --dir",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			root.DisableAutoGenTag = true
			if err := os.MkdirAll(mdDir, 0o755); err != nil {
				return fmt.Errorf("docs markdown: %w", err)
			}
			if err := doc.GenMarkdownTree(root, mdDir); err != nil {
				return fmt.Errorf("docs markdown: %w", err)
			}
			fmt.Fprintf(f.IO.ErrOut, "markdown written to %s\n", mdDir)
			return nil
		},
	}
	md.Flags().StringVar(&mdDir, "dir", "docs/commands", "folder to write the pages into (created when missing)")
	docs.AddCommand(man, md, newDocsBackendsCmd(f))
	return docs
}

// writeManTree writes a page for c and every command under it, as cobra's
// GenManTree names them, each with an EXIT STATUS section: cobra has no
// place for one.
func writeManTree(c *cobra.Command, header *doc.GenManHeader, dir string) error {
	for _, sub := range c.Commands() {
		if !sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
			continue
		}
		if err := writeManTree(sub, header, dir); err != nil {
			return err
		}
	}
	var page bytes.Buffer
	h := *header
	if err := doc.GenMan(c, &h, &page); err != nil {
		return err
	}
	name := strings.ReplaceAll(c.CommandPath(), " ", "-") + "." + header.Section
	return os.WriteFile(filepath.Join(dir, name), withExitStatus(page.Bytes()), 0o644)
}

// withExitStatus puts the EXIT STATUS section before SEE ALSO (or at the
// end), where man pages keep it.
func withExitStatus(page []byte) []byte {
	var sec strings.Builder
	sec.WriteString(".SH EXIT STATUS\n")
	for _, s := range exitStatuses() {
		sec.WriteString(".TP\n.B " + strconv.Itoa(s.Code) + "\n" + roffText(s.Meaning) + "\n")
	}
	text := string(page)
	if i := strings.Index(text, ".SH SEE ALSO"); i >= 0 {
		return []byte(text[:i] + sec.String() + "\n" + text[i:])
	}
	return []byte(strings.TrimRight(text, "\n") + "\n\n" + sec.String())
}

// roffText escapes a line of plain text for roff: backslashes, and a
// leading dot or quote that would read as a request.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
