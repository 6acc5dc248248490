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
// trail and must hold only run records.
type JournalLock struct {
	f *os.File
}

// LockPath is the lock file of the journal at path.
func LockPath(journal string) string { return journal + ".lock" }

// LockJournal takes the journal's lock without waiting. When another
// process holds it, it fails at once with a *backend.BusyError naming that
// holder's PID, host and start time, and changes nothing.
func LockJournal(journal string, h backend.LeaseHolder) (*JournalLock, error) {
	path := LockPath(journal)
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
	if err := filelock.WriteHolder(f, h); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock journal %s: %w", journal, err)
	}
	return &JournalLock{f: f}, nil
}

// Unlock releases the lock. The lock file stays: removing it would let a
// process that opened it before the removal lock an orphan while a third
// locks a new file of the same name.
func (l *JournalLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
	return err
}
