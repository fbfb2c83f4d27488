package detectors

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
	for p := range int32(600) { // past one slab
		*tb.add(p) = int(p)
	}
	for p := range int32(600) {
		if *tb.part(p) != int(p) || tb.add(p) != tb.part(p) {
			t.Fatalf("partition %d lost", p)
		}
	}
}
