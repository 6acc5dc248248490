package cmd

import (
	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/internal/tuning"
)

// The commands' runtime settings; internal/tuning applies them, and
// Execute puts back what it found (tuning.Capture).

// paceCollector sets the collector's pace and memory limit to what the
// source's backend asks for (backend.Registration.ScanGC, ScanHeapLimit)
// unless the operator set GOGC or GOMEMLIMIT.
func paceCollector(reg backend.Registration, getenv func(string) string) {
	tuning.PaceGC(reg.ScanGC, getenv)
	tuning.BoundHeap(reg.ScanHeapLimit, getenv)
}

// boundHeap applies the plan commands' soft memory limit.
func boundHeap(getenv func(string) string) {
	tuning.BoundHeap(tuning.PlanHeapLimit, getenv)
}
