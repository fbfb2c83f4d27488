package copies

import (
	"iter"
	"math/bits"
	"slices"
	"sort"
	"time"
)

// Bitset is a set of small non-negative integers (source indices).
type Bitset []uint64

// Add puts i in the set and reports whether it was not there.
func (b *Bitset) Add(i uint32) bool {
	w := int(i >> 6)
	if w >= len(*b) {
		*b = append(*b, make([]uint64, w+1-len(*b))...)
	}
	m := uint64(1) << (i & 63)
	if (*b)[w]&m != 0 {
		return false
	}
	(*b)[w] |= m
	return true
}

// All yields the members in increasing order.
func (b Bitset) All() iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		for w, x := range b {
			for x != 0 {
				i := uint32(w)<<6 | uint32(bits.TrailingZeros64(x))
				if !yield(i) {
					return
				}
				x &= x - 1
			}
		}
	}
}

// Ranges is a set of offsets kept as sorted, disjoint, non-adjacent
// ranges: the offsets of a partition whose batches have been seen. A log
// read in order is one range whatever its length. At most MaxRanges are
// kept; the lowest are forgotten first (Dropped counts them).
type Ranges struct {
	r       []offsetRange
	Dropped int64
}

type offsetRange struct{ lo, hi int64 }

// MaxRanges bounds a partition's ranges.
const MaxRanges = 4096

// Contains reports whether x has been seen.
func (s *Ranges) Contains(x int64) bool {
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i].hi >= x })
	return i < len(s.r) && s.r[i].lo <= x
}

// Add adds the offsets lo to hi.
func (s *Ranges) Add(lo, hi int64) {
	if hi < lo {
		hi = lo
	}
	// First range that ends at or after lo-1 (could merge with lo).
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i].hi >= lo-1 })
	j := i
	for j < len(s.r) && s.r[j].lo <= hi+1 {
		lo, hi = min(lo, s.r[j].lo), max(hi, s.r[j].hi)
		j++
	}
	if i == j {
		s.r = slices.Insert(s.r, i, offsetRange{lo, hi})
	} else {
		s.r[i] = offsetRange{lo, hi}
		s.r = append(s.r[:i+1], s.r[j:]...)
	}
	if len(s.r) > MaxRanges {
		s.r = s.r[1:]
		s.Dropped++
	}
}

// Len is the number of ranges.
func (s *Ranges) Len() int { return len(s.r) }

// Span is the time from a first to a last event; zero times are unset.
type Span struct{ First, Last time.Time }

// Seen records an event in the order events are seen: the first stays,
// the last is t.
func (s *Span) Seen(t time.Time) {
	if s.First.IsZero() {
		s.First = t
	}
	s.Last = t
}

// Add widens the span to t.
func (s *Span) Add(t time.Time) { s.Join(Span{t, t}) }

// Join widens the span to cover o: the earliest first, the latest last.
func (s *Span) Join(o Span) {
	if s.First.IsZero() || (!o.First.IsZero() && o.First.Before(s.First)) {
		s.First = o.First
	}
	if o.Last.After(s.Last) {
		s.Last = o.Last
	}
}
