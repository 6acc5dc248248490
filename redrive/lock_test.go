package redrive

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqctl/dlqctl/backend"
)

// TestJournalLockLeavesNoFile: a finished run leaves its journal and no
// .lock file beside it; while it runs, a second run is refused; after it,
// the next run locks again.
func TestJournalLockLeavesNoFile(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "run.journal")
	h := backend.LeaseHolder{RunID: "r1", PID: os.Getpid(), Host: "h"}
	l, err := LockJournal(journal, h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(LockPath(journal)); err != nil {
		t.Fatalf("no lock file while the run holds it: %v", err)
	}
	var busy *backend.BusyError
	if _, err := LockJournal(journal, h); !errors.As(err, &busy) {
		t.Fatalf("a second lock while held: %v, want a BusyError", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(LockPath(journal)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the lock file outlived the run: %v", err)
	}
	l2, err := LockJournal(journal, h)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	defer l2.Unlock()
}

// TestJournalLockSeesARemovedFile: a lock taken on a file that its holder
// removed (it opened the file just before the holder let go) locks
// nothing; LockJournal opens the file now at the path instead, so it and
// a third run never both hold the journal.
func TestJournalLockSeesARemovedFile(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "run.journal")
	path := LockPath(journal)
	stale, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if stillAt(stale, path) {
		t.Fatal("a removed lock file counts as the one at its path")
	}
	h := backend.LeaseHolder{RunID: "r2", PID: os.Getpid(), Host: "h"}
	l, err := LockJournal(journal, h)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	var busy *backend.BusyError
	if _, err := LockJournal(journal, h); !errors.As(err, &busy) {
		t.Fatalf("a second lock on the new file: %v, want a BusyError", err)
	}
}

// TestAfterReleaseTheCause: a lease that cannot be given back is said
// after what ended the run, in the same error, which stays what it was
// (errors.Is); after a run that succeeded it is only a note.
func TestAfterReleaseTheCause(t *testing.T) {
	var notes strings.Builder
	publish := fmt.Errorf("publish E7 to orders: %w", errRefused)
	release := errors.New("redis://h?stream=dlq: release lease: connection refused")
	err := AfterRelease(&notes, publish, release)
	msg := err.Error()
	if i, j := strings.Index(msg, "publish E7"), strings.Index(msg, "release lease"); i < 0 || j < i || !errors.Is(err, errRefused) {
		t.Errorf("error %q: want the publish first, then the release, and still the publish's error", msg)
	}
	if notes.Len() != 0 {
		t.Errorf("noted before the cause: %s", notes.String())
	}
	if err := AfterRelease(&notes, nil, release); err != nil || !strings.Contains(notes.String(), "note: redis://h?stream=dlq: release lease") {
		t.Errorf("after a good run: %v, notes %q", err, notes.String())
	}
	if err := AfterRelease(&notes, publish, nil); err != publish {
		t.Errorf("with the lease given back: %v", err)
	}
}

var errRefused = errors.New("connection refused")
