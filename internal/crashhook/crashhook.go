// Package crashhook kills the test process at a chosen journal step, so a
// test can leave a journal exactly as a real crash there would.
package crashhook

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Parse returns a hook for cmd.Factory.CrashHook from a spec "step:n"
// (e.g. "published:2": SIGKILL at the second published step), or nil when
// spec is empty or not of that form.
func Parse(spec string) func(string) {
	step, nth, ok := strings.Cut(spec, ":")
	n, err := strconv.Atoi(nth)
	if !ok || err != nil || n < 1 {
		return nil
	}
	seen := 0
	return func(s string) {
		if s != step {
			return
		}
		if seen++; seen == n {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}
