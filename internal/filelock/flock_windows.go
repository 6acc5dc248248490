//go:build windows

package filelock

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// ErrLocked: another handle holds the lock.
var ErrLocked = errors.New("locked")

// Open opens (creating, mode 0600) a lock file.
func Open(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}

// lockOffset is where the locked byte sits: far past anything the file
// holds. Windows byte-range locks are mandatory, so locking the holder's
// description itself would keep a second run from reading who holds it;
// a range beyond the end of the file can be locked all the same.
const lockOffset = 1 << 62

// TryLock takes an exclusive LockFileEx lock on f without waiting;
// ErrLocked when another handle holds it. Windows releases it when the
// handle closes, including when the process dies, as flock(2) does.
func TryLock(f *os.File) error {
	ol := windows.Overlapped{Offset: uint32(lockOffset & 0xffffffff), OffsetHigh: uint32(lockOffset >> 32)}
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return ErrLocked
	}
	return err
}
