package dirqueue

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// replaceIfPresent puts tmp in the place of path by exchanging the two
// names: it fails with ENOENT when path is gone, so a file that another
// process moved or removed since it was read is never brought back.
// Filesystems without RENAME_EXCHANGE fall back to a check and a rename.
func replaceIfPresent(tmp, path string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE)
	if unsupported(err) {
		return replaceIfPresentByCheck(tmp, path)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: tmp, New: path, Err: err}
	}
	return nil
}

// renameNoReplace renames from to to, failing with EEXIST when to exists.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if unsupported(err) {
		return renameNoReplaceByCheck(from, to)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// unsupported: the kernel (ENOSYS) or the filesystem (EINVAL) has no
// renameat2 with that flag.
func unsupported(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS)
}

func isCrossDevice(err error) bool { return errors.Is(err, unix.EXDEV) }

// sameDevice: a and b are on one filesystem. A bind mount of the same
// filesystem passes this check and still fails the rename with EXDEV.
func sameDevice(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return !ok1 || !ok2 || sa.Dev == sb.Dev
}
