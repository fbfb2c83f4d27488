package table_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kfsniff/kfsniff/detectors/internal/table"
)

// ref is the reference a Fifo must agree with: a map bounded to limit
// entries that forgets the oldest insertion first (a ring of keys with
// insertion numbers, so that a key deleted and put again is not evicted
// for its older slot).
type ref[K comparable, V any] struct {
	m       map[K]refVal[V]
	ring    []refSlot[K]
	head    int
	seq     uint64
	limit   int
	evicted int64
	onEvict func(K, V)
}

type refVal[V any] struct {
	v   V
	seq uint64
}

type refSlot[K comparable] struct {
	k   K
	seq uint64
}

func newRef[K comparable, V any](limit int, onEvict func(K, V)) *ref[K, V] {
	return &ref[K, V]{m: map[K]refVal[V]{}, limit: max(limit, 1), onEvict: onEvict}
}

func (f *ref[K, V]) get(k K) (V, bool) {
	e, ok := f.m[k]
	return e.v, ok
}

// put inserts or replaces; a replaced value keeps its place in the order.
func (f *ref[K, V]) put(k K, v V) {
	if e, ok := f.m[k]; ok {
		f.m[k] = refVal[V]{v, e.seq}
		return
	}
	f.seq++
	slot := refSlot[K]{k, f.seq}
	if len(f.ring) < f.limit {
		f.ring = append(f.ring, slot)
	} else {
		old := f.ring[f.head]
		if e, ok := f.m[old.k]; ok && e.seq == old.seq {
			delete(f.m, old.k)
			f.evicted++
			if f.onEvict != nil {
				f.onEvict(old.k, e.v)
			}
		}
		f.ring[f.head] = slot
		f.head = (f.head + 1) % f.limit
	}
	f.m[k] = refVal[V]{v, f.seq}
}

func (f *ref[K, V]) del(k K) { delete(f.m, k) }

// each calls fn for the live entries, oldest first.
func (f *ref[K, V]) each(fn func(K, V)) {
	n := len(f.ring)
	for i := range n {
		s := f.ring[(f.head+i)%n]
		if e, ok := f.m[s.k]; ok && e.seq == s.seq {
			fn(s.k, e.v)
		}
	}
}

func TestReferenceForgetsOldestFirst(t *testing.T) {
	var evicted []string
	f := newRef(3, func(k string, _ int) { evicted = append(evicted, k) })
	for i, k := range []string{"a", "b", "c"} {
		f.put(k, i)
	}
	f.del("b")
	f.put("d", 3) // evicts a
	f.put("e", 4) // b's slot is stale: nothing evicted
	f.put("b", 5) // evicts c
	f.put("d", 6) // replaces in place
	if !slices.Equal(evicted, []string{"a", "c"}) || f.evicted != 2 {
		t.Errorf("evicted %v (%d), want [a c]", evicted, f.evicted)
	}
	var order []string
	f.each(func(k string, v int) { order = append(order, fmt.Sprint(k, v)) })
	if !slices.Equal(order, []string{"d6", "e4", "b5"}) {
		t.Errorf("each = %v, want oldest first [d6 e4 b5]", order)
	}
}

type poorKey struct{ a, b uint32 }

// Hash is deliberately poor (few distinct values) so that probe chains
// are long and stale slots pile up in them.
func (k poorKey) Hash(seed uint64) uint64 { return uint64(k.a%7) << 32 }

type goodKey struct{ a, b uint32 }

func (k goodKey) Hash(seed uint64) uint64 { return table.Mix64(uint64(k.a)^seed, uint64(k.b)) }

// TestFifoMatchesReference: any sequence of gets and puts gives the same
// answers, evictions (in order) and iteration as the reference.
func TestFifoMatchesReference(t *testing.T) {
	for _, limit := range []int{1, 2, 3, 17, 100, 1000} {
		r := rand.New(rand.NewPCG(uint64(limit), 7))
		var gotEv, wantEv []string
		tab := table.NewFifo(limit, func(k poorKey, v *int) { gotEv = append(gotEv, fmt.Sprint(k, *v)) })
		want := newRef(limit, func(k poorKey, v int) { wantEv = append(wantEv, fmt.Sprint(k, v)) })
		for i := range 20000 {
			k := poorKey{uint32(r.IntN(3 * limit)), uint32(r.IntN(2))}
			switch r.IntN(3) {
			case 0:
				got := tab.Get(k)
				w, ok := want.get(k)
				if (got != nil) != ok || (ok && *got != w) {
					t.Fatalf("limit %d op %d: Get(%v) differs", limit, i, k)
				}
			default:
				tab.Put(k, i)
				want.put(k, i)
			}
			if tab.Len() != len(want.m) || tab.Evicted() != want.evicted {
				t.Fatalf("limit %d op %d: len %d/%d evicted %d/%d", limit, i, tab.Len(), len(want.m), tab.Evicted(), want.evicted)
			}
		}
		if !slices.Equal(gotEv, wantEv) {
			t.Fatalf("limit %d: evictions differ", limit)
		}
		var got, all []string
		tab.Each(func(k poorKey, v *int) { got = append(got, fmt.Sprint(k, *v)) })
		want.each(func(k poorKey, v int) { all = append(all, fmt.Sprint(k, v)) })
		if !slices.Equal(got, all) {
			t.Fatalf("limit %d: Each differs:\n%v\n%v", limit, got, all)
		}
		want.each(func(k poorKey, v int) {
			if p := tab.Get(k); p == nil || *p != v {
				t.Fatalf("limit %d: %v lost", limit, k)
			}
		})
	}
}

