package legacy

import (
	"net/netip"
	"testing"
)

func TestCpIndexCachesAbsenceOnlyUntilACreation(t *testing.T) {
	var x cpIndex[int]
	host := netip.MustParseAddr("10.0.0.1")
	a := cpKey{c: nlClient{host: host, id: "a"}, topic: "t"}
	b := cpKey{c: nlClient{host: host, id: "b"}, topic: "t"}
	if x.topic(1, &a, false) != nil || x.topic(1, &a, false) != nil {
		t.Fatal("absent topic found")
	}
	ta := x.topic(1, &a, true)
	*ta.add(3) = 30
	if x.topic(1, &a, false) != ta || x.topic(2, &a, false) != ta || *x.topic(9, &a, false).part(3) != 30 {
		t.Fatal("created topic not found again")
	}
	// b is cached absent on connection 1's slot, then created through
	// another connection: the cached absence must not hide it.
	if x.topic(1, &b, false) != nil {
		t.Fatal("b found before it exists")
	}
	tb := x.topic(7, &b, true)
	if got := x.topic(1, &b, false); got != tb {
		t.Fatalf("b after creation: %p, want %p", got, tb)
	}
	if x.topic(1, &a, false).part(4) != nil || (*cpTopic[int])(nil).part(3) != nil {
		t.Fatal("absent partition found")
	}
	// Partitions far past the others go to the sparse map, and move
	// into the array when it reaches them.
	want := map[int32]int{}
	for _, p := range []int32{1000, 40, -3, 0, 1, 2, 1 << 30, 18, 17, 50, 35, 34, 33, 60} {
		*tb.add(p) = int(p) + 7
		want[p] = int(p) + 7
		for q, v := range want {
			if got := tb.part(q); got == nil || *got != v {
				t.Fatalf("after adding %d: partition %d = %v, want %d", p, q, got, v)
			}
		}
	}
	for p := int32(-5); p < 70; p++ {
		if _, ok := want[p]; !ok && tb.part(p) != nil {
			t.Fatalf("partition %d found, never added", p)
		}
	}
	if len(tb.dense) > 2*len(want)+cpStep {
		t.Errorf("array of %d for %d partitions", len(tb.dense), len(want))
	}
}
