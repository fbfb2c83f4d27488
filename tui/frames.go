package tui

// frameRef locates a copy of a frame in the arena.
type frameRef struct {
	off  uint64 // absolute position of the first byte
	n    uint32 // bytes kept
	size uint32 // bytes the frame had (after the size prefix)
}

// arena keeps copies of frames for the hex and detail views in a fixed
// amount of memory: a ring of bytes written at an ever-growing absolute
// position, so a frame is still there while less than limit bytes have
// been written after it. A frame never wraps around the end of the ring;
// the tail that does not fit is skipped.
type arena struct {
	buf   []byte
	limit int
	head  uint64
}

// put copies b (already cut to the per-frame bound) and returns where it
// is. The ring grows by doubling up to limit, then allocates nothing.
func (a *arena) put(b []byte, size int) frameRef {
	n := len(b)
	if n > a.limit {
		n = a.limit
	}
	if n == 0 {
		return frameRef{off: a.head, size: uint32(size)}
	}
	pos := int(a.head % uint64(a.limit))
	if pos+n > a.limit {
		a.head += uint64(a.limit - pos)
		pos = 0
	}
	if end := pos + n; end > len(a.buf) {
		if end > cap(a.buf) {
			c := max(2*cap(a.buf), end, 4096)
			c = min(c, a.limit)
			nb := make([]byte, end, c)
			copy(nb, a.buf)
			a.buf = nb
		} else {
			a.buf = a.buf[:end]
		}
	}
	copy(a.buf[pos:pos+n], b[:n])
	r := frameRef{off: a.head, n: uint32(n), size: uint32(size)}
	a.head += uint64(n)
	return r
}

// get returns the kept bytes of r (aliasing the ring: copy them before
// releasing the model's lock), or ok false if they were overwritten.
func (a *arena) get(r frameRef) (b []byte, ok bool) {
	if r.n == 0 {
		return nil, r.size == 0
	}
	if a.head-r.off > uint64(a.limit) {
		return nil, false
	}
	pos := int(r.off % uint64(a.limit))
	return a.buf[pos : pos+int(r.n)], true
}
