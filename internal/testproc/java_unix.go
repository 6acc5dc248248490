//go:build unix

package testproc

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// kill ends the server with SIGKILL, as a crash does (no clean shutdown),
// waits until it is gone and lets the script clear its PID file and
// watchdog; the folder stays for Start.
func (p *JavaProc) kill() error {
	pid := p.PID()
	if pid <= 0 {
		return fmt.Errorf("kill %s: it is not running", p.s.Name)
	}
	// A script that starts the server with setsid makes it the leader of
	// its own process group: kill the group, then the process itself.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s (pid %d): %w", p.s.Name, pid, err)
	}
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("kill %s: pid %d still alive 30 s after SIGKILL", p.s.Name, pid)
		}
	}
	// The script's stop finds nothing running and clears up after it.
	return p.halt()
}