func TestFifoInsertReturnsTheSlot(t *testing.T) {
	tab := table.NewFifo[goodKey, [2]int64](4, nil)
	for i := range 10 {
		*tab.Insert(goodKey{uint32(i), 1}) = [2]int64{int64(i), -int64(i)}
	}
	if tab.Evicted() != 6 || tab.Get(goodKey{5, 1}) != nil || *tab.Get(goodKey{9, 1}) != [2]int64{9, -9} {
		t.Errorf("evicted %d, 5 %v, 9 %v", tab.Evicted(), tab.Get(goodKey{5, 1}), tab.Get(goodKey{9, 1}))
	}
}

// TestFifoDoesNotAllocate: once the table has reached its limit, looking
// up, inserting (forgetting the oldest) and warming allocate nothing: the
// rules call them per batch and per record.
func TestFifoDoesNotAllocate(t *testing.T) {
	const limit = 5000
	tab := table.NewFifo[goodKey, int64](limit, nil)
	for i := range 2 * limit {
		tab.Put(goodKey{uint32(i), 3}, int64(i))
	}
	i := uint32(2 * limit)
	allocs := testing.AllocsPerRun(20000, func() {
		k := goodKey{i, 3}
		_ = tab.Warm(k)
		if tab.Get(k) == nil {
			*tab.Insert(k) = int64(i)
		}
		p, _ := tab.Ref(goodKey{i - limit/2, 3})
		*p++
		i++
	})
	if allocs != 0 || tab.Len() != limit {
		t.Errorf("%.2f allocations per operation at the limit (len %d), want 0", allocs, tab.Len())
	}
}

// randomKeys are n keys (n a power of two) for the benchmarks.
func randomKeys(n int) []goodKey {
	r := rand.New(rand.NewPCG(1, 2))
	ks := make([]goodKey, n)
	for i := range ks {
		ks[i] = goodKey{r.Uint32(), r.Uint32()}
	}
	return ks
}

// benchmarkFifo looks keys up in a table of limit entries, inserting the
// absent ones.
func benchmarkFifo(b *testing.B, limit, keys int) {
	tab := table.NewFifo[goodKey, int64](limit, nil)
	ks := randomKeys(keys)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if k := ks[i&(len(ks)-1)]; tab.Get(k) == nil {
			*tab.Insert(k) = int64(i)
		}
		i++
	}
}

func BenchmarkFifo(b *testing.B) { benchmarkFifo(b, 250000, 1<<20) }

// BenchmarkFifoFill fills a new table of 250,000 entries (a ring and an
// index out of the heap) with as many distinct keys and drops it, as
// duplicate-batches and replica-divergence fill theirs once a run: the
// pages the table writes for the first time are part of the cost.
func BenchmarkFifoFill(b *testing.B) {
	const limit = 250000
	ks := randomKeys(1 << 18)
	b.ReportAllocs()
	for b.Loop() {
		tab := table.NewFifo[goodKey, [4]int64](limit, nil)
		for i := range limit {
			*tab.Insert(ks[i]) = [4]int64{int64(i)}
		}
		if tab.Len() != limit {
			b.Fatal(tab.Len())
		}
	}
}

func BenchmarkFifoSmall(b *testing.B) { benchmarkFifo(b, 4096, 1<<14) }

// BenchmarkFifoMap is the reference at BenchmarkFifo's size: what a Go
// map with a ring costs instead.
func BenchmarkFifoMap(b *testing.B) {
	tab := newRef[goodKey, int64](250000, nil)
	ks := randomKeys(1 << 20)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := ks[i&(len(ks)-1)]
		if _, ok := tab.get(k); !ok {
			tab.put(k, int64(i))
		}
	}
}
