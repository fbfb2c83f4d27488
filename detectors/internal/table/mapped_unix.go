//go:build unix

package table

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// mapBytes maps size bytes of zeroed private memory, or returns nil. The
// mapping is rounded up to whole huge pages and asked to be backed by
// them (hugePages): a table's ring and index are then faulted in 2 MiB at
// a time rather than 4 KiB, and their random lookups miss the TLB far
// less. On the 2-core VM of BENCHMARKS.md a 4 KiB fault of fresh memory
// cost 15 to 40 µs, and duplicate-batches' and replica-divergence's
// tables wrote 20 to 50 MiB of it a run. The bytes past size are never
// touched, so never resident; a huge page of a ring being filled is
// resident whole (at most 2 MiB more than the entries written).
func mapBytes(size int) []byte {
	n := (size + hugePage - 1) &^ (hugePage - 1)
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	hugePages(b)
	return b[:size] // its capacity, n, is what unmap unmaps
}

// hugePage is the size of a transparent huge page (x86-64, arm64 with
// 4 KiB pages).
const hugePage = 2 << 20

func unmap(b []byte) {
	if b != nil {
		syscall.Munmap(b[:cap(b)])
	}
}

// release gives b's pages back to the system; b stays mapped. Linux
// zero-fills them if touched again; other systems may keep the old bytes.
func release(b []byte) {
	if b != nil {
		unix.Madvise(b[:cap(b)], unix.MADV_DONTNEED) // the whole mapping: its last huge page is resident whole
	}
}
