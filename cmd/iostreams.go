package cmd

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams are a command's standard streams and what is known about them.
// Data goes to Out; progress, prompts and logs to ErrOut.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	InTTY  bool
	OutTTY bool
	ErrTTY bool
	// Width is the terminal's width in columns when Out is one (0:
	// unknown); ErrWidth the same for ErrOut, which messages and progress
	// are fitted to.
	Width    int
	ErrWidth int
	// Height is the terminal's height in lines when Out is one (0:
	// unknown); a view that repaints the screen (stats --watch) fits it.
	Height int
}

// SystemIO wraps the process's streams.
func SystemIO() *IOStreams {
	io := &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	io.InTTY = term.IsTerminal(int(os.Stdin.Fd()))
	io.OutTTY = term.IsTerminal(int(os.Stdout.Fd()))
	io.ErrTTY = term.IsTerminal(int(os.Stderr.Fd()))
	if io.OutTTY {
		if w, h, err := term.GetSize(int(os.Stdout.Fd())); err == nil {
			io.Width, io.Height = w, h
		}
	}
	if io.ErrTTY {
		if w, _, err := term.GetSize(int(os.Stderr.Fd())); err == nil {
			io.ErrWidth = w
		}
	}
	return io
}

// TestIO returns streams backed by buffers, none of them a terminal.
func TestIO() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// CanPrompt says whether a person can answer a question.
func (s *IOStreams) CanPrompt() bool { return s.InTTY && s.ErrTTY }
