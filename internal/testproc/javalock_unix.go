//go:build unix

package testproc

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LockJavaStart waits until no other process of this machine is starting
// a Java server for tests (Kafka, Pulsar, ElasticMQ), and returns the
// function that lets the next one start. `go test ./...` runs packages in
// parallel, and each of those servers takes a core or two for several
// seconds while it starts: two starting at once on a small machine both
// start late, sometimes past their timeout. Once started they may run side
// by side. The lock is flock(2) on a file in the temporary folder, so a
// killed test process never leaves it held.
func LockJavaStart() (release func(), err error) {
	path := filepath.Join(os.TempDir(), "dlqctl-java-start.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("java start lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("java start lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
