package report

import (
	"fmt"
	"io"
	"strings"

	"charm.land/lipgloss/v2"
)

// Tone is what a coloured cell means; the colours follow it, so that red
// always means something failed or needs a person and green that it passed.
type Tone int

const (
	ToneNone Tone = iota
	ToneGood      // passed, applied, safe to redrive
	ToneBad       // failed gate, breach, conflict
	ToneWarn      // needs a person before anything moves
	ToneInfo      // terminal ends and other neutral states
)

func (o Options) tone(s lipgloss.Style, t Tone) lipgloss.Style {
	if o.NoColor {
		return s
	}
	switch t {
	case ToneGood:
		return s.Foreground(lipgloss.Color("2"))
	case ToneBad:
		return s.Foreground(lipgloss.Color("1"))
	case ToneWarn:
		return s.Foreground(lipgloss.Color("3"))
	case ToneInfo:
		return s.Foreground(lipgloss.Color("4"))
	}
	return s
}

// DispositionTone colours a disposition: redrive green, the ones that need
// a fix or a look yellow, quarantine red, resolve (a terminal end) blue.
func DispositionTone(d string) Tone {
	switch d {
	case "redrive":
		return ToneGood
	case "fix-then-redrive", "investigate":
		return ToneWarn
	case "quarantine":
		return ToneBad
	case "resolve":
		return ToneInfo
	}
	return ToneNone
}

// VerdictTone colours a reconciliation verdict or a gate result ("pass",
// "pending: 3 events …"): its first word decides.
func VerdictTone(v string) Tone {
	v, _, _ = strings.Cut(v, ":")
	switch strings.TrimSpace(v) {
	case "applied", "absorbed-duplicate", "pass", "passed", "ok", "completed":
		return ToneGood
	case "unverified", "interrupted", "warn":
		return ToneWarn
	case "":
		return ToneNone
	}
	return ToneBad
}

// WriteLine writes one line of status text, coloured by its tone on a
// colour terminal; on a terminal it is wrapped at words to its width
// (WrapProse).
func WriteLine(w io.Writer, t Tone, s string, o Options) error {
	s = Truncate(s, 0)
	if o.TTY && o.Format != FormatMarkdown {
		re := o.renderer(w)
		lines := strings.Split(WrapProse(s, o.width()), "\n")
		for i, l := range lines {
			lines[i] = re.text(o.tone(re.NewStyle(), t).Render(l))
		}
		s = strings.Join(lines, "\n")
	}
	_, err := fmt.Fprintln(w, s)
	return err
}
