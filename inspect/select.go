// Package inspect reads a DLQ through a backend.Source and answers the
// read-only questions: which entries match the selectors, their categories,
// stats, category summaries and samples. It streams: memory grows with the
// number of distinct event IDs, never with payloads.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

// Selector picks entries (the command contract selectors). The zero value picks all.
type Selector struct {
	Categories   []string
	Dispositions []string
	Origins      []string
	Error        *regexp.Regexp
	EventIDs     []string
	Owners       []string
	Overdue      bool
	OlderThan    time.Duration
	NewerThan    time.Duration
	MinAttempts  int
	// Limit ends the walk after this many matches (0: no limit).
	Limit int
}

// IsZero says whether s picks every entry.
func (s Selector) IsZero() bool {
	return len(s.Categories) == 0 && len(s.Dispositions) == 0 && len(s.Origins) == 0 && s.Error == nil &&
		len(s.EventIDs) == 0 && len(s.Owners) == 0 && !s.Overdue && s.OlderThan == 0 && s.NewerThan == 0 &&
		s.MinAttempts == 0 && s.Limit == 0
}

// Match reports whether an entry with its classification is selected.
func (s Selector) Match(e envelope.Envelope, c envelope.Classification, now time.Time) bool {
	if len(s.Categories) > 0 && !contains(s.Categories, c.Category) {
		return false
	}
	if len(s.Dispositions) > 0 && !contains(s.Dispositions, c.Disposition) {
		return false
	}
	if len(s.Origins) > 0 && !contains(s.Origins, e.Origin.Topic) {
		return false
	}
	if s.Error != nil && !s.Error.MatchString(e.LastError) {
		return false
	}
	if len(s.EventIDs) > 0 && !contains(s.EventIDs, e.EventID) {
		return false
	}
	if len(s.Owners) > 0 && !contains(s.Owners, e.Owner) {
		return false
	}
	if s.Overdue && !IsOverdue(e, now) {
		return false
	}
	age := Age(e, now)
	if (s.OlderThan > 0 || s.NewerThan > 0) && e.DeadLetteredAt.IsZero() {
		// No dead-letter time: neither old nor new, so an age selector
		// cannot choose it.
		return false
	}
	if s.OlderThan > 0 && age <= s.OlderThan {
		return false
	}
	if s.NewerThan > 0 && age >= s.NewerThan {
		return false
	}
	if s.MinAttempts > 0 && e.Attempts < s.MinAttempts {
		return false
	}
	return true
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// Age is how long ago the entry was dead-lettered (0 when unknown).
func Age(e envelope.Envelope, now time.Time) time.Duration {
	if e.DeadLetteredAt.IsZero() {
		return 0
	}
	if d := now.Sub(e.DeadLetteredAt); d > 0 {
		return d
	}
	return 0
}

// IsOverdue says whether the entry is past its recover_by deadline.
func IsOverdue(e envelope.Envelope, now time.Time) bool {
	return !e.RecoverBy.IsZero() && now.After(e.RecoverBy)
}

// ParseDuration reads Go durations plus whole days ("2d", "1d12h"). A
// duration written with words ("3days", "90 mins") is refused with the
// form it would be here.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := parseDays(s)
	if err != nil {
		msg := fmt.Sprintf("invalid duration %q (e.g. 90s, 15m, 2h, 3d)", s)
		if sug := SuggestDuration(s, true); sug != "" {
			msg += fmt.Sprintf("; did you mean %s?", sug)
		}
		return 0, errors.New(msg)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %q: negative", s)
	}
	return d, nil
}

// parseDays is time.ParseDuration after an optional leading whole number
// of days ("2d", "1d12h").
func parseDays(s string) (time.Duration, error) {
	days := time.Duration(0)
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil {
			return 0, err
		}
		days = time.Duration(n) * 24 * time.Hour
		if s = s[i+1:]; s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	return days + d, err
}

// durationUnits maps the unit words people type to the units durations
// take ("w" is made of days).
var durationUnits = map[string]string{
	"d": "d", "day": "d", "days": "d",
	"w": "w", "wk": "w", "wks": "w", "week": "w", "weeks": "w",
	"h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
	"m": "m", "min": "m", "mins": "m", "minute": "m", "minutes": "m",
	"s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
	"ms": "ms", "msec": "ms", "msecs": "ms", "millisecond": "ms", "milliseconds": "ms",
}

