package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"charm.land/lipgloss/v2"
)

// Age is a duration shown as an age: FormatAge on a terminal and in markdown,
// whole seconds when piped.
type Age time.Duration

// Unknown is a value nobody knows, such as the age of an entry without a
// dead-letter time: shown as "—" in every human-readable format (and null
// in JSON, which commands build themselves), never as 0.
type Unknown struct{}

// AgeOrUnknown is Age(d) when known, else Unknown.
func AgeOrUnknown(d time.Duration, known bool) any {
	if !known {
		return Unknown{}
	}
	return Age(d)
}

// ellipsis ends every cut string.
const ellipsis = "…"

// Truncate makes s safe to put in one table cell: invalid UTF-8 bytes become
// U+FFFD, control characters (tab and newline included), line separators and
// bidi overrides become a space, and a string wider than max display columns
// is cut to max columns, the last one being "…". max <= 0 means no limit.
//
// It reads only as much of s as it needs, so a 1 MiB payload costs no more
// than a short one. A run of zero-width runes (combining marks) longer than
// 4*max is cut too, so it cannot smuggle an unbounded string into a cell.
func Truncate(s string, max int) string {
	var b strings.Builder
	width, runes := 0, 0
	keep := 0 // b.Len() at the last rune that still leaves room for the ellipsis
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		r = safeRune(r)
		w := lipgloss.Width(string(r))
		if max > 0 && (width+w > max || runes >= 4*max) {
			return b.String()[:keep] + ellipsis
		}
		width += w
		runes++
		b.WriteRune(r)
		if width <= max-1 {
			keep = b.Len()
		}
	}
	return b.String()
}

// safeRune replaces what would break a table line or reorder the terminal's
// text. utf8.RuneError from an invalid byte is already U+FFFD.
func safeRune(r rune) rune {
	switch {
	case unicode.IsControl(r),
		r == '\u2028', r == '\u2029', // line and paragraph separators
		r >= '\u202a' && r <= '\u202e', // bidi embeddings and overrides
		r >= '\u2066' && r <= '\u2069': // bidi isolates
		return ' '
	}
	return r
}

// FormatAge shows a duration the way an operator reads an age: "45s", "12m",
// "3h4m", "2d5h". Units below the two largest are dropped; a zero second unit
// is omitted ("3h", "2d").
func FormatAge(d time.Duration) string {
	if d < 0 {
		if d == -d { // math.MinInt64
			d = -(d + 1)
		} else {
			d = -d
		}
		return "-" + FormatAge(d)
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 86400:
		return twoUnits(s/3600, "h", s%3600/60, "m")
	default:
		return twoUnits(s/86400, "d", s%86400/3600, "h")
	}
}

func twoUnits(big int64, bigUnit string, small int64, smallUnit string) string {
	if small == 0 {
		return fmt.Sprintf("%d%s", big, bigUnit)
	}
	return fmt.Sprintf("%d%s%d%s", big, bigUnit, small, smallUnit)
}

// relative is a point in time as seen from now: "5m ago", "in 3h".
func relative(t, now time.Time) string {
	if t.After(now) {
		return "in " + FormatAge(t.Sub(now))
	}
	return FormatAge(now.Sub(t)) + " ago"
}

// rfc3339 is the one format for times that leave the terminal.
func rfc3339(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}

// text is the unstyled, unsanitized text of a cell or field value. long asks
// for the fuller form used in key/value blocks, where an operator wants the
// exact time as well as how long ago it was.
func text(v any, m mode, now time.Time, long bool) string {
	switch x := v.(type) {
	case nil:
		return ""
	case Unknown:
		return "—"
	case string:
		return x
	case Command:
		return string(x)
	case []byte:
		return string(x)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return timeText(x, m, now, long)
	case *time.Time:
		if x == nil {
			return ""
		}
		return timeText(*x, m, now, long)
	case Age:
		if m == modePlain {
			return strconv.FormatInt(int64(time.Duration(x)/time.Second), 10)
		}
		return FormatAge(time.Duration(x))
	default:
		// fmt calls String or Error and survives nil receivers.
		return fmt.Sprint(x)
	}
}

func timeText(t time.Time, m mode, now time.Time, long bool) string {
	switch {
	case t.IsZero():
		return ""
	case m != modeTTY:
		return rfc3339(t)
	case long:
		return rfc3339(t) + " (" + relative(t, now) + ")"
	default:
		return relative(t, now)
	}
}

// padRight pads s with spaces to width display columns.
func padRight(s string, width int) string {
	if n := width - lipgloss.Width(s); n > 0 {
		return s + strings.Repeat(" ", n)
	}
	return s
}

// markdownCell escapes what would end a GitHub table cell early; s is
// already free of newlines.
func markdownCell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

func markdownRow(cells []string) string {
	var b strings.Builder
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" ")
		b.WriteString(markdownCell(c))
		b.WriteString(" |")
	}
	return b.String()
}

func markdownSeparator(n int) string {
	return "|" + strings.Repeat("---|", n)
}

// AgeSeconds is the age of seconds, or Unknown when seconds is nil (the
// JSON form of an unknown age).
func AgeSeconds(seconds *int64) any {
	if seconds == nil {
		return Unknown{}
	}
	return Age(time.Duration(*seconds) * time.Second)
}

// Thousands writes 1000000 as 1,000,000: counts that climb during a scan
// are read at a glance.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
