package cmd

import (
	"runtime/debug"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
)

// TestPaceCollector: a backend's ScanGC sets the collector's pace, unless
// the operator's GOGC is set or the backend asks for none.
func TestPaceCollector(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	current := func() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }

	paceCollector(backend.Registration{}, env(nil))
	if got := current(); got != 100 {
		t.Fatalf("no ScanGC: GOGC %d, want 100", got)
	}
	paceCollector(backend.Registration{ScanGC: 300}, env(map[string]string{"GOGC": "50"}))
	if got := current(); got != 100 {
		t.Fatalf("operator's GOGC set: GOGC %d, want it left alone (100)", got)
	}
	paceCollector(backend.Registration{ScanGC: 300}, env(nil))
	if got := current(); got != 300 {
		t.Fatalf("ScanGC 300: GOGC %d", got)
	}
}
