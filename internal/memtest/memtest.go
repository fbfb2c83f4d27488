// Package memtest is a test helper: the heap a test's structures hold.
package memtest

import "runtime"

// HeapLive collects garbage and returns the bytes of heap objects left
// (runtime.MemStats.HeapAlloc): take it before and after building what
// is measured, and keep that alive (runtime.KeepAlive) past the second.
func HeapLive() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
