//go:build !unix && !windows

package filelock

import (
	"errors"
	"os"
)

// ErrLocked: another open file description holds the lock.
var ErrLocked = errors.New("locked")

// Open opens (creating, mode 0600) a lock file.
func Open(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}

// TryLock refuses: without flock(2) a lock that the kernel drops when its
// holder dies cannot be had, and a lock that survives a crash would block
// every resume after one.
func TryLock(f *os.File) error {
	return errors.New("journal and DLQ locks need flock(2), which this platform lacks")
}
