package burst

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestWindow(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n        int
		span     time.Duration
		events   []int // ms
		end      int
		want     Episode
		ongoing  bool
		episodes int
	}{
		{name: "n-1 events in the span: no burst", n: 5, span: time.Second, events: []int{0, 100, 200, 300, 1200, 1300, 1400, 1500}, end: 5000},
		{name: "n events exactly one span apart: a burst", n: 3, span: time.Second, events: []int{0, 500, 1000}, end: 5000,
			want: Episode{Start: at(0), End: at(1000), Events: 3}, episodes: 1},
		{name: "n events one millisecond more than a span apart: none", n: 3, span: time.Second, events: []int{0, 500, 1001}, end: 5000},
		{name: "a burst that goes on while the window stays full, then stops", n: 3, span: time.Second,
			events: []int{0, 100, 200, 300, 400, 3000}, end: 3100,
			want: Episode{Start: at(0), End: at(400), Events: 5}, episodes: 1},
		{name: "still bursting at the end", n: 3, span: time.Second, events: []int{0, 100, 200, 300}, end: 900,
			want: Episode{Start: at(0), End: at(300), Events: 4}, ongoing: true, episodes: 1},
		{name: "the longest of two bursts", n: 2, span: 100 * time.Millisecond,
			events: []int{0, 50, 1000, 1050, 1100, 1150, 5000}, end: 9000,
			want: Episode{Start: at(1000), End: at(1150), Events: 4}, episodes: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := New(tc.n, tc.span)
			for _, ms := range tc.events {
				w.Add(at(ms))
			}
			best, ongoing, episodes := w.Result(at(tc.end))
			if best != tc.want || ongoing != tc.ongoing || episodes != tc.episodes {
				t.Errorf("got %+v ongoing %v episodes %d, want %+v ongoing %v episodes %d", best, ongoing, episodes, tc.want, tc.ongoing, tc.episodes)
			}
			if w.Total() != len(tc.events) {
				t.Errorf("total %d, want %d", w.Total(), len(tc.events))
			}
		})
	}
}

func TestPeakAndNoAllocation(t *testing.T) {
	w := New(4, time.Second)
	for i := range 10 {
		w.Add(at(2000 + i*50))
	}
	w.Add(at(3100))
	if n, s := w.Peak(); n != 10 || !s.Equal(at(2000)) {
		t.Errorf("peak %d at %v, want 10 at %v", n, s, at(2000))
	}
	i := 0
	if a := testing.AllocsPerRun(100, func() { w.Add(at(4000 + i)); i++ }); a != 0 {
		t.Errorf("%v allocations per event", a)
	}
}

// TestWindowMatchesBruteForce: the window's bursts are those found by
// looking back n-1 events from every event, for windows whose ring grows
// through several sizes before it is full, on random event times.
func TestWindowMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	for _, n := range []int{2, 7, 50, 100} {
		for seed := range 20 {
			span := time.Second
			var ts []time.Time
			ms := 0
			for range r.IntN(400) {
				ms += r.IntN(60) // bursts and gaps, by chance
				if r.IntN(50) == 0 {
					ms += 3000
				}
				ts = append(ts, at(ms))
			}
			end := at(ms + r.IntN(2000))
			w := New(n, span)
			for _, x := range ts {
				w.Add(x)
			}
			var want Episode
			var cur Episode
			episodes, in := 0, false
			for i := n - 1; i < len(ts); i++ {
				if ts[i].Sub(ts[i-n+1]) <= span {
					if !in {
						in, cur = true, Episode{Start: ts[i-n+1], End: ts[i], Events: n}
						episodes++
					} else {
						cur.End, cur.Events = ts[i], cur.Events+1
					}
					if better(cur, want) {
						want = cur
					}
					continue
				}
				in = false
			}
			ongoing := in && end.Sub(cur.End) < span
			best, gotOngoing, gotEpisodes := w.Result(end)
			if best != want || gotOngoing != ongoing || gotEpisodes != episodes {
				t.Fatalf("n %d seed %d: got %+v ongoing %v episodes %d, want %+v ongoing %v episodes %d",
					n, seed, best, gotOngoing, gotEpisodes, want, ongoing, episodes)
			}
		}
	}
}

