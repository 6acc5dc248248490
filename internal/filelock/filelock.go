// Package filelock is the flock(2)-based lock shared by the journal lock
// and the directory queue's DLQ lease: a lock file that names its holder,
// held only while the holder's process lives.
package filelock

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

type holder struct {
	RunID string    `json:"run_id,omitempty"`
	PID   int       `json:"pid"`
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
}

// WriteHolder replaces a held lock file's contents with h.
func WriteHolder(f *os.File, h backend.LeaseHolder) error {
	b, _ := json.Marshal(holder{RunID: h.RunID, PID: h.PID, Host: h.Host, Since: h.Since.UTC()})
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(append(b, '\n'), 0); err != nil {
		return err
	}
	return f.Sync()
}

// ReadHolder describes the holder from the lock file's contents; a holder
// that has not written them yet is described as such.
func ReadHolder(f *os.File) string {
	b := make([]byte, 4096)
	n, _ := f.ReadAt(b, 0)
	var h holder
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(b[:n]))), &h); err != nil || h.PID == 0 {
		return "another process (still starting)"
	}
	lh := backend.LeaseHolder{RunID: h.RunID, PID: h.PID, Host: h.Host, Since: h.Since}
	if h.RunID == "" {
		return fmt.Sprintf("pid %d on %s, since %s", h.PID, h.Host, h.Since.UTC().Format(time.RFC3339))
	}
	return lh.String()
}
