package main

import (
	"syscall"
	"time"
)

// cpuTime is this process's user+system CPU time so far. Around a raw pass
// it measures the pass (and its GC), which is steadier than wall time on a
// shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
