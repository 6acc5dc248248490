package tuning

import (
	"context"
	"math"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"time"
)

const mib = 1 << 20

func TestFollowLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lives []uint64
		gogc  int64
		want  int64
	}{
		{"nothing seen", nil, 100, 0},
		{"GOGC=off", []uint64{5 * mib}, -1, 0},
		{"a small heap gets the least room", []uint64{5 * mib}, 100, 10*mib + followRoom},
		// One cycle that counted 28 MiB live (what it allocated while a
		// loaded machine kept its mark worker waiting) moves nothing.
		{"an inflated cycle is not followed", []uint64{5 * mib, 28 * mib, 5 * mib}, 100, 10*mib + followRoom},
		// Kafka's fetch buffers: the goal at the median, and room of the
		// median again above it.
		{"a large heap gets room in proportion", []uint64{100 * mib, 150 * mib, 200 * mib}, 100, 450 * mib},
		{"GOGC sets the goal", []uint64{40 * mib}, 50, 100 * mib},
	} {
		if got := followLimit(tc.lives, tc.gogc); got != tc.want {
			t.Errorf("%s: followLimit(%v, %d) = %d MiB, want %d MiB", tc.name, tc.lives, tc.gogc, got/mib, tc.want/mib)
		}
	}
}

// limits records the memory limits set, as debug.SetMemoryLimit would
// see them; before is what a negative argument reads.
type limits struct {
	mu     sync.Mutex
	before int64
	set    []int64
}

func (l *limits) setLimit(v int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.before
	if len(l.set) > 0 {
		prev = l.set[len(l.set)-1]
	}
	if v >= 0 {
		l.set = append(l.set, v)
	}
	return prev
}

func (l *limits) all() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.set...)
}

func TestHeapFollowerObserve(t *testing.T) {
	var now HeapSample
	l := &limits{before: math.MaxInt64}
	h := &heapFollower{read: func() HeapSample { return now }, set: l.setLimit}
	var want []int64
	step := func(cycles, live uint64, set ...int64) {
		t.Helper()
		now = HeapSample{Cycles: cycles, Live: live, GOGC: 100}
		h.observe()
		want = append(want, set...)
		if got := l.all(); !slices.Equal(got, want) {
			t.Fatalf("after cycle %d (live %d MiB): limits %v, want %v", cycles, live/mib, got, want)
		}
	}
	step(0, 0)                        // no cycle yet: nothing to follow
	step(1, 5*mib, 10*mib+followRoom) // the first cycle sets a limit
	step(1, 5*mib)                    // the same cycle read again
	step(2, 5*mib)                    // same limit: not set again
	step(3, 28*mib)                   // an inflated cycle: median still 5 MiB
	step(4, 6*mib, 12*mib+followRoom) // 5, 28, 6: median 6
	step(5, 100*mib, 56*mib+28*mib)   // 28, 6, 100: median 28 MiB
	step(6, 100*mib, 200*mib+100*mib) // a live heap that grew lifts the limit
	step(7, 100*mib)                  // and keeps it
	step(9, 90*mib)                   // cycles missed between reads: median still 100 MiB
}

func TestFollowHeapPutsTheLimitBack(t *testing.T) {
	l := &limits{before: math.MaxInt64}
	read := func() HeapSample { return HeapSample{Cycles: 3, Live: 5 * mib, GOGC: 100} }
	stop := FollowHeap(context.Background(), func(string) string { return "" }, read, l.setLimit)
	deadline := time.Now().Add(5 * time.Second)
	for len(l.all()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	stop()
	if got, want := l.all(), []int64{10*mib + followRoom, math.MaxInt64}; !reflect.DeepEqual(got, want) {
		t.Fatalf("limits %v, want %v (the follower's, then the one it found)", got, want)
	}
}

func TestFollowHeapLeavesTheOperatorsLimit(t *testing.T) {
	read := func() HeapSample { return HeapSample{Cycles: 3, Live: 5 * mib, GOGC: 100} }
	for _, tc := range []struct {
		name   string
		env    map[string]string
		before int64
	}{
		{"GOMEMLIMIT", map[string]string{"GOMEMLIMIT": "1GiB"}, 1 << 30},
		{"a limit set before", nil, 400 * mib},
	} {
		l := &limits{before: tc.before}
		stop := FollowHeap(context.Background(), func(k string) string { return tc.env[k] }, read, l.setLimit)
		time.Sleep(3 * followEvery)
		stop()
		if got := l.all(); len(got) != 0 {
			t.Errorf("%s: limits %v set, want none", tc.name, got)
		}
	}
}

func TestRuntimeHeapReadsTheCollector(t *testing.T) {
	read := RuntimeHeap()
	runtime.GC()
	a := read()
	runtime.GC()
	b := read()
	if a.Cycles == 0 || b.Cycles <= a.Cycles || b.Live == 0 {
		t.Fatalf("samples %+v then %+v: want cycles counted and a live heap", a, b)
	}
	prev := debug.SetGCPercent(100) // reads GOGC; put back at once
	debug.SetGCPercent(prev)
	if want := int64(prev); b.GOGC != want {
		t.Errorf("gogc %d, want %d", b.GOGC, want)
	}
}

// BenchmarkFollowHeapLargeHeap is a scan whose live heap is large (150 MiB,
// as Kafka's fetch buffers can be) and that allocates 4 GiB while it runs,
// with and without the follower: the follower must not make it collect
// more often. It reports the collector's cycles and its share of the CPU.
func BenchmarkFollowHeapLargeHeap(b *testing.B) {
	for _, follow := range []bool{false, true} {
		b.Run(map[bool]string{false: "default", true: "follower"}[follow], func(b *testing.B) {
			for range b.N {
				live := make([][]byte, 0, 150)
				for range 150 {
					live = append(live, make([]byte, 1<<20))
				}
				var stop func()
				if follow {
					stop = FollowHeap(context.Background(), func(string) string { return "" }, RuntimeHeap(), debug.SetMemoryLimit)
				}
				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				start := time.Now()
				sink := 0
				for i := range 4 << 10 { // 4 GiB in 1 MiB pieces, some kept a while
					buf := make([]byte, 1<<20)
					buf[0] = byte(i)
					live[i%150] = buf // the live set turns over, its size stays
					sink += int(buf[0])
				}
				wall := time.Since(start)
				runtime.ReadMemStats(&ms1)
				if stop != nil {
					stop()
				}
				b.ReportMetric(float64(ms1.NumGC-ms0.NumGC), "gc-cycles")
				b.ReportMetric(float64(ms1.PauseTotalNs-ms0.PauseTotalNs)/1e6, "pause-ms")
				b.ReportMetric(wall.Seconds(), "s")
				b.ReportMetric(float64(ms1.HeapSys)/(1<<20), "heap-sys-MiB")
				runtime.KeepAlive(live)
				_ = sink
			}
		})
	}
}
