package tally

// ConnBits is one bit per connection, by connection number (flows
// numbers a run's connections from 1, once each): what a rule knows of a
// connection in one bit, read without a lookup by connection in a map of
// thousands of them, which misses the cache at every request. It grows to
// the highest number set, a bit each. Connections not numbered (0, as in
// tests that build them by hand) are never set.
type ConnBits []uint64

// Has reports whether connection id's bit is set.
func (b ConnBits) Has(id int) bool {
	w := uint(id) >> 6
	return id > 0 && w < uint(len(b)) && b[w]&(1<<(uint(id)&63)) != 0
}

// Set sets connection id's bit, if it is numbered.
func (b *ConnBits) Set(id int) {
	if id <= 0 {
		return
	}
	w := int(uint(id) >> 6)
	if w >= len(*b) {
		*b = append(*b, make([]uint64, w+1-len(*b))...)
	}
	(*b)[w] |= 1 << (uint(id) & 63)
}
