package tally_test

import (
	"net/netip"
	"runtime"
	"slices"
	"testing"

	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
)

// TestConnsCompact: a set of connections costs about 24 bytes a
// connection. 1,024 sets of 256 short-lived connections each (a rule
// keeping a set per client, as metadata-storm does, in the soak's churn)
// hold at most 16 MB; as 72-byte keys with a map entry each they held
// 72 MB, growing for the whole of an hour's soak.
func TestConnsCompact(t *testing.T) {
	const sets, per, most = 1024, 256, 16 << 20
	servers := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:9092"), netip.MustParseAddrPort("10.0.0.2:9092"), netip.MustParseAddrPort("10.0.0.3:9092")}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	all := make([]tally.Conns, sets)
	id := 0
	for i := range all {
		host := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		for j := range per {
			id++
			all[i].AddKey(tally.ConnKey{ID: id, Client: netip.AddrPortFrom(host, uint16(30000+j)), Server: servers[j%3]})
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if held := int64(after.HeapAlloc) - int64(before.HeapAlloc); held > most {
		t.Errorf("%d sets of %d connections hold %d bytes, want at most %d", sets, per, held, most)
	}
	runtime.KeepAlive(all)
}

// TestConnsKeys: the set gives back the connections added, first Max, in
// order, each once, with their ends, however they share hosts and servers.
func TestConnsKeys(t *testing.T) {
	c := func(id int, client, server string) *flows.ConnInfo {
		return &flows.ConnInfo{ID: id, Client: netip.MustParseAddrPort(client), Server: netip.MustParseAddrPort(server)}
	}
	in := []*flows.ConnInfo{
		c(1, "10.0.0.1:5000", "10.0.0.9:9092"), c(2, "10.0.0.1:5001", "10.0.0.9:9092"), c(3, "[fd00::1]:5000", "10.0.0.8:9093"),
		c(1, "10.0.0.1:5000", "10.0.0.9:9092"), c(4, "10.0.0.2:5000", "10.0.0.7:9092"), c(5, "10.0.0.3:5000", "10.0.0.6:9092"),
	}
	s := tally.Conns{Max: 4}
	for _, ci := range in {
		s.Add(ci)
	}
	var want []tally.ConnKey
	for _, ci := range []*flows.ConnInfo{in[0], in[1], in[2], in[4]} {
		want = append(want, tally.KeyOf(ci))
	}
	if got := s.List(); !slices.Equal(got, want) || s.More != 1 || s.Len() != 4 {
		t.Errorf("List %v, More %d; want %v and 1", got, s.More, want)
	}
	if got := s.Clients(); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2", "fd00::1"}) {
		t.Errorf("Clients %v: the host of the connection beyond Max must not be one", got)
	}
	if got := s.Servers(); !slices.Equal(got, []string{"10.0.0.7:9092", "10.0.0.8:9093", "10.0.0.9:9092"}) {
		t.Errorf("Servers %v", got)
	}
	big := tally.Conns{Max: 1000}
	for i := range 600 {
		big.AddKey(tally.ConnKey{ID: i % 500, Client: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), uint16(i%500)), Server: netip.MustParseAddrPort("10.0.0.9:9092")})
	}
	if big.Len() != 500 || big.More != 0 {
		t.Errorf("600 additions of 500 connections: %d kept, %d more; want 500 and 0", big.Len(), big.More)
	}
}

// TestConnsClientAddrs: the client hosts, each once however many
// connections (and IPv4-mapped spellings) it has, in address order.
func TestConnsClientAddrs(t *testing.T) {
	var s tally.Conns
	if got := s.ClientAddrs(); got != nil {
		t.Errorf("empty: %v, want nil", got)
	}
	for i, client := range []string{"10.0.0.10:5000", "10.0.0.9:5000", "[::ffff:10.0.0.9]:5001", "10.0.0.10:5001", "[fd00::1]:5000"} {
		s.AddKey(tally.ConnKey{ID: i + 1, Client: netip.MustParseAddrPort(client), Server: netip.MustParseAddrPort("10.0.0.1:9092")})
	}
	want := []netip.Addr{netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("fd00::1")}
	if got := s.ClientAddrs(); !slices.Equal(got, want) {
		t.Errorf("ClientAddrs = %v, want %v", got, want)
	}
}
