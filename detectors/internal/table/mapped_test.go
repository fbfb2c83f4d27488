package table_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors/internal/table"
	"github.com/kfsniff/kfsniff/internal/memtest"
)

// TestFifoBigMatchesReference: a table large enough to live out of the
// heap (mapped.go) gives the reference's answers through its growths,
// evictions and index sweeps, as the small ones do.
func TestFifoBigMatchesReference(t *testing.T) {
	const limit = 60000 // a ring of 1.4 MB and an index of 2 MB: both mapped
	r := rand.New(rand.NewPCG(3, 9))
	var evicted int
	tab := table.NewFifo(limit, func(goodKey, *int64) { evicted++ })
	want := newRef[goodKey, int64](limit, nil)
	for i := range 300000 {
		k := goodKey{uint32(r.IntN(3 * limit)), 1}
		if r.IntN(3) == 0 {
			got := tab.Get(k)
			w, ok := want.get(k)
			if (got != nil) != ok || (ok && *got != w) {
				t.Fatalf("op %d: Get(%v) differs", i, k)
			}
			continue
		}
		tab.Put(k, int64(i))
		want.put(k, int64(i))
	}
	if tab.Len() != len(want.m) || tab.Evicted() != want.evicted || int64(evicted) != want.evicted {
		t.Fatalf("len %d/%d evicted %d/%d/%d", tab.Len(), len(want.m), tab.Evicted(), evicted, want.evicted)
	}
	want.each(func(k goodKey, v int64) {
		if p := tab.Get(k); p == nil || *p != v {
			t.Fatalf("%v lost", k)
		}
	})
}

// TestFifoOutOfHeap: a full table of pointer-free entries adds next to
// nothing to the heap the collector paces itself on (duplicate-batches'
// 200,000 fingerprints were 14 MiB of it, and as much again of garbage
// let pile up on top); one holding pointers stays in the heap, where the
// collector sees what its values point at.
func TestFifoOutOfHeap(t *testing.T) {
	const limit = 200000
	before := memtest.HeapLive()
	tab := table.NewFifo[goodKey, [4]int64](limit, nil)
	for i := range limit {
		*tab.Insert(goodKey{uint32(i), 2}) = [4]int64{int64(i)}
	}
	if grew := int64(memtest.HeapLive()) - int64(before); grew > 1<<20 {
		t.Errorf("heap grew by %d bytes for a table of %d pointer-free entries, want < 1 MiB", grew, tab.Len())
	}
	if p := tab.Get(goodKey{limit - 1, 2}); p == nil || p[0] != limit-1 {
		t.Fatalf("last entry %v", p)
	}

	strs := table.NewFifo[goodKey, string](limit, nil)
	for i := range limit {
		*strs.Insert(goodKey{uint32(i), 2}) = strconv.Itoa(i)
	}
	runtime.GC()
	for _, i := range []int{0, limit / 2, limit - 1} {
		if p := strs.Get(goodKey{uint32(i), 2}); p == nil || *p != strconv.Itoa(i) {
			t.Fatalf("string %d after a collection: %v", i, p)
		}
	}
	runtime.KeepAlive(tab)
}

// rss is the process's resident memory (Linux).
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// TestFifoResidentAsFilled: a table out of the heap is resident for the
// entries it holds, not for its bound: bulk's 100,000 batches in tables
// of 200,000 and 250,000. Ten tables of 250,000 entries of 40 bytes
// holding 20,000 each write 8 MB of ring and 5 MB of index; reserved
// whole, the indexes alone were 40 MiB.
func TestFifoResidentAsFilled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/statm")
	}
	runtime.GC()
	base := rss(t)
	var tabs []*table.Fifo[goodKey, [4]int64]
	for range 10 {
		tab := table.NewFifo[goodKey, [4]int64](250000, nil)
		for i := range 20000 {
			*tab.Insert(goodKey{uint32(i), 7}) = [4]int64{int64(i)}
		}
		tabs = append(tabs, tab)
	}
	runtime.GC()
	if grew := rss(t) - base; grew > 24<<20 {
		t.Errorf("10 tables of 20,000 entries of 40 bytes: RSS grew by %.1f MiB, want < 24 MiB", float64(grew)/(1<<20))
	}
	for _, tab := range tabs {
		if p := tab.Get(goodKey{19999, 7}); p == nil || p[0] != 19999 {
			t.Fatal("entry lost")
		}
	}
}

// TestFifoMappingsFreed: tables out of the heap give their memory back
// once unreachable: a rule is made per run and per test case, and 20
// tables of 7 MiB written each that stayed mapped would hold 140 MiB.
func TestFifoMappingsFreed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/statm")
	}
	fill := func() {
		tab := table.NewFifo[goodKey, [6]int64](250000, nil)
		for i := range 60000 {
			*tab.Insert(goodKey{uint32(i), 5}) = [6]int64{int64(i)}
		}
	}
	fill()
	runtime.GC()
	runtime.GC()
	base := rss(t)
	for range 20 {
		fill()
		runtime.GC()
	}
	runtime.GC()
	runtime.GC()
	if grew := rss(t) - base; grew > 64<<20 {
		t.Errorf("RSS grew by %s over 20 tables made and dropped, want < 64 MiB", fmt.Sprintf("%.0f MiB", float64(grew)/(1<<20)))
	}
}

// TestFifoStalePointerDoesNotFault: a value's pointer taken before the
// table grows out of its mapped ring is no longer the table's (the
// contract: valid until the next insertion), but reading it must not
// fault: a fault outside Go's heap is a fatal error that no recover
// catches, so one rule's slip would end the whole run. The replaced ring
// is released, not unmapped, while the table lives.
func TestFifoStalePointerDoesNotFault(t *testing.T) {
	const limit = 1 << 21 // above fifoSizedOnce: mapped rings replaced as they double
	tab := table.NewFifo[goodKey, int64](limit, nil)
	var stale []*int64
	for i := range limit {
		p := tab.Insert(goodKey{uint32(i), 1})
		*p = int64(i)
		if i%50000 == 0 {
			stale = append(stale, p)
		}
	}
	var sum int64
	for _, p := range stale {
		sum += *p // zeros or old values, never a fault
	}
	if got := tab.Get(goodKey{uint32(limit - 1), 1}); got == nil || *got != limit-1 {
		t.Fatalf("the last entry is lost: %v", got)
	}
	t.Logf("stale pointers read %d", sum)
}

// TestFifoGrowingOutOfHeap: a table growing towards its bound keeps its
// ring and index out of the heap at every size, not only once they are
// big: with the first ring and the indexes of up to 512 KiB in the heap,
// bulk's three copy tables held up to 1.9 MB of its 20 MB live heap, which
// the collector's pacing (GOGC 100) doubled in the peak RSS.
func TestFifoGrowingOutOfHeap(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("tables are mapped out of the heap on unix only")
	}
	for _, n := range []int{3000, 30000, 60000} {
		before := memtest.HeapLive()
		tab := table.NewFifo[goodKey, [4]int64](250000, nil)
		for i := range n {
			*tab.Insert(goodKey{uint32(i), 3}) = [4]int64{int64(i)}
		}
		if grew := int64(memtest.HeapLive()) - int64(before); grew > 32<<10 {
			t.Errorf("a table of %d entries of 40 bytes: heap grew by %d KiB, want < 32 KiB", n, grew>>10)
		}
		if p := tab.Get(goodKey{uint32(n - 1), 3}); p == nil || p[0] != int64(n-1) {
			t.Fatalf("last entry of %d: %v", n, p)
		}
		runtime.KeepAlive(tab)
	}
}
