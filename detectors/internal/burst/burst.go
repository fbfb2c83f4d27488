// Package burst finds bursts in a stream of events: stretches where at
// least N events fall within a sliding window of a given span (Metadata
// requests of one client, new connections to one broker). It keeps the last
// N times in a ring grown to N with the first events (most keys never see
// N: a client that asks for Metadata a few times holds a few), so that
// counting an event then costs no allocation, and reports the longest burst, how many there were and the
// busiest second.
package burst

import (
	"slices"
	"time"

	"github.com/kfsniff/kfsniff/internal/text"
)

// Episode is one burst: from the first event of the first full window to
// the last event that kept the window full.
type Episode struct {
	Start, End time.Time
	// Events counts the events from Start to End.
	Events int
}

// Duration is the episode's length.
func (e Episode) Duration() time.Duration { return e.End.Sub(e.Start) }

// Rate is the episode's events per second (text.Rate).
func (e Episode) Rate() float64 { return text.Rate(int64(e.Events), e.Duration()) }

// Window detects bursts of at least n events within span. The zero value
// is not usable: make one with New.
type Window struct {
	ring  []time.Time // the last count times, grown up to n
	head  int         // next slot to write, once the ring is full
	count int
	n     int
	span  time.Duration

	in  bool
	cur Episode
	// best is the longest finished episode (most events on a tie).
	best     Episode
	episodes int

	sec     time.Time // the second being counted
	secN    int
	peakN   int
	peakSec time.Time
	total   int

	// pend are the events held back to be counted in time order
	// (Reorder), earliest first; reorder is how many may wait.
	pend    []pending
	reorder int
	// forget: let go of the times held once the newest is more than
	// span old at an event (Forget).
	forget bool
}

// pending is k events at t not counted yet.
type pending struct {
	t time.Time
	k int
}

// MaxN bounds n, and so the ring's memory.
const MaxN = 1 << 16

// New makes a window finding bursts of n (at least 2, at most MaxN) events
// within span.
func New(n int, span time.Duration) *Window {
	n = min(max(n, 2), MaxN)
	return &Window{n: n, span: span}
}

// Reorder makes the window count events in time order when they come out
// of it by at most k events: each waits until k later ones came (or the
// result is asked), then the earliest are counted. A rule whose events
// are told late (a connection opened at its first packet, told when it
// is recognised as Kafka; SYNs never answered, told at the capture's
// end) then finds the bursts it would find in time order, as a
// correlator reading shipped records in time order does.
func (w *Window) Reorder(k int) { w.reorder = max(k, 0) }

// Forget makes the window let go of the times it holds when an event
// comes more than span after the newest of them: in time order none of
// them can be in a window with it or a later one, so the bursts found
// are the same, but a key whose events come slower than n a span (a
// client refreshing every 20 s) no longer fills its ring to n over the
// hours (1,000 of them held 1.2 MB after 17 minutes of the soak:
// TestForgetLevels). An event told more than span before the newest
// (out of time order by that much) may then miss a burst the held
// times would have made: live rules only (Pass.KeepClosed), whose
// events come in time order.
func (w *Window) Forget() { w.forget = true }

// forgetOld empties the ring (keeping a small one) if the newest time in
// it is more than span before t, there being no episode under way.
func (w *Window) forgetOld(t time.Time) {
	if w.count == 0 || w.in {
		return
	}
	newest := w.ring[len(w.ring)-1]
	if w.count == w.n {
		newest = w.ring[(w.head+w.n-1)%w.n]
	}
	if t.Sub(newest) <= w.span {
		return
	}
	w.count, w.head = 0, 0
	if cap(w.ring) > forgetKeep {
		w.ring = nil
	} else {
		w.ring = w.ring[:0]
	}
}

// forgetKeep is the largest ring Forget keeps for reuse.
const forgetKeep = 8

// AddN counts k events at t, as k calls of Add(t) would (held back in
// time order first if Reorder was set).
func (w *Window) AddN(t time.Time, k int) {
	if k <= 0 {
		return
	}
	if w.reorder == 0 {
		w.addN(t, k)
		return
	}
	i := len(w.pend)
	for i > 0 && w.pend[i-1].t.After(t) {
		i--
	}
	w.pend = slices.Insert(w.pend, i, pending{t, k})
	if len(w.pend) > w.reorder {
		p := w.pend[0]
		w.pend = slices.Delete(w.pend, 0, 1)
		w.addN(p.t, p.k)
	}
}

