package backend

import "syscall"

// processSpace says where this process's PID means this process: macOS
// has no PID namespaces, so the boot session's UUID (drawn at every boot)
// is all there is; it tells apart two Macs that share a host name.
func processSpace() (bootID, pidNamespace string) {
	id, err := syscall.Sysctl("kern.bootsessionuuid")
	if err != nil {
		return "", ""
	}
	return id, ""
}
