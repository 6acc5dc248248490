package backend

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processSpace says where this process's PID means this process: the
// kernel's boot ID (a random UUID drawn at every boot, the same in every
// namespace) and the inode number of its PID namespace, as lsns and
// `ls -l /proc/self/ns/pid` show it. All PID namespaces of one kernel are
// on one nsfs device, which the boot ID pins, so the inode alone tells
// them apart. Either is "" when it cannot be read (no /proc).
func processSpace() (bootID, pidNamespace string) {
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		bootID = strings.TrimSpace(string(b))
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/pid", &st); err == nil {
		pidNamespace = strconv.FormatUint(st.Ino, 10)
	}
	return bootID, pidNamespace
}
