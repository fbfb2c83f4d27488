//go:build unix

package table

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// mapBytes maps size bytes of zeroed private memory, or returns nil.
// From byte hugeFrom on (none if it is negative or size is not past it)
// the mapping is rounded up to whole huge pages and asked to be backed by
// them (hugePages): faulted in 2 MiB at a time rather than 4 KiB, and
// missing the TLB far less on random lookups. On the 2-core VM of
// BENCHMARKS.md a 4 KiB fault of fresh memory cost about 40 µs, and
// duplicate-batches' and replica-divergence's tables wrote 20 to 50 MiB
// of it a run. A huge page is resident whole once touched, so a ring
// asks for them only past its first 2 MiB: a table that stays smaller is
// still resident only as far as it was filled (TestFifoResidentAsFilled),
// and a larger one holds at most one huge page more than it wrote. The
// bytes past size are never touched, so never resident.
func mapBytes(size, hugeFrom int) []byte {
	huge := hugeFrom >= 0 && size > hugeFrom
	n := size
	if huge {
		n = (size + hugePage - 1) &^ (hugePage - 1)
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	if huge {
		hugePages(b[hugeFrom:n])
	}
	return b[:size] // its capacity, n, is what unmap unmaps
}

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
