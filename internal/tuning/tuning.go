// Package tuning holds dlqctl's process-wide runtime settings, the one
// place that changes them:
//
//   - ReleaseExecutable, once at start-up (main): the executable's pages
//     made resident by start-up are given back (internal/exepages);
//   - PaceGC: the collector's GOGC for a scan of a backend that asks for
//     one (backend.Registration.ScanGC);
//   - BoundHeap: the soft memory limit of the commands that hold a whole
//     plan (PlanHeapLimit), and of a scan of a backend that asks for one
//     (backend.Registration.ScanHeapLimit).
//
// GOGC and GOMEMLIMIT, when the operator sets them, win over every one of
// these. A command runs between Capture and the restore it returns, so
// that a caller running commands in its own process (tests, the bench)
// gets its settings back.
package tuning

import (
	"math"
	"runtime/debug"

	"github.com/dlqctl/dlqctl/internal/exepages"
)

// ReleaseExecutable gives back the executable's pages that start-up made
// resident (see exepages). Failing changes nothing but the resident size,
// so the error is not the user's concern.
func ReleaseExecutable() {
	_, _ = exepages.Release()
}

// Capture reads the collector's GOGC and soft memory limit and returns
// the function that puts them back.
func Capture() (restore func()) {
	gc := debug.SetGCPercent(100)
	debug.SetGCPercent(gc)
	limit := debug.SetMemoryLimit(-1)
	return func() {
		debug.SetGCPercent(gc)
		debug.SetMemoryLimit(limit)
	}
}

// PaceGC sets the collector's GOGC to percent (when above 0) unless the
// operator set GOGC. Only the collector's pace changes: a soft memory
// limit in force (BoundHeap, GOMEMLIMIT) still bounds the heap.
func PaceGC(percent int, getenv func(string) string) {
	if percent <= 0 || getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(percent)
}

// PlanHeapLimit is the soft memory limit of the commands that hold a whole
// plan (plan, approve, apply, status, resume, reconcile --journal).
//
// A million-entry plan and a batch of it are a few hundred megabytes
// live, and by default the Go collector lets the heap grow to twice what
// is live before it collects: a run that needs 270 MiB would reach 550 MiB
// and more on a small host. Under this limit the collector runs sooner
// instead, which costs little here since most of a large plan is blocks
// without pointers. It is a soft limit: a run that needs more still gets
// it (the collector then works harder), and GOMEMLIMIT, when set, is the
// operator's and wins.
const PlanHeapLimit = 400 << 20

// BoundHeap applies limit unless GOMEMLIMIT is set or the limit in force
// is as high already: it only ever raises one (a plan command that opened
// a source bounded to a scan's limit gets the plan's higher one).
func BoundHeap(limit int64, getenv func(string) string) {
	if limit <= 0 || getenv("GOMEMLIMIT") != "" {
		return
	}
	if cur := debug.SetMemoryLimit(-1); cur != math.MaxInt64 && cur >= limit {
		return
	}
	debug.SetMemoryLimit(limit)
}
