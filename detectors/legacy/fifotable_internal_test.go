package legacy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

type testKey struct{ a, b uint32 }

// hash is deliberately poor (few distinct values) so that probe chains
// are long and backward-shift deletion is exercised.
func (k testKey) hash(seed uint64) uint64 { return uint64(k.a%7) << 32 }

type goodKey struct{ a, b uint32 }

func (k goodKey) hash(seed uint64) uint64 { return mix64(uint64(k.a)^seed, uint64(k.b)) }

// TestFifoTableMatchesFifo: any sequence of gets and puts gives the same
// answers, evictions (in order) and iteration as fifo, the reference.
func TestFifoTableMatchesFifo(t *testing.T) {
	for _, limit := range []int{1, 2, 3, 17, 100, 1000} {
		r := rand.New(rand.NewPCG(uint64(limit), 7))
		var gotEv, wantEv []string
		tab := newFifoTable(limit, func(k testKey, v *int) { gotEv = append(gotEv, fmt.Sprint(k, *v)) })
		ref := newFifo(limit, func(k testKey, v int) { wantEv = append(wantEv, fmt.Sprint(k, v)) })
		for i := range 20000 {
			k := testKey{uint32(r.IntN(3 * limit)), uint32(r.IntN(2))}
			switch r.IntN(3) {
			case 0:
				got, want := tab.get(k), 0
				w, ok := ref.get(k)
				if ok {
					want = w
				}
				if (got != nil) != ok || (ok && *got != want) {
					t.Fatalf("limit %d op %d: get(%v) differs", limit, i, k)
				}
			default:
				tab.put(k, i)
				ref.put(k, i)
			}
			if tab.len() != ref.len() || tab.evicted != ref.evicted {
				t.Fatalf("limit %d op %d: len %d/%d evicted %d/%d", limit, i, tab.len(), ref.len(), tab.evicted, ref.evicted)
			}
		}
		if !slices.Equal(gotEv, wantEv) {
			t.Fatalf("limit %d: evictions differ", limit)
		}
		var got, want []string
		tab.each(func(k testKey, v *int) { got = append(got, fmt.Sprint(k, *v)) })
		ref.each(func(k testKey, v int) { want = append(want, fmt.Sprint(k, v)) })
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: each differs:\n%v\n%v", limit, got, want)
		}
		// Every key the reference holds is found, with its value.
		ref.each(func(k testKey, v int) {
			if p := tab.get(k); p == nil || *p != v {
				t.Fatalf("limit %d: %v lost", limit, k)
			}
		})
	}
}

func TestFifoTableInsertReturnsTheSlot(t *testing.T) {
	tab := newFifoTable[goodKey, [2]int64](4, nil)
	for i := range 10 {
		*tab.insert(goodKey{uint32(i), 1}) = [2]int64{int64(i), -int64(i)}
	}
	if tab.evicted != 6 || tab.get(goodKey{5, 1}) != nil || *tab.get(goodKey{9, 1}) != [2]int64{9, -9} {
		t.Errorf("evicted %d, 5 %v, 9 %v", tab.evicted, tab.get(goodKey{5, 1}), tab.get(goodKey{9, 1}))
	}
}

func BenchmarkFifoTable(b *testing.B) {
	const limit = 250000
	tab := newFifoTable[goodKey, int64](limit, nil)
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]goodKey, 1<<20)
	for i := range keys {
		keys[i] = goodKey{r.Uint32(), r.Uint32()}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i&(len(keys)-1)]
		if tab.get(k) == nil {
			*tab.insert(k) = int64(i)
		}
		i++
	}
}

func BenchmarkFifoMap(b *testing.B) {
	const limit = 250000
	tab := newFifo[goodKey, int64](limit, nil)
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]goodKey, 1<<20)
	for i := range keys {
		keys[i] = goodKey{r.Uint32(), r.Uint32()}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i&(len(keys)-1)]
		if _, ok := tab.get(k); !ok {
			tab.put(k, int64(i))
		}
		i++
	}
}

func BenchmarkFifoTableSmall(b *testing.B) {
	const limit = 4096
	tab := newFifoTable[goodKey, int64](limit, nil)
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]goodKey, 1<<14)
	for i := range keys {
		keys[i] = goodKey{r.Uint32(), r.Uint32()}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i&(len(keys)-1)]
		if tab.get(k) == nil {
			*tab.insert(k) = int64(i)
		}
		i++
	}
}
