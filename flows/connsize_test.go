package flows

import (
	"testing"
	"unsafe"
)

// TestConnSizeClass holds Conn to the 768-byte allocation size class: the
// next is 896, 128 bytes more for every connection, and a capture of
// hundreds of thousands of short connections (churn-conns.pcap in
// pipeline's TestHostileBounds) then passes its heap bound. A field added
// to Conn must take the room of another, or be reached through a pointer.
func TestConnSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Conn{}); n > 768 {
		t.Errorf("Conn is %d bytes: past the 768-byte size class", n)
	}
}
