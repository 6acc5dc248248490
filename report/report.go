// Package report turns command results into output: lipgloss tables on a
// terminal, tab-separated text when piped, GitHub markdown, and JSON. It is the
// only package that knows about lipgloss or output formats; commands hand it
// data (strings, numbers, times, ages), never styled strings.
package report

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"
)

// Format is the value of the global -o/--output flag.
type Format string

const (
	FormatTable    Format = "table"
	FormatWide     Format = "wide"
	FormatJSON     Format = "json"
	FormatNDJSON   Format = "ndjson"
	FormatMarkdown Format = "markdown"
	// FormatOpenMetrics is the Prometheus/OpenMetrics text format; only
	// stats and check produce it (see WriteOpenMetrics).
	FormatOpenMetrics Format = "openmetrics"
)

// Formats lists every output format in the order help texts show them.
func Formats() []Format {
	return []Format{FormatTable, FormatWide, FormatJSON, FormatNDJSON, FormatMarkdown, FormatOpenMetrics}
}

// IsJSON says whether f is one of the JSON formats, where failures are
// also reported as a dlqctl.error/v1 document.
func (f Format) IsJSON() bool { return f == FormatJSON || f == FormatNDJSON }

// UnknownFormatError is returned by ParseFormat; callers map it to the usage
// exit code.
type UnknownFormatError struct {
	Value string
}

func (e *UnknownFormatError) Error() string {
	names := make([]string, 0, len(Formats()))
	for _, f := range Formats() {
		names = append(names, string(f))
	}
	return fmt.Sprintf("unknown output format %q (allowed: %s)", e.Value, strings.Join(names, ", "))
}

// ParseFormat checks the value of -o/--output.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats() {
		if s == string(f) {
			return f, nil
		}
	}
	return "", &UnknownFormatError{Value: s}
}

// defaultWidth is used when the terminal width is unknown.
const defaultWidth = 120

// Options describe where and how the human-readable writers draw.
type Options struct {
	Format Format
	// TTY: the writer is a terminal, so draw with lipgloss, show relative
	// ages, and colour unless NoColor. Colour also needs the writer itself to
	// be the terminal's *os.File; the colour profile comes from it and the
	// environment (TERM, COLORTERM, NO_COLOR, CLICOLOR_FORCE), never from a
	// query to the terminal.
	TTY bool
	// NoColor (--no-color, NO_COLOR) keeps the lipgloss borders on a terminal
	// but never emits an ANSI escape.
	NoColor bool
	// Width is the terminal width in columns; 0 means unknown (120).
	Width int
	// Now is the clock that ages and relative times are measured against; the
	// zero value means time.Now().
	Now time.Time

	// profile stands in for the colour profile detected from the writer, so
	// tests can draw in colour into a buffer. NoColor still wins.
	profile *colorprofile.Profile
}

// wide: nothing is cut, even on a terminal; a line wider than the
// terminal wraps.
func (o Options) wide() bool { return o.Format == FormatWide }

func (o Options) width() int {
	if o.Width > 0 {
		return o.Width
	}
	return defaultWidth
}

func (o Options) now() time.Time {
	if o.Now.IsZero() {
		return time.Now()
	}
	return o.Now
}

// renderer draws for one writer. Styles are drawn in full and then cut
// down to what the writer's colour profile can show: the profile is read
// from the writer and the environment only. Asking the terminal (its
// background colour, say) would make every command wait on a terminal that
// never answers, and leave the question in the output.
type renderer struct {
	profile colorprofile.Profile
}

// renderer follows the writer's colour profile, except that NoColor forces
// a profile that lets no escape sequence through.
func (o Options) renderer(w io.Writer) renderer {
	p := colorprofile.Detect(w, os.Environ())
	if o.profile != nil {
		p = *o.profile
	}
	if o.NoColor {
		p = colorprofile.NoTTY
	}
	return renderer{profile: p}
}

// NewStyle is a style to draw with; its output goes through text.
func (renderer) NewStyle() lipgloss.Style { return lipgloss.NewStyle() }

// text cuts the escape sequences of drawn text down to the profile:
// colours to the nearest the terminal has, and none at all without colour.
func (r renderer) text(s string) string {
	if r.profile == colorprofile.TrueColor || !strings.Contains(s, "\x1b") {
		return s
	}
	var b strings.Builder
	cw := &colorprofile.Writer{Forward: &b, Profile: r.profile}
	_, _ = io.WriteString(cw, s)
	return b.String()
}

// bold is the emphasis for titles, headers and keys.
func (o Options) bold(re renderer) lipgloss.Style {
	s := re.NewStyle()
	if !o.NoColor {
		s = s.Bold(true)
	}
	return s
}

// RowByRow says whether a table in this form is laid out one row at a time:
// tab-separated (piped) and markdown tables need no column widths, so a
// command may write each row as it comes through NewStream and get the
// bytes WriteTable would write, without holding the rows. A terminal
// table measures all its rows first.
func (o Options) RowByRow() bool {
	m, err := o.mode("a table")
	return err == nil && m != modeTTY
}

// mode is how a human-readable writer lays out its output.
type mode int

const (
	modeTTY      mode = iota // lipgloss, relative times
	modePlain                // tab-separated, RFC 3339, seconds
	modeMarkdown             // GitHub markdown table
)

func (o Options) mode(what string) (mode, error) {
	switch o.Format {
	case "", FormatTable, FormatWide:
		if o.TTY {
			return modeTTY, nil
		}
		return modePlain, nil
	case FormatMarkdown:
		return modeMarkdown, nil
	case FormatJSON, FormatNDJSON:
		// JSON documents carry a schema field, so the command builds them
		// and calls WriteJSON/WriteNDJSON itself.
		return 0, fmt.Errorf("report: %s cannot be written as %s; use WriteJSON or WriteNDJSON with a schema document", what, o.Format)
	case FormatOpenMetrics:
		return 0, fmt.Errorf("report: %s cannot be written as %s; use WriteOpenMetrics", what, o.Format)
	default:
		return 0, &UnknownFormatError{Value: string(o.Format)}
	}
}
