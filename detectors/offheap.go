package detectors

import (
	"reflect"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// The fingerprint tables of duplicate-batches and replica-divergence are
// the largest memory kfsniff holds (about 35 MB with the default limits)
// and hold no pointer. Kept in the Go heap they would count towards the
// collector's goal, which lets garbage grow to as much again before a
// collection: twice their size in peak RSS. Where the system allows,
// they are mapped outside the heap instead, and unmapped once their table
// is unreachable. Mapped memory is zero and not resident until written,
// like fresh heap memory.

// minOffHeap is the smallest allocation worth a mapping of its own.
const minOffHeap = 1 << 20

// offHeap holds a table's mappings, released together when the table is
// collected.
type offHeap struct {
	maps     [][]byte
	released atomic.Bool // the table was collected and its mappings unmapped
}

// tableMem returns n zero values of T, mapped outside the heap when T holds
// no pointer (the collector must see every pointer it could have to
// follow), the size is worth it and the system can; else from make. The
// mapping is recorded in *h, created on first use with a cleanup on owner.
func tableMem[T any, O any](n int, owner *O, h **offHeap) []T {
	size := uintptr(n) * unsafe.Sizeof(*new(T))
	if size < minOffHeap || !pointerFree(reflect.TypeFor[T]()) {
		return make([]T, n)
	}
	b := mapMem(size)
	if b == nil {
		return make([]T, n)
	}
	if *h == nil {
		*h = &offHeap{}
		runtime.AddCleanup(owner, func(m *offHeap) {
			for _, b := range m.maps {
				unmapMem(b)
			}
			m.released.Store(true)
		}, *h)
	}
	(*h).maps = append((*h).maps, b)
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// release unmaps memory tableMem returned, no longer used, at once.
func (h *offHeap) release(s unsafe.Pointer) {
	if h == nil {
		return
	}
	for i, b := range h.maps {
		if unsafe.Pointer(unsafe.SliceData(b)) == s {
			unmapMem(b)
			h.maps = append(h.maps[:i], h.maps[i+1:]...)
			return
		}
	}
}

// pointerFree reports whether values of t hold no pointer.
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
