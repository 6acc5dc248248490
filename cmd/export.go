package cmd

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/inspect"
	"github.com/dlqctl/dlqctl/internal/atomicfile"
	"github.com/dlqctl/dlqctl/report"
)

// exportOptions is what export writes and with what: the flags, the
// streams, and how it opens the source.
type exportOptions struct {
	IO *IOStreams
	// OpenSession opens the source in effect with the category rules in
	// effect.
	OpenSession func(context.Context) (*session, error)

	sel selectorFlags
	out string
}

// newExportCmd builds export; runF, when not nil, runs instead of
// runExport.
func newExportCmd(f *Factory, runF func(context.Context, *exportOptions) error) *cobra.Command {
	opts := &exportOptions{}
	c := &cobra.Command{
		Use:   "export",
		Short: "Write envelopes as NDJSON, for a backup or to move a DLQ",
		Long: `Write the selected envelopes as NDJSON, one canonical envelope
(dlqctl.envelope/v1) a line, in dead-letter order. Malformed entries are
kept with their original bytes ("raw") and the reason ("malformed"), so an
export loses nothing. Fingerprints that dlqctl computed are not written:
only what the producer carried. --out writes the file atomically, mode 0600.`,
		Example: `  dlqctl export --source redis://127.0.0.1:6379/0?stream=orders-dlq --out backup.ndjson
  dlqctl export --category transient | dlqctl import --source dir:/tmp/replay`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			opts.IO, opts.OpenSession = f.IO, f.openSession
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runExport(c.Context(), opts)
		},
	}
	opts.sel.register(c.Flags(), 0)
	c.Flags().StringVar(&opts.out, "out", "", "write to this file instead of stdout (- is stdout)")
	return c
}

func runExport(ctx context.Context, opts *exportOptions) error {
	if opts.out == "-" {
		// As every tool that takes a file reads "-": stdout, not a file
		// named "-".
		opts.out = ""
	}
	sel, err := opts.sel.selector()
	if err != nil {
		return err
	}
	s, err := opts.OpenSession(ctx)
	if err != nil {
		return err
	}
	defer s.src.Close()
	if err := checkCategories("--category", sel.Categories, s.walker.Classifier); err != nil {
		return err
	}
	conflicts, err := s.walker.Conflicts(ctx)
	if err != nil {
		return err
	}
	n := 0
	write := func(w io.Writer) error {
		_, err := s.walker.Walk(ctx, conflicts, sel, "", func(it inspect.Item) error {
			e := it.Envelope
			e.Fingerprint = e.CarriedFingerprint()
			n++
			return report.WriteNDJSON(w, e)
		})
		return err
	}
	if err := exportTo(opts.IO.Out, opts.out, write); err != nil {
		return err
	}
	dest := "stdout"
	if opts.out != "" {
		dest = opts.out
	}
	fmt.Fprintf(opts.IO.ErrOut, "exported %s from %s to %s\n", entries(n), s.src, dest)
	return nil
}

// exportTo runs write against stdout, or, with out set, against a file
// replaced atomically (mode 0600, synced with its folder) so that a
// failed export leaves the previous file whole. Errors of the file are
// prefixed "export:"; errors of write (reading the DLQ) are returned as
// they are.
func exportTo(stdout io.Writer, out string, write func(io.Writer) error) error {
	if out == "" {
		return write(stdout)
	}
	var writeErr error
	err := atomicfile.WriteFunc(out, 0o600, func(file io.Writer) error {
		bw := bufio.NewWriter(file)
		if writeErr = write(bw); writeErr != nil {
			return writeErr
		}
		return bw.Flush()
	})
	if writeErr != nil {
		return writeErr
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}
