//go:build unix && !linux

package pgtest

import "syscall"

// sysProcAttr runs the process as the unprivileged user, when there is one.
func sysProcAttr(as *runAs) *syscall.SysProcAttr {
	if as == nil {
		return nil
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: as.uid, Gid: as.gid, Groups: []uint32{}}}
}
