package filelock

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

// A second handle on a held lock file is refused, can still read who
// holds it, and gets the lock once the holder's handle is closed. This
// runs on every platform dlqctl is released for: flock(2) locks an open
// file description and LockFileEx a handle, so two opens in one process
// contend as two processes would.
func TestTryLockTwoHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.lock")
	a, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := TryLock(a); err != nil {
		t.Fatalf("first lock: %v", err)
	}
	since := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	if err := WriteHolder(a, backend.LeaseHolder{PID: 4242, Host: "ops-1", Since: since}); err != nil {
		t.Fatal(err)
	}
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := TryLock(b); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock while held: %v, want ErrLocked", err)
	}
	if got := ReadHolder(b); !strings.Contains(got, "pid 4242 on ops-1") {
		t.Fatalf("holder read through the second handle: %q", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := TryLock(b); err != nil {
		t.Fatalf("lock after the holder closed: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
