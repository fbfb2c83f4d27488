//go:build unix && !linux

package table

// hugePages does nothing: only Linux is asked for huge pages.
func hugePages([]byte) {}
