package pgtest

import "syscall"

// sysProcAttr runs the process as the unprivileged user, when there is one,
// and asks Linux to stop the server (fast shutdown) when the test binary
// dies without running its cleanups, so that no postgres outlives its test
// run. Go sets the parent-death signal after the user switch, which would
// otherwise clear it.
func sysProcAttr(as *runAs) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGINT}
	if as != nil {
		attr.Credential = &syscall.Credential{Uid: as.uid, Gid: as.gid, Groups: []uint32{}}
	}
	return attr
}
