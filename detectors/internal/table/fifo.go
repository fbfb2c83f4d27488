// Package table holds the bounded, pointer-free hash tables rules keep
// their state in, allocated once and costing nothing per exchange.
package table

import (
	"math/bits"
	"math/rand/v2"
	"reflect"
)

// Fifo is a hash table bounded to limit entries that forgets the oldest
// insertion first, for tables that never delete: the fingerprints of
// duplicate-batches and the batches replica-divergence holds. It is built
// for hundreds of thousands of entries looked up per record or batch,
// where the cost is cache misses:
//
//   - the entries live in one ring, in insertion order, so forgetting the
//     oldest is overwriting the slot at the head;
//   - an open-addressed index (linear probing; half full of live slots, at
//     most three quarters with stale ones) of 8-byte slots, a hash tag and
//     the entry's insertion number, finds them: a lookup reads a slot or
//     two and, when the tag matches, one entry;
//   - a forgotten entry's slot is not looked for (that would be a second
//     miss per insertion): its insertion number shows it is stale, lookups
//     pass over it, insertions reuse it, and when stale slots would make
//     the probe chains long one sequential pass drops them all;
//   - it holds no pointer of its own, so with pointer-free keys and values
//     the garbage collector never scans it;
//   - the ring and the index are allocated small at the first insertion
//     and at their full size at the second growth (see grow): a small
//     capture allocates, and so pays for, little of them.
//
// Keys hash themselves with a per-table random seed (hostile traffic cannot
// aim at one probe chain). Values are reached by pointer; a pointer is
// valid until the next insert.
type Fifo[K FifoKey, V any] struct {
	ents    []fifoEnt[K, V]
	head    int // the oldest entry once the ring is full
	limit   int
	seq     uint64   // insertions so far; the i-th insertion is at ring position (i-1) % limit
	idx     []uint64 // 0 empty, else slotUsed | tag<<32 | uint32(insertion number)
	mask    uint64
	nstale  int // index slots of forgotten entries
	seed    uint64
	evicted int64
	onEvict func(k K, v *V)
	mapped  bool     // the ring and index may live out of the heap (mapped.go)
	mem     *mapping // what is, if anything
}

// Evicted is how many entries were forgotten to make room.
func (t *Fifo[K, V]) Evicted() int64 { return t.evicted }

// FifoKey is a table key: comparable, hashed with a seed (Mix64 mixes
// its words well).
type FifoKey interface {
	comparable
	Hash(seed uint64) uint64
}

type fifoEnt[K FifoKey, V any] struct {
	k K
	v V
}

const (
	// maxFifoTable bounds a table's limit: insertion numbers are
	// compared in 32 bits.
	maxFifoTable = 1 << 30
	slotUsed     = 1 << 63
	tagMask      = 1<<31 - 1
)

// NewFifo returns a table of at most limit entries (1 to 1<<30) that calls
// onEvict, if set, with each entry it forgets, before reusing its slot.
func NewFifo[K FifoKey, V any](limit int, onEvict func(K, *V)) *Fifo[K, V] {
	return &Fifo[K, V]{limit: min(max(limit, 1), maxFifoTable), seed: rand.Uint64(), onEvict: onEvict,
		mapped: pointerFree(reflect.TypeFor[fifoEnt[K, V]]())}
}

// tag is the 31 bits of a key's hash the index keeps: its low bits are the
// home slot, all of them are compared before the entry is.
func (t *Fifo[K, V]) tag(k K) uint64 { return k.Hash(t.seed) >> 33 }

// stale reports whether a used slot points at a forgotten entry.
func (t *Fifo[K, V]) stale(s uint64) bool {
	return uint32(t.seq)-uint32(s) >= uint32(len(t.ents))
}

// pos returns the ring position of the live entry a slot points at.
func (t *Fifo[K, V]) pos(s uint64) int {
	n := t.seq - uint64(uint32(t.seq)-uint32(s)) - 1 // its insertion number, from 0
	if n < uint64(t.limit) {
		return int(n)
	}
	return int(n % uint64(t.limit))
}

