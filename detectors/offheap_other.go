//go:build !unix

package detectors

// mapMem maps nothing here: tables stay in the Go heap.
func mapMem(size uintptr) []byte { return nil }

func unmapMem(b []byte) {}
