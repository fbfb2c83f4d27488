package tally_test

import (
	"net/netip"
	"testing"

	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
)

// TestConnsReset: a reused set forgets what it held (a connection added
// again counts again), keeps its bound, and adds without allocating.
func TestConnsReset(t *testing.T) {
	var cs []*flows.ConnInfo
	for i := range 4 {
		c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.1:4000"+string(rune('0'+i))), netip.MustParseAddrPort("10.0.0.2:9092"))
		c.ID = i + 1
		cs = append(cs, &c.ConnInfo)
	}
	s := tally.Conns{Max: 2}
	for _, c := range cs {
		s.Add(c)
	}
	if s.Len() != 2 || s.More != 2 {
		t.Fatalf("%d kept, %d more", s.Len(), s.More)
	}
	s.Reset()
	if s.Len() != 0 || s.More != 0 || len(s.IDs()) != 0 {
		t.Fatalf("after Reset: %d kept, %d more", s.Len(), s.More)
	}
	allocs := testing.AllocsPerRun(10, func() {
		s.Reset()
		s.Add(cs[3])
		s.Add(cs[1])
		s.Add(cs[0])
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations to reuse the set", allocs)
	}
	if got := s.IDs(); len(got) != 2 || got[0] != 2 || got[1] != 4 || s.More != 1 {
		t.Errorf("reused: %v, %d more", got, s.More)
	}
}
