package tally

import (
	"net/netip"
	"testing"

	"github.com/kfsniff/kfsniff/flows"
)

func TestConnsClone(t *testing.T) {
	conn := func(port uint16) *flows.ConnInfo {
		return &flows.ConnInfo{ID: int(port), Client: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), port),
			Server: netip.MustParseAddrPort("10.0.0.2:9092")}
	}
	a, b, c := conn(1), conn(2), conn(3)
	s := Conns{Max: 2}
	s.Add(a)
	cl := s.Clone()
	cl.Add(b)
	cl.Add(c)
	s.Add(c)
	if got := s.IDs(); len(got) != 2 || got[0] != 1 || got[1] != 3 || s.More != 0 {
		t.Errorf("original %v more %d, want [1 3] and 0: the clone's additions leaked", got, s.More)
	}
	if got := cl.IDs(); len(got) != 2 || got[0] != 1 || got[1] != 2 || cl.More != 1 {
		t.Errorf("clone %v more %d, want [1 2] and 1", got, cl.More)
	}
}
