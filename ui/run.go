package ui

import (
	"context"
	"errors"
	"io"

	tea "github.com/charmbracelet/bubbletea"
)

// Run draws the browser on the terminal (in, out) until the user quits or
// ctx ends; it returns ctx's error in the second case.
func Run(ctx context.Context, d Deps, in io.Reader, out io.Writer) error {
	m := New(ctx, d)
	p := tea.NewProgram(m,
		tea.WithContext(ctx),
		tea.WithInput(in),
		tea.WithOutput(out),
		tea.WithAltScreen(),
		// The command's context already stops on SIGINT and SIGTERM; two
		// handlers would race to report it.
		tea.WithoutSignalHandler(),
	)
	_, err := p.Run()
	if err != nil && ctx.Err() != nil && errors.Is(err, tea.ErrProgramKilled) {
		return ctx.Err()
	}
	return err
}
