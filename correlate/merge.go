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
// seen, or when more than Max are held (the earliest first), or at Flush.
// A record earlier than one already released is late: it is released at
// once, out of order, and counted.
type Merger struct {
	Window time.Duration
	Max    int
	held   itemHeap
	seq    uint64
	high   int64 // latest time pushed
	out    int64 // latest time released
	outSet bool
	// Late counts the records released out of order.
	Late int64
}

// Item is one record to deliver, the lane it belongs to (its Kafka
// partition in a consumer group, else 0) and its time.
type Item struct {
	Lane int32
	At   int64 // unix ns, corrected
	Rec  *Record
	seq  uint64
}

type itemHeap []Item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if h[i].At != h[j].At {
		return h[i].At < h[j].At
	}
	return h[i].seq < h[j].seq
}
func (h itemHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)   { *h = append(*h, x.(Item)) }
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = Item{}
	*h = old[:len(old)-1]
	return it
}

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
	for len(m.held) > 0 && (m.held[0].At <= limit || (m.Max > 0 && len(m.held) > m.Max)) {
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
	for len(m.held) > 0 {
		out = m.pop(out)
	}
	return out
}

// Held is how many records wait.
func (m *Merger) Held() int { return len(m.held) }

// Drop forgets the held records of a lane (a partition revoked), and
// returns how many.
func (m *Merger) Drop(lane int32) int {
	kept := m.held[:0]
	n := 0
	for _, it := range m.held {
		if it.Lane == lane {
			n++
			continue
		}
		kept = append(kept, it)
	}
	clear(m.held[len(kept):])
	m.held = kept
	heap.Init(&m.held)
	return n
}
