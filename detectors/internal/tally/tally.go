// Package tally holds the small bounded collections rules count with:
// sets of ids, the first few error codes, counts per API key, and the
// connections a finding involves.
package tally

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// ConnKey is a connection as a map key holding no pointer into its
// record: what a rule keeps by it does not keep the record (flows.Conn,
// 768 bytes) alive once flows has dropped it from its table
// (flows.Config.MaxConns). A map keyed by *flows.ConnInfo does.
type ConnKey struct {
	ID             int
	Client, Server netip.AddrPort
}

// KeyOf is c's key.
func KeyOf(c *flows.ConnInfo) ConnKey { return ConnKey{c.ID, c.Client, c.Server} }

// IDs is a set of ids (node ids, connection ids); negative ids (unknown)
// are not added.
type IDs map[int32]bool

// Add adds id if it is known (>= 0).
func (s IDs) Add(id int32) {
	if id >= 0 {
		s[id] = true
	}
}

// Sorted returns the ids in order.
func (s IDs) Sorted() []int32 {
	out := slices.AppendSeq(make([]int32, 0, len(s)), maps.Keys(s))
	slices.Sort(out)
	return out
}

// Ints returns the ids in order as ints.
func (s IDs) Ints() []int {
	out := make([]int, 0, len(s))
	for _, id := range s.Sorted() {
		out = append(out, int(id))
	}
	return out
}

// Codes counts the first four distinct error codes seen.
type Codes [4]struct {
	Code int16
	N    int64
}

// Add counts code.
func (t *Codes) Add(code int16) {
	for i := range t {
		if t[i].N == 0 {
			t[i].Code = code
		}
		if t[i].Code == code {
			t[i].N++
			return
		}
	}
}

// Top is the most frequent code and its count (0, 0 if none).
func (t *Codes) Top() (int16, int64) {
	var code int16
	var n int64
	for _, c := range t {
		if c.N > n {
			code, n = c.Code, c.N
		}
	}
	return code, n
}

// Count is how many times code was counted (0 past the first four).
func (t *Codes) Count(code int16) int64 {
	for _, c := range t {
		if c.Code == code {
			return c.N
		}
	}
	return 0
}

// Parts lists the codes as "NAME xN".
func (t *Codes) Parts() []string {
	var parts []string
	for _, c := range t {
		if c.N > 0 {
			parts = append(parts, fmt.Sprintf("%s x%d", decode.ErrorName(c.Code), c.N))
		}
	}
	return parts
}

// Names lists the codes' names, without counts.
func (t *Codes) Names() []string {
	var names []string
	for _, c := range t {
		if c.N > 0 {
			names = append(names, decode.ErrorName(c.Code))
		}
	}
	return names
}

// Entry returns m[k], made by make if absent and m holds fewer than max
// entries; when m is full it counts the miss in dropped and returns nil.
func Entry[K comparable, V any](m map[K]*V, k K, max int, dropped *int64, make func() *V) *V {
	if v := m[k]; v != nil {
		return v
	}
	if len(m) >= max {
		*dropped++
		return nil
	}
	v := make()
	m[k] = v
	return v
}

// APIs counts by API key: the usual keys in an array, so that counting
// every exchange costs no map access.
type APIs struct {
	low  [128]int64
	high map[int16]int64
}

// Add counts key.
func (c *APIs) Add(key int16) {
	if key >= 0 && int(key) < len(c.low) {
		c.low[key]++
		return
	}
	if c.high == nil {
		c.high = make(map[int16]int64)
	}
	c.high[key]++
}

// Get is key's count.
func (c *APIs) Get(key int16) int64 {
	if key >= 0 && int(key) < len(c.low) {
		return c.low[key]
	}
	return c.high[key]
}

// Conns are the connections a finding involves, the first Max of them,
// by key: a finding kept for the rest of a live capture does not keep
// the records (flows.Conn) of the connections it names alive after
// flows drops them (TestFindingsPinNoConnectionRecords). What a finding
// says of a connection beyond its key (its servers' node labels) is
// looked up when the finding is written.
//
// A connection costs 24 bytes (its id, its client port, the indexes of
// its client host and server among the distinct ones), not a 72-byte
// ConnKey and a map entry: a rule
// keeping a set per client (metadata-storm, 256 each for up to 1024
// clients) held 15 MB after 15 minutes of the soak, and growing
// (TestConnsCompact).
type Conns struct {
	// Max bounds the connections kept (0: DefaultMaxConns); More
	// counts those beyond it.
	Max     int
	More    int
	list    []connRef
	hosts   []netip.Addr     // the distinct client hosts, in order of first use
	servers []netip.AddrPort // the distinct servers
	// seen indexes list once it is longer than a scan is cheap.
	seen map[connRef]struct{}
	// last is the connection last added or found (valid if hasLast):
	// rules add the connection of every exchange they keep, mostly the
	// one they added before, and finding it here costs no scan.
	last    connRef
	hasLast bool
}

type connRef struct {
	id           int
	host, server uint32 // indexes in hosts, servers
	port         uint16 // the client's
}

// scanConns is how long list is searched before seen indexes it.
const scanConns = 256

// DefaultMaxConns is Conns' bound when Max is not set.
const DefaultMaxConns = 256

// Add adds c (nil is ignored).
func (s *Conns) Add(c *flows.ConnInfo) {
	if c != nil {
		s.AddKey(KeyOf(c))
	}
}

