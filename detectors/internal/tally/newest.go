package tally

// Newest maps connections to what a rule follows of them, holding at most
// Max (connections reaped by the idle timeout never close, so a table of
// them would grow for ever): a connection put when Max are held forgets
// the one put Max connections before it, if that one is still held, and
// counts it in Forgotten, so that the newest are always followed.
//
// It costs what it holds: the held connections are linked in the order
// they were put, and one deleted leaves nothing behind. (A ring of the
// last Max keys put kept 65,536 keys of connections long closed, 4.7 MB
// filling over 22 minutes of the soak at 50 new connections a second:
// TestNewestCostsWhatItHolds.)
type Newest[V any] struct {
	Max       int
	Forgotten int64
	m         map[ConnKey]*held[V]
	// oldest and newest end the list of the held connections in the
	// order they were put; puts counts the puts of connections not held.
	oldest, newest *held[V]
	puts           int64
}

type held[V any] struct {
	k          ConnKey
	v          V
	seq        int64 // puts before this one
	prev, next *held[V]
}

// Get is what is held for k, or V's zero value.
func (n *Newest[V]) Get(k ConnKey) V {
	if h := n.m[k]; h != nil {
		return h.v
	}
	var zero V
	return zero
}

// Put holds v for k, k taking the next place in put order when it is not
// held yet.
func (n *Newest[V]) Put(k ConnKey, v V) {
	if h := n.m[k]; h != nil {
		h.v = v
		return
	}
	if n.m == nil {
		n.m = map[ConnKey]*held[V]{}
	}
	// The one put Max puts before is the oldest held, if still held:
	// every one put before it has been forgotten or deleted already.
	if o := n.oldest; o != nil && o.seq <= n.puts-int64(n.Max) {
		n.unlink(o)
		n.Forgotten++
	}
	h := &held[V]{k: k, v: v, seq: n.puts, prev: n.newest}
	n.puts++
	if n.newest != nil {
		n.newest.next = h
	} else {
		n.oldest = h
	}
	n.newest = h
	n.m[k] = h
}

// Delete stops following k.
func (n *Newest[V]) Delete(k ConnKey) {
	if h := n.m[k]; h != nil {
		n.unlink(h)
	}
}

func (n *Newest[V]) unlink(h *held[V]) {
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		n.oldest = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		n.newest = h.prev
	}
	delete(n.m, h.k)
}

// Len is how many connections are held.
func (n *Newest[V]) Len() int { return len(n.m) }
