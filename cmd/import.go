package cmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// importOptions is what import reads and where it writes: the file and
// flags, the streams, and the source operations it calls out to.
type importOptions struct {
	IO *IOStreams
	// InitDLQ creates the source's DLQ (--init), where the backend can.
	InitDLQ func() error
	// OpenSource opens the source in effect.
	OpenSource func(context.Context) (backend.Source, error)
	// RefuseWhileLeased refuses to write while a run holds the source's
	// lease.
	RefuseWhileLeased func(context.Context, backend.Source) error

	file         string
	init         bool
	skipExisting bool
}

// newImportCmd builds import; runF, when not nil, runs instead of
// runImport.
func newImportCmd(f *Factory, runF func(context.Context, *importOptions) error) *cobra.Command {
	opts := &importOptions{}
	c := &cobra.Command{
		Use:   "import [FILE]",
		Short: "Add envelopes from an NDJSON export to the source DLQ",
		Long: `Read an NDJSON export (a file, or stdin when FILE is absent or -) and add
every envelope to the source DLQ. The whole input is checked first: a line
that is not an envelope, an id that appears twice, or an id the DLQ already
holds stops the import before anything is written (--skip-existing leaves
those out instead). --init creates a directory queue that does not exist yet.

Exit 6 (partial) when some envelopes were refused while writing — an id
that appeared in the DLQ after the check — and the others were imported;
the message names up to 10 refused ids.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.file = args[0]
			}
			opts.IO, opts.OpenSource, opts.RefuseWhileLeased = f.IO, f.openSource, refuseWhileLeased
			opts.InitDLQ = func() error { return initDLQ(f.Backends, f.source) }
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runImport(c.Context(), opts)
		},
	}
	c.Flags().BoolVar(&opts.init, "init", false, "create the directory queue's folders if missing (dir: only)")
	c.Flags().BoolVar(&opts.skipExisting, "skip-existing", false, "leave out envelopes whose id the DLQ already holds, instead of refusing")
	return c
}

// readRecords decodes every line of r, naming the line of the first error.
func readRecords(r io.Reader, name string) ([]envelope.Envelope, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 64<<20)
	var out []envelope.Envelope
	seen := map[string]int{}
	for line := 1; sc.Scan(); line++ {
		text := sc.Bytes()
		if len(strings.TrimSpace(string(text))) == 0 {
			continue
		}
		e, err := envelope.DecodeRecord(text)
		if err != nil {
			return nil, usageErrorf("%s:%d: %v", name, line, err)
		}
		if prev, dup := seen[e.ID]; dup {
			return nil, usageErrorf("%s:%d: id %q already on line %d", name, line, e.ID, prev)
		}
		seen[e.ID] = line
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return out, nil
}

func runImport(ctx context.Context, opts *importOptions) error {
	in, name := opts.IO.In, "stdin"
	if opts.file != "" && opts.file != "-" {
		file, err := os.Open(opts.file)
		if err != nil {
			return usageErrorf("import: %v", err)
		}
		defer file.Close()
		in, name = file, opts.file
	}
	records, err := readRecords(in, name)
	if err != nil {
		return err
	}
	if opts.init {
		if err := opts.InitDLQ(); err != nil {
			return err
		}
	}
	src, err := opts.OpenSource(ctx)
	if err != nil {
		return err
	}
	defer src.Close()
	imp, ok := src.(backend.Importer)
	if !ok {
		return usageErrorf("%s: this backend cannot import", src)
	}
	if err := opts.RefuseWhileLeased(ctx, src); err != nil {
		return err
	}
	present, err := presentIDs(ctx, imp, records)
	if err != nil {
		return err
	}
	skip := map[string]bool{}
	if len(present) > 0 {
		if !opts.skipExisting {
			return fmt.Errorf("import refused, nothing written: %s already in %s: %s (--skip-existing leaves them out)",
				entries(len(present)), src, firstIDs(present, 10))
		}
		for _, id := range present {
			skip[id] = true
		}
	}
	imported, failed, err := importRecords(ctx, imp, records, skip, opts.skipExisting)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "imported %s into %s", entries(imported), src)
	if len(skip) > 0 {
		fmt.Fprintf(opts.IO.ErrOut, ", left out %d already present", len(skip))
	}
	fmt.Fprintln(opts.IO.ErrOut)
	if len(failed) > 0 {
		return withCode(ExitPartial, fmt.Errorf("%s already present, not imported: %s", entries(len(failed)), firstIDs(failed, 10)))
	}
	return nil
}

// initDLQ is --init: the backend creates the DLQ of the source, where it
// can (a dir: queue's folders).
func initDLQ(backends *backend.Registry, source string) error {
	reg, err := backends.Lookup(source)
	if err != nil {
		return err
	}
	if reg.Init == nil {
		return usageErrorf("--init: %s backends create their DLQ on first write or not at all (it works for dir: sources)", reg.Name)
	}
	if err := reg.Init(source); err != nil {
		return fmt.Errorf("init %s: %w", backends.Display(source), err)
	}
	return nil
}

// presentIDs are the ids of records the DLQ holds already, asked before
// anything is written so that a refused import writes nothing.
func presentIDs(ctx context.Context, imp backend.Importer, records []envelope.Envelope) ([]string, error) {
	var present []string
	for _, e := range records {
		has, err := imp.Has(ctx, e.ID)
		if err != nil {
			return nil, err
		}
		if has {
			present = append(present, e.ID)
		}
	}
	return present, nil
}

// importRecords writes the records not in skip. One that turns out to be
// present already (written meanwhile) joins skip with skipExisting, and
// failed without it; any other error stops the import, saying how many
// went in before it.
func importRecords(ctx context.Context, imp backend.Importer, records []envelope.Envelope, skip map[string]bool, skipExisting bool) (imported int, failed []string, err error) {
	for _, e := range records {
		if skip[e.ID] {
			continue
		}
		if _, err := imp.Import(ctx, e); err != nil {
			if errors.Is(err, backend.ErrExists) && skipExisting {
				skip[e.ID] = true
				continue
			}
			if errors.Is(err, backend.ErrExists) {
				failed = append(failed, e.ID)
				continue
			}
			return imported, failed, fmt.Errorf("%w (imported %s before it)", err, entries(imported))
		}
		imported++
	}
	return imported, failed, nil
}

func firstIDs(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:n], ", ") + fmt.Sprintf(" and %d more", len(ids)-n)
}
