//go:build unix

package envelope

import (
	"runtime"
	"strconv"
	"testing"
)

// TestConflictTrackerChunksOffHeap: the pairs of a large tracker are not on
// the Go heap, so the collector's headroom does not double them.
func TestConflictTrackerChunksOffHeap(t *testing.T) {
	const n = 300_000 // 3.4 MiB of pairs
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tr := NewConflictTracker()
	for i := range n {
		tr.Add(Envelope{EventID: "E" + strconv.Itoa(i), Fingerprint: "sha256:aa"})
	}
	if got := tr.Unique(); got != n {
		t.Fatalf("Unique = %d, want %d", got, n)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if grew > 1<<20 {
		t.Errorf("the heap grew by %d KiB for a tracker of %d pairs (%d KiB of pairs)", grew>>10, n, n*12>>10)
	}
	runtime.KeepAlive(tr)
}

// TestZeroConflictTracker: a tracker that NewConflictTracker did not make
// still works, on the heap.
func TestZeroConflictTracker(t *testing.T) {
	var tr ConflictTracker
	tr.Add(Envelope{EventID: "a", Fingerprint: "sha256:1"})
	tr.Add(Envelope{EventID: "a", Fingerprint: "sha256:2"})
	if !tr.IsConflict("a") || tr.Unique() != 1 {
		t.Errorf("zero tracker: conflict %v unique %d", tr.IsConflict("a"), tr.Unique())
	}
}
