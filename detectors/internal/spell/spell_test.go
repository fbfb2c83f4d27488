package spell

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// TestSpell: what a client felt is the longest run from a failure to the
// success after it, or the run still open at the end, counted to the end.
func TestSpell(t *testing.T) {
	var s Spell
	if d, on := s.Held(at(5000)); d != 0 || on {
		t.Errorf("no failure: held %v ongoing %v", d, on)
	}
	s.Fail(at(100))
	s.Fail(at(600))
	if s.Heal(at(1100)) != true || s.Heal(at(1200)) != false {
		t.Error("Heal must end the open run once")
	}
	s.Fail(at(2000))
	s.Heal(at(2300))
	if d, on := s.Held(at(9000)); d != time.Second || on {
		t.Errorf("healed twice: held %v ongoing %v, want the longest run, 1s, not ongoing", d, on)
	}
	s.Fail(at(4000))
	s.Fail(at(4500))
	if d, on := s.Held(at(9000)); d != 5*time.Second || !on {
		t.Errorf("open at the end: held %v ongoing %v, want 5s to the end, ongoing", d, on)
	}
	if s.Runs != 3 || s.N != 5 || !s.First.Equal(at(4000)) || !s.Last.Equal(at(4500)) {
		t.Errorf("runs %d failures %d first %v last %v", s.Runs, s.N, s.First, s.Last)
	}
	if d, on := Worst(time.Second, false, 2*time.Second, true); d != 2*time.Second || !on {
		t.Errorf("Worst = %v %v", d, on)
	}
}
