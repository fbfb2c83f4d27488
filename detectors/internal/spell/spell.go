// Package spell measures how long something clients need was failing: a
// partition a producer cannot write, a topic a consumer cannot fetch. A
// spell runs from the first failure to the success that ends it; what
// clients felt is the longest spell, or the one still running at the end
// (detectors.Grade's duration and ongoing).
package spell

import "time"

// Spell is the runs of failures of one thing.
type Spell struct {
	// First is when the current run began (the last run, once healed),
	// Last its latest failure.
	First, Last time.Time
	// Open is true while a run has not been ended by a success.
	Open bool
	// Longest is the longest run that ended, from its first failure to
	// the success that ended it.
	Longest time.Duration
	// Runs counts the runs, N the failures in all.
	Runs int
	N    int64
}

// Fail counts a failure at t, starting a run if none is open.
func (s *Spell) Fail(t time.Time) {
	if !s.Open {
		s.Open, s.First = true, t
		s.Runs++
	}
	s.N++
	s.Last = t
}

// Heal ends the open run, if any, with a success at t, and reports
// whether there was one.
func (s *Spell) Heal(t time.Time) bool {
	if !s.Open {
		return false
	}
	s.Open = false
	s.Longest = max(s.Longest, t.Sub(s.First))
	return true
}

// Held is how long the thing was held up: the longest run that ended, or
// the open one until end if longer; ongoing if a run is still open.
func (s *Spell) Held(end time.Time) (d time.Duration, ongoing bool) {
	d = s.Longest
	if s.Open {
		d = max(d, end.Sub(s.First))
	}
	return d, s.Open
}

// Worst combines spells: the longest time held, ongoing if any is.
func Worst(d time.Duration, ongoing bool, d2 time.Duration, ongoing2 bool) (time.Duration, bool) {
	return max(d, d2), ongoing || ongoing2
}
