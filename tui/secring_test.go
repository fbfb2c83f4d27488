package tui

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// fixedRing is the secRing of size slots allocated at once: what a
// secRing must hold whatever its slots.
type fixedRing struct{ slots []secSlot }

func (r *fixedRing) add(s int64, size int, isErr bool) {
	if r.slots == nil {
		r.slots = emptySlots(size)
	}
	sl := &r.slots[uint64(s)%uint64(size)]
	if sl.sec != s {
		if s < sl.sec {
			return
		}
		*sl = secSlot{sec: s}
	}
	if isErr {
		sl.err++
	} else {
		sl.req++
	}
}

// TestSecRingSmall: a ring holds what one of all its slots held, over
// counts going forward with late ones among them and jumps past the
// window; and a connection that lived a second has a few slots, not 300.
func TestSecRingSmall(t *testing.T) {
	const size = 300
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 50 {
		var r secRing
		var f fixedRing
		s := int64(1_700_000_000 + run)
		for range 3000 {
			switch k := rng.IntN(100); {
			case k < 60:
			case k < 85:
				s++
			case k < 95:
				s += int64(rng.IntN(20))
			case k < 98:
				s += int64(rng.IntN(700)) // past the window
			}
			at := s - int64(rng.IntN(3)) // late now and then
			if rng.IntN(20) == 0 {
				at = s - int64(rng.IntN(400))
			}
			isErr := rng.IntN(7) == 0
			r.add(time.Unix(at, 0), size, isErr)
			f.add(at, size, isErr)
			if rng.IntN(50) == 0 {
				first := s - int64(rng.IntN(size))
				n := int(s - first + 1)
				got := r.series(first, n)
				want := (*secRing)(&f).series(first, n)
				if !slices.Equal(got.Requests, want.Requests) || !slices.Equal(got.Errors, want.Errors) {
					t.Fatalf("run %d at %d: series from %d differ:\n got %v %v\nwant %v %v", run, s, first, got.Requests, got.Errors, want.Requests, want.Errors)
				}
			}
		}
	}
	var short secRing
	at := time.Unix(1_700_000_000, 0)
	for i := range 20 {
		short.add(at.Add(time.Duration(i)*50*time.Millisecond), size, false)
	}
	if len(short.slots) > secRingFirst {
		t.Errorf("a connection of one second has %d slots, want at most %d", len(short.slots), secRingFirst)
	}
}
