package testproc

import (
	"os"
	"os/exec"
	"syscall"
)

// InOtherPIDNamespace makes c start as PID 1 of a PID namespace of its
// own, keeping this process's host name, network, mounts and /proc: how a
// second run looks to a lease when it runs in a Kubernetes pod with
// hostNetwork, or a container started with --uts=host, on the holder's
// machine. From inside it no process of this namespace is visible
// (kill(pid, 0) answers ESRCH), while /proc/self/ns/pid names the new
// namespace. As root this needs nothing more; as another user it makes a
// user namespace too, mapping that user to root inside it (where the
// kernel allows unprivileged user namespaces). c.Start fails where
// neither is allowed.
func InOtherPIDNamespace(c *exec.Cmd) {
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	a := c.SysProcAttr
	a.Cloneflags |= syscall.CLONE_NEWPID
	if uid := os.Geteuid(); uid != 0 {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
	}
}
