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

	"github.com/dlqctl/dlqctl/report"
)

// versionOptions is what version needs. Like every command's Options it
// is filled from the Factory when the command runs (the settings are
// resolved by then), and runVersion reads nothing else, so tests call it
// directly.
type versionOptions struct {
	IO     *IOStreams
	Build  BuildInfo
	Report report.Options
}

// newVersionCmd builds version; runF, when not nil, runs instead of
// runVersion (tests see the options the command line made).
func newVersionCmd(f *Factory, runF func(*versionOptions) error) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the commit it was built from",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			o := &versionOptions{IO: f.IO, Build: f.Build, Report: f.reportOptions()}
			if runF != nil {
				return runF(o)
			}
			return runVersion(o)
		},
	}
}

func runVersion(o *versionOptions) error {
	b := o.Build
	doc := struct {
		Schema  string `json:"schema"`
		Version string `json:"version"`
		Commit  string `json:"commit"`
		Date    string `json:"date,omitempty"`
		Go      string `json:"go"`
	}{"dlqctl.version/v1", b.Version, b.Commit, b.Date, runtime.Version()}
	if done, err := emitJSON(o.IO.Out, o.Report.Format, doc); done {
		return err
	}
	_, err := fmt.Fprintf(o.IO.Out, "dlqctl %s (commit %s, %s)\n", b.Version, b.Commit, runtime.Version())
	return err
}

// docsOptions is what docs man and docs markdown need.
type docsOptions struct {
	IO *IOStreams
	// Root is the command tree the pages describe.
	Root *cobra.Command
	// Version goes into the man pages' header.
	Version string
	// Dir is --dir, created when missing.
	Dir string
}

// newDocsCmd builds docs; runMan and runMarkdown, when not nil, run
// instead of writeManPages and writeMarkdownPages.
func newDocsCmd(f *Factory, root *cobra.Command, runMan, runMarkdown func(*docsOptions) error) *cobra.Command {
	docs := &cobra.Command{Use: "docs", Short: "Generate documentation"}
	manOpts := &docsOptions{Root: root}
	man := &cobra.Command{
		Use:   "man",
		Short: "Write man pages for every command into --dir",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			manOpts.IO, manOpts.Version = f.IO, f.Build.Version
			if runMan != nil {
				return runMan(manOpts)
			}
			return writeManPages(manOpts)
		},
	}
	man.Flags().StringVar(&manOpts.Dir, "dir", "man", "folder to write the pages into (created when missing)")
	mdOpts := &docsOptions{Root: root}
	md := &cobra.Command{
		Use:   "markdown",
		Short: "Write a markdown reference page for every command into --dir",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			mdOpts.IO, mdOpts.Version = f.IO, f.Build.Version
			if runMarkdown != nil {
				return runMarkdown(mdOpts)
			}
			return writeMarkdownPages(mdOpts)
		},
	}
	md.Flags().StringVar(&mdOpts.Dir, "dir", "docs/commands", "folder to write the pages into (created when missing)")
	docs.AddCommand(man, md, newDocsBackendsCmd(f))
	return docs
}

func writeManPages(o *docsOptions) error {
	o.Root.DisableAutoGenTag = true
	header := &doc.GenManHeader{Title: "DLQCTL", Section: "1", Source: "dlqctl " + o.Version}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return fmt.Errorf("docs man: %w", err)
	}
	if err := writeManTree(o.Root, header, o.Dir); err != nil {
		return fmt.Errorf("docs man: %w", err)
	}
	fmt.Fprintf(o.IO.ErrOut, "man pages written to %s\n", o.Dir)
	return nil
}

func writeMarkdownPages(o *docsOptions) error {
	o.Root.DisableAutoGenTag = true
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return fmt.Errorf("docs markdown: %w", err)
	}
	if err := doc.GenMarkdownTree(o.Root, o.Dir); err != nil {
		return fmt.Errorf("docs markdown: %w", err)
	}
	fmt.Fprintf(o.IO.ErrOut, "markdown written to %s\n", o.Dir)
	return nil
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
