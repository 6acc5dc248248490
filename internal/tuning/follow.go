package tuning

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"time"
)

// The heap follower: a soft memory limit for a scan (stats), derived from
// what the scan really holds.
//
// A scan's live heap is small and flat (a page of entries: about 5 MB on
// Redis) but it allocates fast (about 4 KB per entry), and the collector
// counts everything allocated while it marks as live. When the machine is
// loaded and its mark worker waits for a CPU for a fifth of a second, one
// cycle ends with 28 MB "live" instead of 5, the next goal is twice that,
// and the heap grows to 50 MB before the next cycle finds 5 MB live again.
// The freed memory then stays resident: the runtime returns it slowly.
// That, not anything that grows with the DLQ, is what put a million-entry
// stats 5 to 20 MiB above its usual peak on a loaded machine
// (GODEBUG=gctrace=1 and runtime/metrics sampled every 20ms, see
// docs/decisions.md).
//
// So the limit follows the median live heap of the last followWindow
// cycles: one inflated cycle does not move it, and the collector's goal
// then stays where the true live heap puts it. The limit is the goal at
// that median plus room of the median again (at least followRoom), so
// it caps only a goal that jumped: a backend whose live heap is large
// (Kafka's fetch buffers, tens to hundreds of MiB) gets a limit that large
// too, and a live heap that grows lifts the limit within a cycle or two.
const (
	followWindow = 3
	followRoom   = 12 << 20
	followEvery  = 10 * time.Millisecond
)

// HeapSample is what the follower reads after each tick: the collector's
// cycle count, the live heap the last cycle marked, and GOGC.
type HeapSample struct {
	Cycles, Live uint64
	GOGC         int64 // < 0: GOGC=off
}

// heapFollower sets the soft memory limit from the live heap of recent
// cycles. read and set are runtime/metrics and debug.SetMemoryLimit in
// dlqctl; tests pass their own.
type heapFollower struct {
	read  func() HeapSample
	set   func(int64) int64
	lives []uint64 // the live heap of the last cycles seen, oldest first
	cycle uint64   // the last cycle seen
	limit int64    // the limit set last, 0 before the first
}

// followLimit is the limit for the live heap of recent cycles: the goal
// GOGC gives at their median, plus room of the median (at least
// followRoom). 0 when there is nothing to follow.
func followLimit(lives []uint64, gogc int64) int64 {
	if len(lives) == 0 || gogc < 0 {
		return 0
	}
	m := median(lives)
	goal := m + m*uint64(gogc)/100
	return int64(goal + max(m, followRoom))
}

func median(v []uint64) uint64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// observe takes one sample: a cycle not seen before adds its live heap,
// and the limit is set when it changes.
func (h *heapFollower) observe() {
	s := h.read()
	if s.Cycles == 0 || s.Cycles == h.cycle {
		return
	}
	h.cycle = s.Cycles
	h.lives = append(h.lives, s.Live)
	if len(h.lives) > followWindow {
		h.lives = h.lives[len(h.lives)-followWindow:]
	}
	if l := followLimit(h.lives, s.GOGC); l > 0 && l != h.limit {
		h.set(l)
		h.limit = l
	}
}

// FollowHeap starts a heap follower for a command's run and returns the
// function that stops it and puts back the limit it found. It does nothing
// when the operator set GOMEMLIMIT or the process has a limit already.
// read and set are RuntimeHeap() and debug.SetMemoryLimit when nil.
func FollowHeap(ctx context.Context, getenv func(string) string, read func() HeapSample, set func(int64) int64) (stop func()) {
	if read == nil {
		read = RuntimeHeap()
	}
	if set == nil {
		set = debug.SetMemoryLimit
	}
	before := set(-1)
	if getenv("GOMEMLIMIT") != "" || before != math.MaxInt64 {
		return func() {}
	}
	h := &heapFollower{read: read, set: set}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(followEvery)
		defer t.Stop()
		for {
			h.observe()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		set(before)
	}
}

// RuntimeHeap reads a HeapSample from runtime/metrics.
func RuntimeHeap() func() HeapSample {
	samples := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/gogc:percent"},
	}
	return func() HeapSample {
		metrics.Read(samples)
		var hs HeapSample
		for i, s := range samples {
			if s.Value.Kind() != metrics.KindUint64 {
				return HeapSample{} // a runtime without the metric: follow nothing
			}
			switch v := s.Value.Uint64(); i {
			case 0:
				hs.Cycles = v
			case 1:
				hs.Live = v
			case 2:
				hs.GOGC = int64(v)
				if v > math.MaxInt32 { // off reads as -1
					hs.GOGC = -1
				}
			}
		}
		return hs
	}
}
