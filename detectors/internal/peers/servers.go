package peers

import (
	"net/netip"
	"sort"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// Server is what one server got of an episode: requests, and how many of
// its answers refused them (NOT_LEADER_OR_FOLLOWER).
type Server struct {
	Addr     netip.AddrPort
	Requests int64
	Refused  int64
}

// Servers counts per server in bounded memory (MaxServers); over the
// bound, the requests are counted as Other.
type Servers struct {
	list  []Server
	Other int64
}

// Add counts requests and refusals at ap.
func (s *Servers) Add(ap netip.AddrPort, requests, refused int64) {
	ap = Addr(ap)
	for i := range s.list {
		if s.list[i].Addr == ap {
			s.list[i].Requests += requests
			s.list[i].Refused += refused
			return
		}
	}
	if len(s.list) >= MaxServers {
		s.Other += requests
		return
	}
	s.list = append(s.list, Server{ap, requests, refused})
}

// Reset empties s, keeping its memory.
func (s *Servers) Reset() {
	s.list, s.Other = s.list[:0], 0
}

// List returns the servers in the order first seen (not to be changed).
func (s *Servers) List() []Server { return s.list }

// Len is how many servers are counted apart.
func (s *Servers) Len() int { return len(s.list) }

// Strings returns the servers as ip:port, sorted.
func (s *Servers) Strings() []string {
	out := make([]string, 0, len(s.list))
	for _, c := range s.list {
		out = append(out, c.Addr.String())
	}
	sort.Strings(out)
	return out
}

// Labels returns the servers with their node ids where known, sorted.
func (s *Servers) Labels(p *detectors.Pass) []string {
	out := make([]string, 0, len(s.list))
	for _, c := range s.list {
		out = append(out, p.Label(c.Addr))
	}
	sort.Strings(out)
	return out
}

// NodeIDs are the node ids a finding involves: ids (those >= 0) and the
// known node ids of the servers, sorted.
func NodeIDs(p *detectors.Pass, servers []*Servers, ids ...int32) []int32 {
	set := tally.IDs{}
	for _, id := range ids {
		set.Add(id)
	}
	if p.Nodes != nil {
		for _, s := range servers {
			for _, c := range s.list {
				set.Add(p.Nodes.Server(c.Addr))
			}
		}
	}
	return set.Sorted()
}

// Addrs are the servers' addresses, in the order first seen.
func (s *Servers) Addrs() []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(s.list))
	for _, c := range s.list {
		out = append(out, c.Addr)
	}
	return out
}
