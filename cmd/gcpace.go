package cmd

import (
	"runtime/debug"

	"github.com/dlqctl/dlqctl/backend"
)

// paceCollector sets the collector's GOGC to what the source's backend
// asks for (backend.Registration.ScanGC) unless the operator set GOGC.
// Only the collector's pace changes: a soft memory limit in force
// (boundHeap, GOMEMLIMIT) still bounds the heap.
func paceCollector(reg backend.Registration, getenv func(string) string) {
	if reg.ScanGC <= 0 || getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(reg.ScanGC)
}