// TestAddNIsAdds: AddN(t, k) leaves the window as k calls of Add(t) do,
// for counts below, at and past the ring's n, times going backwards and
// spans of zero; and AddN of 2^31-1 events (what one forged connection
// record may claim) counts at most n+1 of them one by one, whatever k: the
// steps are counted, not timed.
func TestAddNIsAdds(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 1))
	for _, n := range []int{2, 3, 7, 50} {
		for _, span := range []time.Duration{0, 10 * time.Millisecond, time.Second} {
			for seed := range 30 {
				one, bulk := New(n, span), New(n, span)
				ms := 0
				for range r.IntN(40) {
					ms += r.IntN(400) - 50 // backwards now and then
					k := r.IntN(3 * n)
					for range k {
						one.Add(at(ms))
					}
					bulk.AddN(at(ms), k)
					if !reflect.DeepEqual(one, bulk) {
						t.Fatalf("n %d span %v seed %d: after %d events at %d ms\n Add: %+v\nAddN: %+v", n, span, seed, k, ms, one, bulk)
					}
				}
			}
		}
	}

	steps, most := 0, MaxN+1
	stepped = func() {
		if steps++; steps > most {
			t.Fatalf("AddN of 2^31-1 events counted more than %d of them one by one", most)
		}
	}
	defer func() { stepped = nil }()
	w := New(MaxN, time.Second)
	for _, ms := range []int{0, 10} {
		steps = 0
		w.AddN(at(ms), math.MaxInt32)
		if ms == 0 && steps != most {
			t.Errorf("AddN of 2^31-1 events into an empty window of %d: %d steps, want %d (n to fill the ring, one to start the burst)", MaxN, steps, most)
		}
	}
	if w.Total() != 2*math.MaxInt32 {
		t.Errorf("total %d, want %d", w.Total(), 2*math.MaxInt32)
	}
	if best, _, _ := w.Result(at(10)); best.Events != 2*math.MaxInt32 {
		t.Errorf("burst of %d events, want %d", best.Events, 2*math.MaxInt32)
	}
}

// TestReorder: events told out of time order (an opening told when its
// connection is recognised, SYNs never answered told at the end) give,
// with Reorder, what they give in time order; a result asked meanwhile
// changes nothing.
func TestReorder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 200 {
		var ms []int
		for range 5 + rng.IntN(60) {
			ms = append(ms, rng.IntN(20000))
		}
		sorted := append([]int(nil), ms...)
		slices.Sort(sorted)
		want := New(5, 2*time.Second)
		for _, m := range sorted {
			want.Add(at(m))
		}
		got := New(5, 2*time.Second)
		got.Reorder(len(ms))
		for i, m := range ms {
			got.AddN(at(m), 1)
			if i == len(ms)/2 {
				got.Result(at(30000)) // asked meanwhile
				got.Peak()
			}
		}
		wb, wo, we := want.Result(at(30000))
		gb, gob, ge := got.Result(at(30000))
		wp, wps := want.Peak()
		gp, gps := got.Peak()
		if wb != gb || wo != gob || we != ge || wp != gp || !wps.Equal(gps) || want.Total() != got.Total() {
			t.Fatalf("trial %d %v: reordered %v %v %d peak %d %v total %d, in time order %v %v %d peak %d %v total %d",
				trial, ms, gb, gob, ge, gp, gps, got.Total(), wb, wo, we, wp, wps, want.Total())
		}
	}
	// Without Reorder, an event told 12 s late made a burst of negative
	// length (kraft-fenced-while-alive's "in -12.0 s").
	w := New(3, 10*time.Second)
	for _, m := range []int{13000, 13500, 14000} {
		w.Add(at(m))
	}
	w.Add(at(1000))
	if b, _, _ := w.Result(at(20000)); b.Duration() >= 0 {
		t.Fatalf("without Reorder: %v, want the negative length this test documents", b)
	}
}

// TestForgetLevels: a window told to Forget finds the same bursts as one
// that is not, on random event times in order (bursts and gaps), and a
// key whose events come slower than n a span (a client refreshing every
// 20 s, against 50 in 10 s) keeps a ring of at most forgetKeep, where
// one not told fills it to n.
func TestForgetLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	for _, n := range []int{2, 7, 50} {
		for seed := range 30 {
			a, b := New(n, time.Second), New(n, time.Second)
			b.Forget()
			ms := 0
			for range r.IntN(600) {
				ms += r.IntN(80)
				if r.IntN(40) == 0 {
					ms += 1000 + r.IntN(3000)
				}
				k := 1 + r.IntN(3)
				a.AddN(at(ms), k)
				b.AddN(at(ms), k)
			}
			end := at(ms + r.IntN(2000))
			ba, oa, ea := a.Result(end)
			bb, ob, eb := b.Result(end)
			pa, sa := a.Peak()
			pb, sb := b.Peak()
			if ba != bb || oa != ob || ea != eb || pa != pb || !sa.Equal(sb) || a.Total() != b.Total() {
				t.Fatalf("n %d seed %d: forgetting %+v %v %d peak %d, not %+v %v %d peak %d", n, seed, bb, ob, eb, pb, ba, oa, ea, pa)
			}
		}
	}
	slow, kept := New(50, 10*time.Second), New(50, 10*time.Second)
	slow.Forget()
	for i := range 200 {
		slow.Add(at(i * 20000))
		kept.Add(at(i * 20000))
	}
	if cap(slow.ring) > forgetKeep || cap(kept.ring) != 50 {
		t.Errorf("rings of %d and %d times, want at most %d forgetting and 50 not", cap(slow.ring), cap(kept.ring), forgetKeep)
	}
}
