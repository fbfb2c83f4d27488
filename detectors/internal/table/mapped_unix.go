//go:build unix

package table

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// mapBytes maps size bytes of zeroed private memory, or returns nil.
func mapBytes(size int) []byte {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	return b
}

func unmap(b []byte) {
	if b != nil {
		syscall.Munmap(b)
	}
}

// release gives b's pages back to the system; b stays mapped. Linux
// zero-fills them if touched again; other systems may keep the old bytes.
func release(b []byte) {
	if b != nil {
		unix.Madvise(b, unix.MADV_DONTNEED)
	}
}
