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
