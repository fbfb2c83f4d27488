// Package hist is a fixed-size log-linear histogram of durations, for
// latency quantiles in bounded memory: each value lands in a bucket whose
// width is 1/32 of its power of two, so quantiles are within ~3%.
package hist

import (
	"math/bits"
	"time"
)

const (
	subBits = 5
	sub     = 1 << subBits
	// Values are in microseconds; 2^40 us is about 12.7 days.
	maxExp  = 40
	buckets = (maxExp + 1) * sub
)

// Histogram counts durations. The zero value is ready to use.
type Histogram struct {
	counts [buckets]uint32
	n      uint64
	min    time.Duration
	max    time.Duration
	sum    time.Duration
}

func index(us uint64) int {
	if us < sub {
		return int(us)
	}
	exp := bits.Len64(us) - 1 // >= subBits
	if exp > maxExp {
		return buckets - 1
	}
	mant := (us >> (exp - subBits)) & (sub - 1)
	return (exp-subBits+1)*sub + int(mant)
}

// lower returns the smallest value (us) of bucket i.
func lower(i int) uint64 {
	if i < sub {
		return uint64(i)
	}
	exp := i/sub + subBits - 1
	mant := uint64(i % sub)
	return (1 << exp) | mant<<(exp-subBits)
}

// Add records one duration; negative durations count as zero.
func (h *Histogram) Add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[index(uint64(d/time.Microsecond))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.n++
	h.sum += d
	if d > h.max {
		h.max = d
	}
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest value recorded (exact).
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is the average value.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Quantile returns the value at quantile q (0..1): the midpoint of the
// bucket holding it, clamped to the smallest and largest values seen.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := min(max(uint64(q*float64(h.n)+0.5), 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += uint64(c)
		if seen >= rank {
			lo := lower(i)
			hi := lo + 1
			if i+1 < buckets {
				hi = lower(i + 1)
			}
			v := time.Duration((lo+hi)/2) * time.Microsecond
			if hi-lo <= 1 {
				v = time.Duration(lo) * time.Microsecond
			}
			// The bucket midpoint, kept within the exact extremes.
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// Merge adds the counts of o into h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if o.n > 0 && (h.n == 0 || o.min < h.min) {
		h.min = o.min
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// Sum is the total of the values recorded (negative ones as zero).
func (h *Histogram) Sum() time.Duration { return h.sum }

// Cumulative gives, for each bound (ascending), how many values were at
// most it, to the buckets' resolution (a bucket counts below a bound when
// it begins below it: within ~3 %).
func (h *Histogram) Cumulative(bounds []time.Duration) []uint64 {
	out := make([]uint64, len(bounds))
	var n uint64
	j := 0
	for i := range h.counts {
		for j < len(bounds) && lower(i) >= uint64(bounds[j]/time.Microsecond) {
			out[j] = n
			j++
		}
		n += uint64(h.counts[i])
	}
	for ; j < len(bounds); j++ {
		out[j] = n
	}
	return out
}
