package redistest

import "syscall"

// sysProcAttr asks Linux to stop the server when the test binary dies
// without running its cleanups (a panic in TestMain, a kill), so that no
// redis-server outlives its test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
