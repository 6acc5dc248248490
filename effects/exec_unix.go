//go:build unix

package effects

import (
	"os/exec"
	"syscall"
)

// killGroup runs the command in its own process group and makes a
// cancelled ctx kill the whole group: killing only sh would leave what it
// started (a psql, a sleep) running and holding the output pipes.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
