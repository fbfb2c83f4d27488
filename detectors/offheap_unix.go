//go:build unix

package detectors

import "syscall"

// mapMem maps size bytes of zeroed private memory, or returns nil.
func mapMem(size uintptr) []byte {
	b, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return b
}

func unmapMem(b []byte) { _ = syscall.Munmap(b) }
