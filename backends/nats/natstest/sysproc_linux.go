package natstest

import "syscall"

// sysProcAttr asks Linux to stop the server when the test binary dies
// without running its cleanups, so that no nats-server outlives its run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
