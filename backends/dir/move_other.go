//go:build !linux

package dirqueue

import (
	"errors"
	"io/fs"
	"syscall"
)

// Without renameat2, the rewrite and the move check and then rename: a
// small race with another process working on the same file (see
// replaceIfPresentByCheck).
func replaceIfPresent(tmp, path string) error { return replaceIfPresentByCheck(tmp, path) }

func renameNoReplace(from, to string) error { return renameNoReplaceByCheck(from, to) }

func isCrossDevice(err error) bool { return errors.Is(err, syscall.EXDEV) }

// sameDevice cannot tell here; the rename will.
func sameDevice(a, b fs.FileInfo) bool { return true }
