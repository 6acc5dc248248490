//go:build unix

package envelope

import (
	"sync"
	"syscall"
	"unsafe"
)

// arena hands out pointer-free chunks from anonymous memory mappings,
// outside the Go heap: the collector neither scans them nor counts them
// towards its goal, so they cost their size and no headroom. Nothing in a
// chunk may point into the Go heap (eventPair holds only integers).
type arena struct {
	mu      sync.Mutex
	regions [][]byte
}

// chunk returns an empty slice with capacity for n pairs. It falls back to
// the Go heap when the mapping fails, so a tracker works on any host, and
// for a nil arena (a zero ConflictTracker), which has no cleanup to unmap.
func (a *arena) chunk(n int) []eventPair {
	if a == nil {
		return make([]eventPair, 0, n)
	}
	size := n * int(unsafe.Sizeof(eventPair{}))
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]eventPair, 0, n)
	}
	a.mu.Lock()
	a.regions = append(a.regions, b)
	a.mu.Unlock()
	return unsafe.Slice((*eventPair)(unsafe.Pointer(unsafe.SliceData(b))), n)[:0]
}

// free unmaps every chunk; it runs once the tracker is unreachable, so no
// slice of them is in use.
func (a *arena) free() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range a.regions {
		_ = syscall.Munmap(b)
	}
	a.regions = nil
}
