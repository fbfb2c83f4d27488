package tally_test

import (
	"testing"

	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// TestConnBits: a connection's bit is set for that connection only,
// across the words the set grows through; connections not numbered
// (0, negative) are never set.
func TestConnBits(t *testing.T) {
	var b tally.ConnBits
	set := []int{1, 63, 64, 65, 200, 4097}
	for _, id := range set {
		b.Set(id)
	}
	b.Set(0)
	b.Set(-5)
	want := map[int]bool{}
	for _, id := range set {
		want[id] = true
	}
	for id := -70; id <= 5000; id++ {
		if b.Has(id) != want[id] {
			t.Fatalf("Has(%d) = %v, want %v", id, b.Has(id), want[id])
		}
	}
	if len(b) != 4097/64+1 {
		t.Errorf("%d words for connections up to 4097, want %d", len(b), 4097/64+1)
	}
}