// find returns k's ring position, or -1.
func (t *Fifo[K, V]) find(k K) int {
	if len(t.idx) == 0 {
		return -1
	}
	tag := t.tag(k)
	for i := tag & t.mask; ; i = (i + 1) & t.mask {
		s := t.idx[i]
		if s == 0 {
			return -1
		}
		if (s>>32)&tagMask == tag && !t.stale(s) {
			if pos := t.pos(s); t.ents[pos].k == k {
				return pos
			}
		}
	}
}

// Warm reads the index slot where a lookup of k starts and returns it, to
// be thrown away: reading the slots of many keys first lets their cache
// misses overlap, where lookups one after the other would wait for each.
func (t *Fifo[K, V]) Warm(k K) uint64 {
	if len(t.idx) == 0 {
		return 0
	}
	return t.idx[t.tag(k)&t.mask]
}

// Get returns k's value, or nil.
func (t *Fifo[K, V]) Get(k K) *V {
	pos := t.find(k)
	if pos < 0 {
		return nil
	}
	return &t.ents[pos].v
}

// Ref returns k's value and true, or, if k is absent, inserts it with a
// zero value (forgetting the oldest entry first if the table is full) and
// returns that and false: one probe of the index either way.
func (t *Fifo[K, V]) Ref(k K) (*V, bool) {
	if len(t.idx) == 0 {
		return t.Insert(k), false
	}
	tag := t.tag(k)
	free := -1
	i := tag & t.mask
	for ; ; i = (i + 1) & t.mask {
		s := t.idx[i]
		if s == 0 {
			break
		}
		if t.stale(s) {
			if free < 0 {
				free = int(i)
			}
			continue
		}
		if (s>>32)&tagMask == tag {
			if pos := t.pos(s); t.ents[pos].k == k {
				return &t.ents[pos].v, true
			}
		}
	}
	if free < 0 {
		free = int(i)
	}
	return t.place(k, tag, free), false
}

// Put inserts or replaces; a replaced value keeps its place in the order.
func (t *Fifo[K, V]) Put(k K, v V) {
	p, _ := t.Ref(k)
	*p = v
}

// Insert adds k, which must be absent, with a zero value and returns it,
// forgetting the oldest entry first if the table is full.
func (t *Fifo[K, V]) Insert(k K) *V { return t.place(k, t.tag(k), -1) }

// place adds k, which is absent, at index slot i (empty or stale; -1: to
// be found), after the entry it needs.
func (t *Fifo[K, V]) place(k K, tag uint64, i int) *V {
	var pos int
	if len(t.ents) < t.limit {
		if len(t.ents) == cap(t.ents) {
			t.grow()
			i = -1 // the index was rebuilt
		} else if fifoIndexFactor*len(t.ents) >= len(t.idx) {
			t.growIndex(2*len(t.idx), nil, false) // a mapped ring's (grow)
			i = -1
		}
		pos = len(t.ents)
		t.ents = append(t.ents, fifoEnt[K, V]{k: k})
	} else {
		pos = t.head
		old := &t.ents[pos]
		t.evicted++
		t.nstale++
		if t.onEvict != nil {
			t.onEvict(old.k, &old.v)
		}
		*old = fifoEnt[K, V]{k: k}
		t.head++
		if t.head == t.limit {
			t.head = 0
		}
	}
	t.seq++ // from here the forgotten entry's slot is stale
	if 4*(len(t.ents)+t.nstale) > 3*len(t.idx) {
		t.sweep()
		i = -1
	}
	if i < 0 {
		j := tag & t.mask
		for t.idx[j] != 0 && !t.stale(t.idx[j]) {
			j = (j + 1) & t.mask
		}
		i = int(j)
	}
	if t.idx[i] != 0 {
		t.nstale-- // a stale slot reused
	}
	t.idx[i] = slotUsed | tag<<32 | uint64(uint32(t.seq))
	return &t.ents[pos].v
}

// sweep drops the stale slots in one pass, moving the live ones back
// towards their home slots: starting after an empty slot, each live slot is
// put in the first free slot from its home, which is never past where it
// was.
func (t *Fifo[K, V]) sweep() {
	size := uint64(len(t.idx))
	start := uint64(0)
	for t.idx[start] != 0 {
		start++
	}
	for n := uint64(1); n <= size; n++ {
		i := (start + n) & t.mask
		s := t.idx[i]
		if s == 0 {
			continue
		}
		t.idx[i] = 0
		if t.stale(s) {
			continue
		}
		j := (s >> 32) & tagMask & t.mask
		for t.idx[j] != 0 {
			j = (j + 1) & t.mask
		}
		t.idx[j] = s
	}
	t.nstale = 0
}

