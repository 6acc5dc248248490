package envelope

import (
	"fmt"
	"math/rand/v2"
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

// TestConflictTrackerMatchesAMap: across many chunks, in random order,
// the tracker counts what a map of every event's fingerprints counts.
func TestConflictTrackerMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tr := NewConflictTracker()
	fps := map[string]map[string]bool{}
	for range 5*trackerChunk + 123 {
		id := fmt.Sprintf("E%d", rng.IntN(3*trackerChunk))
		fp := fmt.Sprintf("sha256:%d", rng.IntN(40)/39) // mostly one fingerprint, sometimes two
		if fps[id] == nil {
			fps[id] = map[string]bool{}
		}
		fps[id][fp] = true
		tr.Add(Envelope{EventID: id, Fingerprint: fp})
	}
	conflicts := 0
	for id, f := range fps {
		if got := tr.IsConflict(id); got != (len(f) > 1) {
			t.Fatalf("%s: conflict %v, fingerprints %v", id, got, f)
		}
		if len(f) > 1 {
			conflicts++
		}
	}
	if tr.Unique() != len(fps) || tr.ConflictCount() != conflicts {
		t.Fatalf("unique %d conflicts %d, want %d and %d", tr.Unique(), tr.ConflictCount(), len(fps), conflicts)
	}
}
