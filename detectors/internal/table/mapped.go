package table

import (
	"reflect"
	"runtime"
	"unsafe"
)

// The largest tables (duplicate-batches' and replica-divergence's
// fingerprints, up to 34 MiB at their default bounds) live outside Go's
// heap, in memory mapped from the operating system: they hold no
// pointers, so the garbage collector has nothing to find in them, but in
// the heap they counted as live memory and the pacer (GOGC 100) let as
// much garbage again pile up on top of them before each collection. Out
// of the heap they cost their size, and only the pages written: a ring
// reserved for its bound is resident only as far as it was filled (the
// zero pages come from the kernel, not from clearing). ARCHITECTURE.md,
// "Tables out of the heap".

// hugePage is the size of a transparent huge page (x86-64, arm64 with
// 4 KiB pages).
const hugePage = 2 << 20

// mappedMin is the smallest slice put out of the heap: below it a
// mapping's page rounding and system calls cost more than the heap's
// pacing does. It was 1 MiB: a table growing to its bound then held its
// first ring (4,096 entries) and its indexes of 64 to 512 KiB in the
// heap, up to 1.9 MB of bulk's 20 MB live heap for the first 65,536
// batches (three tables), which the collector's pacing doubled in the
// peak RSS (TestFifoGrowingOutOfHeap). Now a copy rule's table is out of
// the heap from its first insertion; a small capture's, which never grows
// past its first ring and index, is resident only for the pages written,
// where the heap cleared all of them.
const mappedMin = 64 << 10

// mapping is what a table has mapped, unmapped when the table is
// unreachable (runtime.AddCleanup). A ring or index the table grows out
// of is not unmapped then but retired: its pages are given back to the
// system (release) and the addresses stay mapped until the table goes.
// A pointer into a replaced ring, which the table's contract already
// forbids using after the next insertion, then reads zeros (or stale
// values) instead of faulting: a fault outside Go's heap is a fatal
// error no recover catches, and kfsniff must never crash.
type mapping struct {
	ents, idx []byte
	retired   [][]byte
}

func (m *mapping) free() {
	unmap(m.ents)
	unmap(m.idx)
	for _, b := range m.retired {
		unmap(b)
	}
	m.ents, m.idx, m.retired = nil, nil, nil
}

// retire releases b's pages and keeps its addresses until free.
func (m *mapping) retire(b []byte) {
	if b != nil {
		release(b)
		m.retired = append(m.retired, b)
	}
}

// makeSlice returns a zeroed slice of n Ts of capacity c and, if it is
// out of the heap, its mapping (nil: made by make), in huge pages from
// byte hugeFrom on (mapBytes). T must hold no pointer (pointerFree): the
// collector does not see into a mapping.
func makeSlice[T any](n, c int, mapped bool, hugeFrom int) ([]T, []byte) {
	size := uintptr(c) * unsafe.Sizeof(*new(T))
	if !mapped || size < mappedMin {
		return make([]T, n, c), nil
	}
	b := mapBytes(int(size), hugeFrom)
	if b == nil {
		return make([]T, n, c), nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), c)[:n], b
}

// adopt records a new mapping of the table's ring or index, retiring the
// one it replaces (which the table no longer reads: a value's pointer is
// valid until the next insertion), and has the table's mappings unmapped
// once it is unreachable.
func (t *Fifo[K, V]) adopt(ents, idx []byte, replacedEnts, replacedIdx bool) {
	if ents == nil && idx == nil && t.mem == nil {
		return
	}
	if t.mem == nil {
		t.mem = &mapping{}
		runtime.AddCleanup(t, (*mapping).free, t.mem)
	}
	if replacedEnts {
		t.mem.retire(t.mem.ents)
		t.mem.ents = ents
	}
	if replacedIdx {
		t.mem.retire(t.mem.idx)
		t.mem.idx = idx
	}
}

// pointerFree reports whether values of type t hold no pointer, so that
// they may live where the collector does not look.
func pointerFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return t.Len() == 0 || pointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !pointerFree(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}
