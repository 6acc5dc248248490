//go:build !unix

package pgtest

import "syscall"

// sysProcAttr has nothing to set: there is no root to step down from
// (os.Geteuid is -1), so as is always nil.
func sysProcAttr(*runAs) *syscall.SysProcAttr { return nil }
