package ui

import (
	"context"
	"errors"
	"io"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
)

// Run draws the browser on the terminal (in, out) until the user quits or
// ctx ends; it returns ctx's error in the second case.
func Run(ctx context.Context, d Deps, in io.Reader, out io.Writer) error {
	m := New(ctx, d)
	opts := []tea.ProgramOption{
		tea.WithContext(ctx),
		tea.WithInput(in),
		tea.WithOutput(out),
		// The command's context already stops on SIGINT and SIGTERM; two
		// handlers would race to report it.
		tea.WithoutSignalHandler(),
	}
	if d.Styles.NoColor() {
		// No escape but the ones that move the cursor and clear.
		opts = append(opts, tea.WithColorProfile(colorprofile.NoTTY))
	}
	// The program decides its colours from the environment and asks the
	// terminal nothing it must wait for: the only query it sends (which
	// redraw modes the terminal has) is answered, or not, as input, so a
	// terminal that never answers costs no time and no key.
	p := tea.NewProgram(m, opts...)
	_, err := p.Run()
	if err != nil && ctx.Err() != nil && errors.Is(err, tea.ErrProgramKilled) {
		return ctx.Err()
	}
	return err
}
