package correlate

import (
	"container/heap"
	"time"
)

// Merger orders records by capture time (corrected for clock skew) over a
// bounded reorder window: the records of one Kafka partition come from
// many agents, each in its own shipping order (an agent ships an exchange
// when its response comes, so even one agent's records are not in request
// order). A record is released once a record later by Window has been
// seen, or when more than Max are held or their records hold more than
// MaxBytes (Record.Size; the earliest first: counted in Early), or at
// Flush.
// A record earlier than one already released is late: it is released at
// once, out of order, and counted.
type Merger struct {
	Window   time.Duration
	Max      int
	MaxBytes int64
	held     itemHeap
	seq      uint64
	high     int64 // latest time pushed
	out      int64 // latest time released
	outSet   bool
	// Late counts the records released out of order; Early those
	// released before their window for MaxBytes.
	Late, Early int64
}

// Item is one record to deliver, the lane it belongs to (its Kafka
// partition in a consumer group, else 0) and its time.
type Item struct {
	Lane int32
	At   int64 // unix ns, corrected
	Rec  *Record
	seq  uint64
	size int64 // Rec.Size(), once held
}

// itemHeap is the held items, earliest first, and the bytes their records
// hold: items go in through add or heap.Push, out through heap.Pop.
type itemHeap struct {
	items []Item
	bytes int64
}

func (h *itemHeap) Len() int { return len(h.items) }
func (h *itemHeap) Less(i, j int) bool {
	if h.items[i].At != h.items[j].At {
		return h.items[i].At < h.items[j].At
	}
	return h.items[i].seq < h.items[j].seq
}
func (h *itemHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *itemHeap) Push(x any)    { h.add(x.(Item)) }
func (h *itemHeap) Pop() any {
	old := h.items
	it := old[len(old)-1]
	old[len(old)-1] = Item{}
	h.items = old[:len(old)-1]
	h.bytes -= it.size
	return it
}

// add appends items without ordering them (heap.Init after).
func (h *itemHeap) add(its ...Item) {
	for _, it := range its {
		if it.size == 0 && it.Rec != nil {
			it.size = int64(it.Rec.Size())
		}
		h.items = append(h.items, it)
		h.bytes += it.size
	}
}

// first is the earliest held item (the heap must not be empty).
func (h *itemHeap) first() *Item { return &h.items[0] }

// Push adds an item and appends to out what is ready to go.
func (m *Merger) Push(it Item, out []Item) []Item {
	if m.outSet && it.At < m.out {
		m.Late++
		return append(out, it)
	}
	m.seq++
	it.seq = m.seq
	heap.Push(&m.held, it)
	if it.At > m.high {
		m.high = it.At
	}
	limit := m.high - int64(m.Window)
	for m.held.Len() > 0 {
		switch {
		case m.held.first().At <= limit || (m.Max > 0 && m.held.Len() > m.Max):
		case m.MaxBytes > 0 && m.held.bytes > m.MaxBytes:
			m.Early++
		default:
			return out
		}
		out = m.pop(out)
	}
	return out
}

func (m *Merger) pop(out []Item) []Item {
	it := heap.Pop(&m.held).(Item)
	if !m.outSet || it.At > m.out {
		m.out, m.outSet = it.At, true
	}
	return append(out, it)
}

// Flush appends everything held, in order.
func (m *Merger) Flush(out []Item) []Item {
	for m.held.Len() > 0 {
		out = m.pop(out)
	}
	return out
}

// Held is how many records wait.
func (m *Merger) Held() int { return m.held.Len() }

// Drop forgets the held records of a lane (a partition revoked), and
// returns how many.
func (m *Merger) Drop(lane int32) int {
	kept := m.held.items[:0]
	n := 0
	for _, it := range m.held.items {
		if it.Lane == lane {
			n++
			m.held.bytes -= it.size
			continue
		}
		kept = append(kept, it)
	}
	clear(m.held.items[len(kept):])
	m.held.items = kept
	heap.Init(&m.held)
	return n
}