var durationPart = regexp.MustCompile(`(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*`)

// SuggestDuration is the duration a mistyped one most likely means
// ("3days" is "3d", "90 mins" is "90m"), written as a flag takes it: with
// days when the flag reads days (ParseDuration), else in hours (Go's
// time.ParseDuration); "" when s is not numbers with unit words.
func SuggestDuration(s string, days bool) string {
	s = strings.TrimSpace(s)
	parts := durationPart.FindAllStringSubmatch(s, -1)
	if len(parts) == 0 || strings.Join(durationPart.FindAllString(s, -1), "") != s {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		unit, ok := durationUnits[strings.ToLower(p[2])]
		if !ok {
			return ""
		}
		n := p[1]
		switch {
		case unit == "w" && days:
			unit, n = "d", scale(n, 7)
		case unit == "w":
			unit, n = "h", scale(n, 7*24)
		case unit == "d" && !days:
			unit, n = "h", scale(n, 24)
		case unit == "d" && strings.Contains(n, "."):
			unit, n = "h", scale(n, 24)
		}
		if n == "" {
			return ""
		}
		b.WriteString(n + unit)
	}
	if b.String() == s {
		return ""
	}
	return b.String()
}

// scale multiplies the decimal n by k and writes it back ("" on error).
func scale(n string, k float64) string {
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return ""
	}
	return strconv.FormatFloat(f*k, 'f', -1, 64)
}

// Item is one entry with its classification.
type Item struct {
	Envelope envelope.Envelope
	Class    envelope.Classification
}

// Walker reads a DLQ and classifies its entries.
type Walker struct {
	Source     backend.Source
	Classifier *envelope.Classifier
	Now        time.Time
	// Progress, when set, is told how far a whole-DLQ pass of Summarize
	// has read, every ProgressEvery entries: pass 1, then pass 2 when the
	// first found conflicts.
	Progress func(pass, read int)
}

// ProgressEvery is how many entries a pass reads between two calls of
// Walker.Progress.
const ProgressEvery = 1000

// scanLean is Source.Scan from the start, lean when the source can be and
// nothing needs what lean envelopes lack: the caller reads no properties,
// and with classify, neither does a rule.
func (w Walker) scanLean(ctx context.Context, classify bool, fn func(envelope.Envelope) error) error {
	if ls, ok := w.Source.(backend.LeanScanner); ok && !(classify && w.Classifier.UsesProperties()) {
		return ls.ScanLean(ctx, "", fn)
	}
	return w.Source.Scan(ctx, "", fn)
}

// Conflicts reads the whole DLQ once and returns the tracker of event IDs
// in conflict. Categories depend on it, so commands that print entries as
// they go call it first.
func (w Walker) Conflicts(ctx context.Context) (*envelope.ConflictTracker, error) {
	t := envelope.NewConflictTracker()
	err := w.scanLean(ctx, false, func(e envelope.Envelope) error {
		t.Add(e)
		return nil
	})
	return t, err
}

// Walk calls fn for every selected entry after the cursor, with its
// category, stopping after sel.Limit matches. It returns the locator of the
// last entry passed to fn when the limit cut the walk (the next cursor).
func (w Walker) Walk(ctx context.Context, conflicts *envelope.ConflictTracker, sel Selector, after string, fn func(Item) error) (string, error) {
	n := 0
	var last, next string
	memo := w.Classifier.Memo()
	err := w.Source.Scan(ctx, after, func(e envelope.Envelope) error {
		if sel.Limit > 0 && n == sel.Limit {
			next = last
			return backend.ErrStop
		}
		it := Item{Envelope: e, Class: memo.Classify(e, conflicts.IsConflict(e.EventID))}
		if !sel.Match(e, it.Class, w.Now) {
			return nil
		}
		n++
		last = e.ID
		return fn(it)
	})
	if errors.Is(err, backend.ErrStop) {
		err = nil
	}
	return next, err
}
