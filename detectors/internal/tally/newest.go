package tally

// Newest maps connections to what a rule follows of them, holding at most
// Max (connections reaped by the idle timeout never close, so a table of
// them would grow for ever): a connection put when Max are held forgets
// the one put Max connections before it, if that one is still held, and
// counts it in Forgotten, so that the newest are always followed.
type Newest[V any] struct {
	Max       int
	Forgotten int64
	m         map[ConnKey]V
	order     []ConnKey // the keys put, a ring from head once Max long
	head      int
}

// Get is what is held for k, or V's zero value.
func (n *Newest[V]) Get(k ConnKey) V { return n.m[k] }

// Put holds v for k, k taking a place in the ring when it is not held yet.
func (n *Newest[V]) Put(k ConnKey, v V) {
	if n.m == nil {
		n.m = map[ConnKey]V{}
	}
	if _, held := n.m[k]; !held {
		if len(n.order) < n.Max {
			n.order = append(n.order, k)
		} else {
			if old := n.order[n.head]; hasKey(n.m, old) {
				delete(n.m, old)
				n.Forgotten++
			}
			n.order[n.head] = k
			n.head = (n.head + 1) % n.Max
		}
	}
	n.m[k] = v
}

// Delete stops following k (its place in the ring stays until reused).
func (n *Newest[V]) Delete(k ConnKey) { delete(n.m, k) }

// Len is how many connections are held; Slots how many places the ring has taken.
func (n *Newest[V]) Len() int   { return len(n.m) }
func (n *Newest[V]) Slots() int { return len(n.order) }

func hasKey[V any](m map[ConnKey]V, k ConnKey) bool { _, ok := m[k]; return ok }
