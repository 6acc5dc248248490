//go:build unix

package dirqueue

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

const openNoFollowNoBlock = syscall.O_NONBLOCK | syscall.O_NOFOLLOW

// isSymlinkErr: open with O_NOFOLLOW met a symbolic link (ELOOP).
func isSymlinkErr(err error) bool { return errors.Is(err, syscall.ELOOP) }

// keepOwner gives path the owner of like, where the process may (root, or
// the owner already); elsewhere the file stays the process's.
func keepOwner(path string, like fs.FileInfo) {
	if st, ok := like.Sys().(*syscall.Stat_t); ok {
		_ = os.Lchown(path, int(st.Uid), int(st.Gid))
	}
}
