package table

import (
	"net/netip"
	"strconv"
	"testing"
)

func TestCPIndexCachesAbsenceOnlyUntilACreation(t *testing.T) {
	var x CPIndex[int]
	host := netip.MustParseAddr("10.0.0.1")
	a := CPKey{Host: host, ClientID: "a", Topic: "t"}
	b := CPKey{Host: host, ClientID: "b", Topic: "t"}
	if x.Topic(1, &a, false) != nil || x.Topic(1, &a, false) != nil {
		t.Fatal("absent topic found")
	}
	ta := x.Topic(1, &a, true)
	*ta.Add(3) = 30
	if x.Topic(1, &a, false) != ta || x.Topic(2, &a, false) != ta || *x.Topic(9, &a, false).Part(3) != 30 {
		t.Fatal("created topic not found again")
	}
	// b is cached absent on connection 1's slot, then created through
	// another connection: the cached absence must not hide it.
	if x.Topic(1, &b, false) != nil {
		t.Fatal("b found before it exists")
	}
	tb := x.Topic(7, &b, true)
	if got := x.Topic(1, &b, false); got != tb {
		t.Fatalf("b after creation: %p, want %p", got, tb)
	}
	if x.Topic(1, &a, false).Part(4) != nil || (*CPTopic[int])(nil).Part(3) != nil {
		t.Fatal("absent partition found")
	}
	// A topic named by id is another key than the same client's named one.
	byID := CPKey{Host: host, ClientID: "a", TopicID: [16]byte{1}}
	if x.Topic(1, &byID, false) != nil {
		t.Fatal("topic by id found as the named one")
	}
	// Partitions far past the others go to the sparse map, and move
	// into the array when it reaches them.
	want := map[int32]int{}
	for _, p := range []int32{1000, 40, -3, 0, 1, 2, 1 << 30, 18, 17, 50, 35, 34, 33, 60} {
		*tb.Add(p) = int(p) + 7
		want[p] = int(p) + 7
		for q, v := range want {
			if got := tb.Part(q); got == nil || *got != v {
				t.Fatalf("after adding %d: partition %d = %v, want %d", p, q, got, v)
			}
		}
	}
	for p := int32(-5); p < 70; p++ {
		if _, ok := want[p]; !ok && tb.Part(p) != nil {
			t.Fatalf("partition %d found, never added", p)
		}
	}
	if len(tb.dense) > 2*len(want)+cpStep {
		t.Errorf("array of %d for %d partitions", len(tb.dense), len(want))
	}
}

// TestCPIndexFindsWithoutAllocating: once a client's topics and
// partitions are in, finding them again (present or absent, through the
// cache or past it) allocates nothing: the index is read for every
// partition of every Metadata response.
func TestCPIndexFindsWithoutAllocating(t *testing.T) {
	var x CPIndex[[4]int64]
	keys := make([]CPKey, 0, 64)
	for c := range 8 {
		for tp := range 8 {
			keys = append(keys, CPKey{Host: netip.AddrFrom4([4]byte{10, 0, 0, byte(c)}), ClientID: "client-" + strconv.Itoa(c),
				Topic: "topic-" + strconv.Itoa(tp)})
		}
	}
	for i := range keys {
		ct := x.Topic(i, &keys[i], true)
		for p := int32(0); p < 32; p++ {
			ct.Add(p)[0] = int64(p)
		}
		ct.Add(5000)
	}
	absent := CPKey{Host: keys[0].Host, ClientID: "nobody", Topic: "topic-0"}
	n := 0
	allocs := testing.AllocsPerRun(100, func() {
		for i := range keys {
			ct := x.Topic(n%2048, &keys[i], false) // connections sharing slots
			for p := int32(0); p < 40; p++ {
				if v := ct.Part(p); v != nil {
					v[1]++
				}
			}
			ct.Add(7)[2]++
			_ = ct.Part(5000)
			n++
		}
		_ = x.Topic(n, &absent, false).Part(0)
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per pass over 64 topics, want 0", allocs)
	}
	if got := x.Topic(0, &keys[3], false).Part(7)[2]; got != 101 {
		t.Errorf("partition 7 counted %d times, want 101", got)
	}
}
