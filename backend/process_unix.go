//go:build unix

package backend

import (
	"errors"
	"syscall"
)

// ProcessAlive says whether process pid lives on this host: a lease or
// lock of this host whose process is gone may be taken over at once.
// EPERM means it lives, as another user.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
