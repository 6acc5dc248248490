package dirqueue

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// MaxEntryBytes caps one entry file: a larger file is listed as malformed
// with its size, never read. Decoding holds the bytes, the envelope and
// its payload at once, so the cap bounds what one entry costs in memory
// at a few times this.
const MaxEntryBytes = 16 << 20

// errNotEntry: the name in error/ is not a regular file that dlqctl may
// read; its text is the reason listed with the malformed entry.
type errNotEntry struct{ reason string }

func (e *errNotEntry) Error() string { return e.reason }

// readEntry reads an entry file without ever blocking on it or following
// a link: it is opened with O_NONBLOCK|O_NOFOLLOW (so a FIFO does not wait
// for a writer and a symlink, wherever it points, is refused), then
// fstat'ed, and only a regular file of at most MaxEntryBytes is read.
// Anything else is an *errNotEntry. The file's FileInfo is returned so a
// move can keep its mode and owner.
func readEntry(path string) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNoFollowNoBlock, 0)
	if err != nil {
		if isSymlinkErr(err) {
			return nil, nil, &errNotEntry{"a symbolic link: not followed (only regular files in error/ are entries)"}
		}
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, st, &errNotEntry{"not a regular file (" + kindOf(st.Mode()) + "): not read"}
	}
	if st.Size() > MaxEntryBytes {
		return nil, st, &errNotEntry{fmt.Sprintf("%d bytes, over the %d MiB one entry may take: not read", st.Size(), MaxEntryBytes>>20)}
	}
	// The size can grow between fstat and read: read one byte past the cap
	// to notice.
	data, err := io.ReadAll(io.LimitReader(f, MaxEntryBytes+1))
	if err != nil {
		return nil, st, err
	}
	if len(data) > MaxEntryBytes {
		return nil, st, &errNotEntry{fmt.Sprintf("over the %d MiB one entry may take: not read", MaxEntryBytes>>20)}
	}
	return data, st, nil
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "mode " + m.String()
}

func asNotEntry(err error) (*errNotEntry, bool) {
	var ne *errNotEntry
	return ne, errors.As(err, &ne)
}
