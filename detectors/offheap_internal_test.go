package detectors

import (
	"reflect"
	"runtime"
	"testing"
	"time"
)

func TestPointerFree(t *testing.T) {
	for _, c := range []struct {
		t    reflect.Type
		want bool
	}{
		{reflect.TypeFor[fifoEnt[dupRecKey, int64]](), true},
		{reflect.TypeFor[fifoEnt[dupCRCKey, dupOrigin]](), true},
		{reflect.TypeFor[fifoEnt[rdKey, rdEntry]](), true},
		{reflect.TypeFor[[4]uint64](), true},
		{reflect.TypeFor[struct{ s string }](), false},
		{reflect.TypeFor[struct {
			a int
			p *int
		}](), false},
		{reflect.TypeFor[[2][]byte](), false},
		{reflect.TypeFor[struct{ a [3]struct{ m map[int]int } }](), false},
	} {
		if got := pointerFree(c.t); got != c.want {
			t.Errorf("pointerFree(%v) = %v", c.t, got)
		}
	}
}

// TestOffHeapTableReleased: a table big enough to be mapped outside the
// heap works as one from make and is unmapped once unreachable.
func TestOffHeapTableReleased(t *testing.T) {
	tab := newFifoTable[goodKey, int64](1<<17, nil)
	for i := range 1 << 18 {
		*tab.insert(goodKey{uint32(i), 1}) = int64(i)
	}
	if p := tab.get(goodKey{1<<18 - 1, 1}); p == nil || *p != 1<<18-1 || tab.get(goodKey{5, 1}) != nil {
		t.Fatal("mapped table lost an entry or kept a forgotten one")
	}
	mem := tab.mem
	b := mapMem(1)
	if b == nil {
		t.Skip("no mapping outside the heap on this system")
	}
	unmapMem(b)
	if mem == nil || len(mem.maps) != 2 {
		t.Fatalf("ring and index not mapped: %+v", mem)
	}
	tab = nil
	for i := 0; i < 100 && !mem.released.Load(); i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if !mem.released.Load() {
		t.Error("the mappings of an unreachable table were not released")
	}
}
