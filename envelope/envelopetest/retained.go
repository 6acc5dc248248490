package envelopetest

import "runtime"

// Retained calls keep and returns what it returned, with how many bytes
// of heap grew across the call once collected: what a reader keeps of the
// entries it read while it holds keep's result. A decoder whose strings are
// slices of an entry's whole text makes a reader that keeps one of them
// keep the whole entry; the tests that guard against it compare this with
// what the kept strings need.
func Retained[T any](keep func() T) (T, int64) {
	before := heapAfterGC()
	kept := keep()
	return kept, int64(heapAfterGC()) - int64(before)
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
