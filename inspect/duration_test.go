package inspect

import (
	"strings"
	"testing"
	"time"
)

// TestParseDurationSuggests: a duration written with words is refused with
// the whole input quoted and the form it would take; valid ones parse.
func TestParseDurationSuggests(t *testing.T) {
	for in, want := range map[string]time.Duration{"90s": 90 * time.Second, "2d": 48 * time.Hour, "1d12h": 36 * time.Hour, "15m": 15 * time.Minute} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{"3days": `"3days"`, "90 mins": `"90 mins"`, "2hours30minutes": `"2hours30minutes"`, "1week": `"1week"`} {
		_, err := ParseDuration(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDuration(%q): %v; want the whole input quoted", in, err)
		}
	}
	for _, c := range []struct {
		in   string
		days bool
		want string
	}{
		{"3days", true, "3d"}, {"3days", false, "72h"}, {"90 mins", true, "90m"}, {"2hours30minutes", false, "2h30m"},
		{"1week", true, "7d"}, {"1.5days", true, "36h"}, {"3d", false, "72h"}, {"3d", true, ""}, {"soon", true, ""}, {"3 fortnights", true, ""},
	} {
		if got := SuggestDuration(c.in, c.days); got != c.want {
			t.Errorf("SuggestDuration(%q, %v) = %q, want %q", c.in, c.days, got, c.want)
		}
	}
}