// AddKey adds the connection k.
func (s *Conns) AddKey(k ConnKey) {
	if s.hasLast && s.isLast(k) {
		return
	}
	ci, cnew := index(&s.hosts, k.Client.Addr())
	si, snew := index(&s.servers, k.Server)
	r := connRef{k.ID, ci, si, k.Client.Port()}
	if !cnew && !snew && s.has(r) {
		s.last, s.hasLast = r, true
		return
	}
	max := s.Max
	if max <= 0 {
		max = DefaultMaxConns
	}
	if len(s.list) >= max {
		s.More++
		// An end met only here is not one of the connections kept.
		if cnew {
			s.hosts = s.hosts[:len(s.hosts)-1]
		}
		if snew {
			s.servers = s.servers[:len(s.servers)-1]
		}
		return
	}
	s.list = append(s.list, r)
	s.last, s.hasLast = r, true
	if s.seen != nil {
		s.seen[r] = struct{}{}
	} else if len(s.list) > scanConns {
		s.seen = make(map[connRef]struct{}, len(s.list))
		for _, r := range s.list {
			s.seen[r] = struct{}{}
		}
	}
}

// isLast reports whether k is s.last.
func (s *Conns) isLast(k ConnKey) bool {
	l := s.last
	return k.ID == l.id && k.Client.Port() == l.port && s.servers[l.server] == k.Server && s.hosts[l.host] == k.Client.Addr()
}

func (s *Conns) has(r connRef) bool {
	if s.seen != nil {
		_, ok := s.seen[r]
		return ok
	}
	for i := len(s.list) - 1; i >= 0; i-- {
		if s.list[i] == r {
			return true
		}
	}
	return false
}

// index returns the index of a in *set, added if new (and then true).
func index[T comparable](set *[]T, a T) (uint32, bool) {
	for i := len(*set) - 1; i >= 0; i-- {
		if (*set)[i] == a {
			return uint32(i), false
		}
	}
	*set = append(*set, a)
	return uint32(len(*set) - 1), true
}

func (s *Conns) key(r connRef) ConnKey {
	return ConnKey{r.id, netip.AddrPortFrom(s.hosts[r.host], r.port), s.servers[r.server]}
}

// Reset empties s, keeping its memory for the next use.
func (s *Conns) Reset() {
	s.seen, s.hasLast = nil, false
	s.list, s.hosts, s.servers, s.More = s.list[:0], s.hosts[:0], s.servers[:0], 0
}

// Len is how many are kept.
func (s *Conns) Len() int { return len(s.list) }

// Fold drops the connections gone reports true for (closed and folded
// out of the connections table: Pass.KeepClosed) and returns how many:
// the caller counts them. The distinct client hosts and servers stay.
func (s *Conns) Fold(gone func(id int) bool) int {
	kept := s.list[:0]
	for _, r := range s.list {
		if gone(r.id) {
			if s.seen != nil {
				delete(s.seen, r)
			}
			continue
		}
		kept = append(kept, r)
	}
	n := len(s.list) - len(kept)
	s.list = kept
	s.hasLast = false // it may be one dropped
	return n
}

// List returns the connections kept, in the order added (a new slice).
func (s *Conns) List() []ConnKey {
	out := make([]ConnKey, len(s.list))
	for i, r := range s.list {
		out[i] = s.key(r)
	}
	return out
}

// IDs returns the connection ids, sorted.
func (s *Conns) IDs() []int {
	out := make([]int, 0, len(s.list))
	for _, r := range s.list {
		out = append(out, r.id)
	}
	sort.Ints(out)
	return out
}

// Servers returns the server addresses, sorted.
func (s *Conns) Servers() []string {
	set := map[string]bool{}
	for _, a := range s.servers {
		set[a.String()] = true
	}
	return text.SortedKeys(set)
}

// ServerAddrs returns the server addresses, typed, sorted.
func (s *Conns) ServerAddrs() []netip.AddrPort {
	out := slices.Clone(s.servers)
	sort.Slice(out, func(i, j int) bool { return out[i].Compare(out[j]) < 0 })
	return out
}

// ServerLabels returns the servers with their node ids where known.
func (s *Conns) ServerLabels(n *cluster.Nodes) []string {
	set := map[string]bool{}
	for _, a := range s.servers {
		if n != nil {
			set[n.Label(a, true)] = true
		} else {
			set[a.String()] = true
		}
	}
	return text.SortedKeys(set)
}

// Clients returns the client hosts (no port), sorted.
func (s *Conns) Clients() []string {
	set := map[string]bool{}
	for _, h := range s.hosts {
		set[h.Unmap().String()] = true
	}
	return text.SortedKeys(set)
}

// ClientAddrs returns the client hosts, typed, sorted.
func (s *Conns) ClientAddrs() []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, h := range s.hosts {
		a := h.Unmap()
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// Nodes returns the node ids of the servers and of clients that are nodes.
func (s *Conns) Nodes(n *cluster.Nodes) []int32 {
	if n == nil {
		return nil
	}
	ids := IDs{}
	for _, a := range s.servers {
		ids.Add(n.Server(a))
	}
	for _, h := range s.hosts {
		ids.Add(n.Host(h))
	}
	if len(ids) == 0 {
		return nil
	}
	return ids.Sorted()
}