// settled is the window with every event held back counted: w itself if
// none is, else a copy (the result is asked without changing w).
func (w *Window) settled() *Window {
	if len(w.pend) == 0 {
		return w
	}
	c := *w
	c.ring = append([]time.Time(nil), w.ring...)
	c.pend = nil
	for _, p := range w.pend {
		c.addN(p.t, p.k)
	}
	return &c
}

// Add counts an event at t (held back in time order first if Reorder
// was set; without it, times must not go backwards by much).
func (w *Window) Add(t time.Time) { w.AddN(t, 1) }

// stepped, when set (by a test only), is called at each event add
// counts one by one: TestAddNIsAdds counts the steps AddN takes, which
// no load on the machine changes.
var stepped func()

func (w *Window) add(t time.Time) {
	if stepped != nil {
		stepped()
	}
	w.total++
	if s := t.Truncate(time.Second); s.After(w.sec) {
		w.sec, w.secN = s, 1
	} else {
		w.secN++
	}
	if w.secN > w.peakN {
		w.peakN, w.peakSec = w.secN, w.sec
	}
	if w.forget {
		w.forgetOld(t)
	}
	n := w.n
	if w.count < n {
		if len(w.ring) == cap(w.ring) {
			w.ring = append(make([]time.Time, 0, min(max(2*cap(w.ring), 4), n)), w.ring...)
		}
		w.ring = append(w.ring, t)
		w.count++
		if w.count < n {
			return
		}
		// Full: the next slot to write holds the oldest, as below.
	} else {
		w.ring[w.head] = t
		w.head = (w.head + 1) % n
	}
	oldest := w.ring[w.head] // the n-th most recent, t included
	if t.Sub(oldest) <= w.span {
		if !w.in {
			w.in = true
			w.cur = Episode{Start: oldest, End: t, Events: n}
			return
		}
		w.cur.End = t
		w.cur.Events++
		return
	}
	w.closeIfOver()
}

// addN counts k events at t, as k calls of add(t) would, in time bounded
// by the window's n whatever k (a shipped record may claim 2^31 attempts):
// once n events at t fill the ring, each further one only extends the
// episode under way and the counts.
func (w *Window) addN(t time.Time, k int) {
	loop := min(k, w.n+1)
	for range loop {
		w.add(t)
	}
	rest := k - loop
	if rest <= 0 {
		return
	}
	// The ring holds n times t, the last Add found its oldest within
	// span (0 <= span) or not (span < 0): every further Add does the same.
	w.total += rest
	w.secN += rest
	if w.secN > w.peakN {
		w.peakN, w.peakSec = w.secN, w.sec
	}
	w.head = (w.head + rest) % w.n
	if w.in {
		w.cur.End = t
		w.cur.Events += rest
	}
}

// closeIfOver ends the episode under way: the window no longer holds n
// events.
func (w *Window) closeIfOver() {
	if !w.in {
		return
	}
	w.in = false
	w.episodes++
	if better(w.cur, w.best) {
		w.best = w.cur
	}
}

func better(a, b Episode) bool {
	if b.Events == 0 {
		return a.Events > 0
	}
	if da, db := a.Duration(), b.Duration(); da != db {
		return da > db
	}
	return a.Events > b.Events
}

// Result is what the window found, as of end (the capture's end): the
// longest burst, whether a burst was still under way at end (its last
// event within span of end), and how many bursts there were. It changes
// nothing.
func (w *Window) Result(end time.Time) (best Episode, ongoing bool, episodes int) {
	w = w.settled()
	best, episodes = w.best, w.episodes
	if w.in {
		episodes++
		if better(w.cur, best) {
			best = w.cur
		}
		ongoing = end.Sub(w.cur.End) < w.span
	}
	return best, ongoing, episodes
}

// Peak is the most events in one second of the clock and that second.
func (w *Window) Peak() (int, time.Time) {
	w = w.settled()
	return w.peakN, w.peakSec
}

// Total is how many events were counted.
func (w *Window) Total() int { return w.settled().total }