// grow makes room in the ring: fifoFirst entries at the first insertion,
// then at once for the whole limit if it is at most fifoSizedOnce (a copy
// of the ring and the index at each doubling would cost more than the
// tables' use on the benchmark), else doubling up to limit. Tables of
// small captures never grow past the first: tens of MB allocated at the
// first insertion made the garbage collector run, and scan everything
// else, during a run of a few hundred packets. The
// index is rebuilt at fifoIndexFactor times the ring's capacity, half full
// of live slots, so that stale ones are swept every limit/2 insertions or
// so. A ring mapped out of the heap (mapped.go) is resident only as far
// as it is filled, but an index, written at random, is resident whole as
// soon as it holds a few entries per page: its index doubles with the
// entries instead (place), up to the same size once the ring is full
// (bulk's 100,000 batches in tables of 200,000 and 250,000 kept 8 MiB of
// index for 4). The ring is not full yet, so every slot is live.
func (t *Fifo[K, V]) grow() {
	n := min(max(2*cap(t.ents), 16), t.limit)
	if t.limit <= fifoSizedOnce {
		n = t.limit
		if cap(t.ents) == 0 {
			n = min(t.limit, fifoFirst)
		}
	}
	ents, entsMem := makeSlice[fifoEnt[K, V]](len(t.ents), n, t.mapped, hugePage) // huge pages past its first 2 MiB (mapBytes)
	copy(ents, t.ents)
	t.ents = ents
	if entsMem != nil {
		n = len(t.ents) + 1
	}
	t.growIndex(int(uint64(1)<<bits.Len(uint(fifoIndexFactor*n-1))), entsMem, true)
}

// growIndex rebuilds the index at size slots (a power of two) if it is
// smaller, and adopts the ring's new mapping (entsMem, nil if it is in
// the heap) if the ring was replaced. The new index is
// filled from the old one in slot order, so its writes run along it
// rather than at random.
func (t *Fifo[K, V]) growIndex(size int, entsMem []byte, newRing bool) {
	if len(t.idx) >= size {
		t.adopt(entsMem, nil, newRing, false)
		return
	}
	old, oldMask := t.idx, t.mask
	hugeFrom := -1 // an index of 2 MiB or more is resident whole soon: in huge pages
	if size*8 >= hugePage {
		hugeFrom = 0
	}
	idx, idxMem := makeSlice[uint64](size, size, t.mapped, hugeFrom)
	t.idx = idx
	t.mask = uint64(size) - 1
	defer t.adopt(entsMem, idxMem, newRing, true) // after the old index is read
	if len(t.ents) == 0 {
		return
	}
	start := uint64(0)
	for old[start] != 0 {
		start++
	}
	for n := uint64(1); n <= uint64(len(old)); n++ {
		s := old[(start+n)&oldMask]
		if s == 0 {
			continue
		}
		j := (s >> 32) & tagMask & t.mask
		for t.idx[j] != 0 {
			j = (j + 1) & t.mask
		}
		t.idx[j] = s
	}
}

// Len is the number of entries held.
func (t *Fifo[K, V]) Len() int { return len(t.ents) }

// Each calls fn for the entries, oldest first.
func (t *Fifo[K, V]) Each(fn func(K, *V)) {
	n := len(t.ents)
	for i := range n {
		e := &t.ents[(t.head+i)%n]
		fn(e.k, &e.v)
	}
}

// Mix64 mixes two words into a well-spread hash (the multiply-fold of
// wyhash).
func Mix64(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a^0xa0761d6478bd642f, b^0xe7037ed1a0b428db)
	return hi ^ lo
}

const (
	// fifoIndexFactor is the index's size over the ring's capacity.
	fifoIndexFactor = 2
	// fifoSizedOnce is the largest limit allocated at once, at the
	// second growth; fifoFirst the entries of the first.
	fifoSizedOnce = 1 << 20
	fifoFirst     = 1 << 12
)
