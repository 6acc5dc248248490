package tuning

import (
	"math"
	"runtime/debug"
	"testing"
)

func gcPercent() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }

// TestPaceGC: a backend's GOGC sets the collector's pace, unless the
// operator's GOGC is set or the backend asks for none.
func TestPaceGC(t *testing.T) {
	defer Capture()()
	debug.SetGCPercent(100)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	PaceGC(0, env(nil))
	if got := gcPercent(); got != 100 {
		t.Fatalf("no pace asked: GOGC %d, want 100", got)
	}
	PaceGC(300, env(map[string]string{"GOGC": "50"}))
	if got := gcPercent(); got != 100 {
		t.Fatalf("operator's GOGC set: GOGC %d, want it left alone (100)", got)
	}
	PaceGC(300, env(nil))
	if got := gcPercent(); got != 300 {
		t.Fatalf("pace 300: GOGC %d", got)
	}
}

// TestBoundHeap: the limit applies unless GOMEMLIMIT is set or a limit
// as high is in force already.
func TestBoundHeap(t *testing.T) {
	defer Capture()()
	debug.SetMemoryLimit(math.MaxInt64)
	BoundHeap(PlanHeapLimit, func(k string) string { return map[string]string{"GOMEMLIMIT": "1GiB"}[k] })
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("GOMEMLIMIT set: limit %d, want none", got)
	}
	BoundHeap(PlanHeapLimit, func(string) string { return "" })
	if got := debug.SetMemoryLimit(-1); got != PlanHeapLimit {
		t.Fatalf("limit %d, want %d", got, PlanHeapLimit)
	}
	BoundHeap(96<<20, func(string) string { return "" })
	if got := debug.SetMemoryLimit(-1); got != PlanHeapLimit {
		t.Fatalf("a higher limit in force: %d, want it kept (%d)", got, PlanHeapLimit)
	}
	// A scan's lower limit first, then a plan command's: the plan's.
	debug.SetMemoryLimit(96 << 20)
	BoundHeap(PlanHeapLimit, func(string) string { return "" })
	if got := debug.SetMemoryLimit(-1); got != PlanHeapLimit {
		t.Fatalf("after a scan's limit: %d, want the plan's %d", got, PlanHeapLimit)
	}
}

// TestCapture puts back the pace and the limit it found.
func TestCapture(t *testing.T) {
	gc, limit := gcPercent(), debug.SetMemoryLimit(-1)
	restore := Capture()
	debug.SetGCPercent(37)
	debug.SetMemoryLimit(123 << 20)
	restore()
	if gcPercent() != gc || debug.SetMemoryLimit(-1) != limit {
		t.Fatalf("after restore: GOGC %d, limit %d; want %d, %d", gcPercent(), debug.SetMemoryLimit(-1), gc, limit)
	}
}
