// Package crashhook kills the test process at a chosen journal step, so a
// test can leave a journal exactly as a real crash there would; or stops
// it there (SIGSTOP), so a test can act on the world at that moment (cut
// a connection, freeze the broker) and let the run go on with SIGCONT.
package crashhook

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Parse returns a hook for cmd.Factory.CrashHook from a spec "step:n"
// (e.g. "published:2": SIGKILL at the second published step) or
// "step:n:stop" (SIGSTOP there instead: the process waits for a SIGCONT
// and then carries on), or nil when spec is empty or not of that form.
func Parse(spec string) func(string) {
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 || len(parts) == 3 && parts[2] != "stop" {
		return nil
	}
	step := parts[0]
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < 1 {
		return nil
	}
	stop := len(parts) == 3
	seen := 0
	return func(s string) {
		if s != step {
			return
		}
		if seen++; seen != n {
			return
		}
		if stop {
			// Another thread may take the signal: the pause lets the stop
			// reach this one before it does anything more. The run goes on
			// from here once the test sends SIGCONT.
			syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			time.Sleep(50 * time.Millisecond)
			return
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
