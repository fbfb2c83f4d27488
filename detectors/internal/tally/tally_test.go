package tally

import (
	"reflect"
	"testing"
)

// TestCodes: the first four codes are counted, listed with and without
// their counts, the most frequent on top.
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
