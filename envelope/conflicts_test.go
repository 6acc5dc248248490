package envelope

import (
	"strings"
	"testing"
)

// TestHashLower: the ASCII fast path hashes what strings.ToLower would give.
func TestHashLower(t *testing.T) {
	for _, s := range []string{"", "sha256:ABCdef0123", "sha256:abc", "MiXeD", "Ünïcode ABC", "\xff\xfeA"} {
		if got, want := hashLower(s), hashString(strings.ToLower(s)); got != want {
			t.Errorf("hashLower(%q) = %x, want %x", s, got, want)
		}
	}
}
