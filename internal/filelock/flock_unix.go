//go:build unix

package filelock

import (
	"errors"
	"os"
	"syscall"
)

// ErrLocked: another open file description holds the flock.
var ErrLocked = errors.New("locked")

// Open opens (creating, mode 0600) a lock file without following a
// symlink planted at its name.
func Open(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
}

// TryLock takes an exclusive flock on f without waiting; ErrLocked when
// someone else holds it. The kernel releases it when f's last descriptor
// closes, including when the process dies.
func TryLock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}
