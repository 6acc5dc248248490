//go:build !unix

package backend

import "os"

// ProcessAlive says whether process pid lives on this host. Without
// signal 0, finding the process is the check: on Windows that opens a
// handle, which fails for a process that is gone. A process that only
// just exited may still read as alive; the lease then waits for its TTL,
// which is the safe side.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}
