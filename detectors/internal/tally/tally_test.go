package tally

import (
	"net/netip"
	"reflect"
	"testing"
)

// TestCodes: the first four codes are counted, listed with and without
// their counts, the most frequent on top, and counted one by one.
func TestCodes(t *testing.T) {
	var c Codes
	for _, code := range []int16{70, 71, 70, 70} {
		c.Add(code)
	}
	if got, want := c.Parts(), []string{"FETCH_SESSION_ID_NOT_FOUND x3", "INVALID_FETCH_SESSION_EPOCH x1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Parts = %q, want %q", got, want)
	}
	if got, want := c.Names(), []string{"FETCH_SESSION_ID_NOT_FOUND", "INVALID_FETCH_SESSION_EPOCH"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names = %q, want %q", got, want)
	}
	if code, n := c.Top(); code != 70 || n != 3 {
		t.Errorf("Top = %d x%d, want 70 x3", code, n)
	}
	if c.Count(70) != 3 || c.Count(71) != 1 || c.Count(10) != 0 || c.Count(0) != 0 {
		t.Errorf("Count = %d %d %d %d, want 3 1 0 0", c.Count(70), c.Count(71), c.Count(10), c.Count(0))
	}
}

// TestEntry: entries are made once, up to the bound; beyond it misses are
// counted, and entries already made are still found.
func TestEntry(t *testing.T) {
	m := map[string]*int{}
	var dropped int64
	made := 0
	mk := func() *int { made++; return new(int) }
	a := Entry(m, "a", 2, &dropped, mk)
	if Entry(m, "a", 2, &dropped, mk) != a || Entry(m, "b", 2, &dropped, mk) == nil {
		t.Fatal("entries not kept")
	}
	if Entry(m, "c", 2, &dropped, mk) != nil || dropped != 1 || made != 2 || Entry(m, "a", 2, &dropped, mk) != a {
		t.Errorf("full: dropped %d made %d", dropped, made)
	}
}

// TestConnsAddAgain: adding the connection added last, or one kept
// before it, keeps one of each; a connection beyond Max is counted each
// time it is met, even right after itself; Reset and Fold forget the
// last one.
func TestConnsAddAgain(t *testing.T) {
	srv := netip.MustParseAddrPort("10.0.0.9:9092")
	key := func(id int, port uint16) ConnKey {
		return ConnKey{ID: id, Client: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), port), Server: srv}
	}
	s := Conns{Max: 2}
	for _, k := range []ConnKey{key(1, 1000), key(1, 1000), key(2, 1001), key(1, 1000), key(2, 1001), key(2, 1001)} {
		s.AddKey(k)
	}
	if got := s.List(); !reflect.DeepEqual(got, []ConnKey{key(1, 1000), key(2, 1001)}) || s.More != 0 {
		t.Fatalf("List %v More %d, want the two once and none more", got, s.More)
	}
	// Same port and server, another id: another connection.
	s.AddKey(key(3, 1000))
	s.AddKey(key(3, 1000))
	if s.Len() != 2 || s.More != 2 {
		t.Fatalf("Len %d More %d, want 2 and 2 (the third, counted twice)", s.Len(), s.More)
	}
	s.Reset()
	s.AddKey(key(2, 1001))
	s.AddKey(key(2, 1001))
	if got := s.List(); !reflect.DeepEqual(got, []ConnKey{key(2, 1001)}) {
		t.Fatalf("after Reset: List %v, want the one", got)
	}
	// Folded out, then met again: kept again.
	if n := s.Fold(func(id int) bool { return id == 2 }); n != 1 || s.Len() != 0 {
		t.Fatalf("Fold dropped %d, Len %d, want 1 and 0", n, s.Len())
	}
	s.AddKey(key(2, 1001))
	if s.Len() != 1 {
		t.Fatalf("after Fold: Len %d, want the one added again", s.Len())
	}
	c := s.Clone()
	c.AddKey(key(2, 1001))
	c.AddKey(key(4, 1002))
	if c.Len() != 2 || s.Len() != 1 {
		t.Fatalf("clone Len %d, s Len %d, want 2 and 1", c.Len(), s.Len())
	}
}
