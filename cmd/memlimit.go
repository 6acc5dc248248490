package cmd

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"time"
)

// planHeapLimit is the soft memory limit of the commands that hold a
// whole plan (plan, approve, apply, status, resume, reconcile --journal).
//
// A million-entry plan and a batch of it are a few hundred megabytes
// live, and by default the Go collector lets the heap grow to twice what
// is live before it collects: a run that needs 270 MiB would reach 550 MiB
// and more on a small host. Under this limit the collector runs sooner
// instead, which costs little here since most of a large plan is blocks
// without pointers. It is a soft limit: a run that needs more still gets
// it (the collector then works harder), and GOMEMLIMIT, when set, is the
// operator's and wins.
const planHeapLimit = 400 << 20

// boundHeap applies planHeapLimit unless the process has a limit already
// (GOMEMLIMIT, or one set before).
func boundHeap(getenv func(string) string) {
	if getenv("GOMEMLIMIT") != "" || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		return
	}
	debug.SetMemoryLimit(planHeapLimit)
}

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

// heapSample is what the follower reads after each tick: the collector's
// cycle count, the live heap the last cycle marked, and GOGC.
type heapSample struct {
	cycles, live uint64
	gogc         int64 // < 0: GOGC=off
}

// heapFollower sets the soft memory limit from the live heap of recent
// cycles. read and set are runtime/metrics and debug.SetMemoryLimit in
// dlqctl; tests pass their own.
type heapFollower struct {
	read  func() heapSample
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
	if s.cycles == 0 || s.cycles == h.cycle {
		return
	}
	h.cycle = s.cycles
	h.lives = append(h.lives, s.live)
	if len(h.lives) > followWindow {
		h.lives = h.lives[len(h.lives)-followWindow:]
	}
	if l := followLimit(h.lives, s.gogc); l > 0 && l != h.limit {
		h.set(l)
		h.limit = l
	}
}

// followHeap starts a heap follower for the command's run and returns the
// function that stops it and puts back the limit it found. It does nothing
// when the operator set GOMEMLIMIT or the process has a limit already.
func followHeap(ctx context.Context, getenv func(string) string, read func() heapSample, set func(int64) int64) (stop func()) {
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

// followHeap starts the follower with f's readers (see Factory).
func (f *Factory) followHeap(ctx context.Context) (stop func()) {
	read, set := f.heapSample, f.setMemoryLimit
	if read == nil {
		read = runtimeHeap()
	}
	if set == nil {
		set = debug.SetMemoryLimit
	}
	return followHeap(ctx, f.Getenv, read, set)
}

// runtimeHeap reads a heapSample from runtime/metrics.
func runtimeHeap() func() heapSample {
	samples := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/gogc:percent"},
	}
	return func() heapSample {
		metrics.Read(samples)
		var hs heapSample
		for i, s := range samples {
			if s.Value.Kind() != metrics.KindUint64 {
				return heapSample{} // a runtime without the metric: follow nothing
			}
			switch v := s.Value.Uint64(); i {
			case 0:
				hs.cycles = v
			case 1:
				hs.live = v
			case 2:
				hs.gogc = int64(v)
				if v > math.MaxInt32 { // off reads as -1
					hs.gogc = -1
				}
			}
		}
		return hs
	}
}
