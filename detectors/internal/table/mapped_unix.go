//go:build unix

package table

import "syscall"

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
