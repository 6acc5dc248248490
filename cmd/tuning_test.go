package cmd

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/internal/tuning"
)

// TestStatsFollowsTheHeap pins the wiring: stats runs under the heap
// follower's limit and leaves the process's limit as it found it.
func TestStatsFollowsTheHeap(t *testing.T) {
	const mib = 1 << 20
	io, _, _, errOut := TestIO()
	var mu sync.Mutex
	last, set := int64(math.MaxInt64), []int64(nil)
	f := &Factory{IO: io, Now: func() time.Time { return testNow }, Getenv: func(string) string { return "" },
		heapSample: func() tuning.HeapSample { return tuning.HeapSample{Cycles: 1, Live: 5 * mib, GOGC: 100} },
		setMemoryLimit: func(v int64) int64 {
			mu.Lock()
			defer mu.Unlock()
			prev := last
			if v >= 0 {
				last, set = v, append(set, v)
			}
			return prev
		}}
	if code := Execute(context.Background(), f, []string{"--source", incidentSource(t), "stats", "-o", "json"}); code != 0 {
		t.Fatalf("stats: exit %d: %s", code, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	// The follower's limit (5 MiB live: the goal at GOGC 100 and 12 MiB
	// of room), then the one it found.
	if len(set) != 2 || set[0] != 22*mib || set[1] != math.MaxInt64 {
		t.Fatalf("limits %v, want [%d %d]", set, 22*mib, int64(math.MaxInt64))
	}
}
