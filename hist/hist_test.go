package hist

import (
	"testing"
	"time"
)

func TestQuantiles(t *testing.T) {
	cases := []struct {
		name   string
		values []time.Duration
		q      float64
		want   time.Duration
		tol    float64 // relative
	}{
		{"single value is exact", []time.Duration{16107 * time.Microsecond}, 0.5, 16107 * time.Microsecond, 0},
		{"small values exact", []time.Duration{1 * time.Microsecond, 2 * time.Microsecond, 3 * time.Microsecond}, 0.5, 2 * time.Microsecond, 0},
		{"p99 of 1..1000ms", ramp(1000, time.Millisecond), 0.99, 990 * time.Millisecond, 0.035},
		{"p50 of 1..1000ms", ramp(1000, time.Millisecond), 0.5, 500 * time.Millisecond, 0.035},
		{"max clamps", []time.Duration{time.Hour}, 1, time.Hour, 0},
		{"negative counts as zero", []time.Duration{-5}, 0.5, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h Histogram
			for _, v := range tc.values {
				h.Add(v)
			}
			got := h.Quantile(tc.q)
			diff := float64(got - tc.want)
			if diff < 0 {
				diff = -diff
			}
			if diff > tc.tol*float64(tc.want) {
				t.Errorf("Quantile(%v) = %v, want %v ±%.1f%%", tc.q, got, tc.want, tc.tol*100)
			}
		})
	}
}

func ramp(n int, unit time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * unit
	}
	return out
}

func TestMerge(t *testing.T) {
	var a, b, all Histogram
	for i, v := range ramp(200, time.Millisecond) {
		all.Add(v)
		if i%2 == 0 {
			a.Add(v)
		} else {
			b.Add(v)
		}
	}
	a.Merge(&b)
	if a.Count() != all.Count() || a.Max() != all.Max() || a.Quantile(0.5) != all.Quantile(0.5) || a.Mean() != all.Mean() {
		t.Errorf("merged %d/%v/%v, want %d/%v/%v", a.Count(), a.Max(), a.Quantile(0.5), all.Count(), all.Max(), all.Quantile(0.5))
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	var h Histogram
	if n := testing.AllocsPerRun(1000, func() { h.Add(1234 * time.Microsecond) }); n != 0 {
		t.Errorf("Add allocates %v times", n)
	}
}

// TestCumulative: counts at bounds as a Prometheus histogram's buckets,
// within the buckets' resolution, and the sum.
func TestCumulative(t *testing.T) {
	var h Histogram
	for _, d := range ramp(1000, time.Millisecond) { // 1..1000 ms
		h.Add(d)
	}
	got := h.Cumulative([]time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond, time.Hour})
	want := []uint64{0, 10, 100, 500, 1000}
	for i := range want {
		if d := int64(got[i]) - int64(want[i]); d < -int64(want[i])/30-1 || d > int64(want[i])/30+1 {
			t.Errorf("bound %d: %d values at most, want %d (within 3 %%)", i, got[i], want[i])
		}
	}
	if h.Sum() != 500500*time.Millisecond {
		t.Errorf("sum %s", h.Sum())
	}
}
