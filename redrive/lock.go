package redrive

import (
	"errors"
	"fmt"
	"os"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/internal/filelock"
)

// JournalLock is an exclusive hold on a journal: one run at a time appends
// to it. It is an flock(2) on PATH.lock, a file next to the journal that
// holds the holder's description. flock rather than a lock file that is
// only created: the kernel drops the lock when the holder dies, so a
// resume right after kill -9 is never refused by a crashed run. The lock
// lives beside the journal, not on it, because the journal is the audit
// trail and must hold only run records. The lock file exists only while a
// run holds it.
type JournalLock struct {
	f    *os.File
	path string
}

// LockPath is the lock file of the journal at path.
func LockPath(journal string) string { return journal + ".lock" }

// lockAttempts bounds the retries when the lock file is removed between
// opening and locking it (another run ending at that moment).
const lockAttempts = 10

// LockJournal takes the journal's lock without waiting. When another
// process holds it, it fails at once with a *backend.BusyError naming that
// holder's PID, host and start time, and changes nothing.
func LockJournal(journal string, h backend.LeaseHolder) (*JournalLock, error) {
	path := LockPath(journal)
	for attempt := 0; ; attempt++ {
		f, err := filelock.Open(path)
		if err != nil {
			return nil, fmt.Errorf("lock journal %s: %w", journal, err)
		}
		if err := filelock.TryLock(f); err != nil {
			defer f.Close()
			if errors.Is(err, filelock.ErrLocked) {
				return nil, &backend.BusyError{What: "journal " + journal, Holder: filelock.ReadHolder(f)}
			}
			return nil, fmt.Errorf("lock journal %s: %w", journal, err)
		}
		// The holder before us removes the file before it lets go (see
		// Unlock): a lock on a file no longer at path locks nothing, so
		// open the one that is there now.
		if !stillAt(f, path) {
			f.Close()
			if attempt+1 < lockAttempts {
				continue
			}
			return nil, fmt.Errorf("lock journal %s: %s keeps being replaced", journal, path)
		}
		if err := filelock.WriteHolder(f, h); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock journal %s: %w", journal, err)
		}
		return &JournalLock{f: f, path: path}, nil
	}
}

// stillAt says whether the open file f is the file at path.
func stillAt(f *os.File, path string) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	pi, err := os.Lstat(path)
	return err == nil && os.SameFile(fi, pi)
}

// Unlock removes the lock file and releases the lock, so that a finished
// run leaves only its journal behind. The file is removed while the lock
// is still held: a process that opened it just before then finds, once it
// gets the lock, that the file is no longer at its path and opens the new
// one (see LockJournal), so two runs never hold "the" lock at once.
func (l *JournalLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	rmErr := os.Remove(l.path)
	if errors.Is(rmErr, os.ErrNotExist) {
		rmErr = nil
	}
	err := l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
	return errors.Join(err, rmErr)
}
