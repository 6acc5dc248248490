package cmd

import (
	"math"
	"runtime/debug"
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
