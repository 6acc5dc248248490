//go:build !unix

package dirqueue

import "io/fs"

// Without O_NOFOLLOW and O_NONBLOCK the fstat check after opening is what
// refuses what is not a regular file.
const openNoFollowNoBlock = 0

func isSymlinkErr(err error) bool { return false }

func keepOwner(path string, like fs.FileInfo) {}
