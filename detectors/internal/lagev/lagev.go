// Package lagev turns lag points (flows.LagPoint) into what a finding
// shows: evidence at the Fetch responses, the servers fetched from with
// their node ids, and the connections. Shared by the rules on lag
// (consumerlag, followerlag).
package lagev

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Append adds evidence for each point (those with a packet, once each):
// "Fetch response for orders-0: high watermark 7000, fetch offset 3400:
// lag 3600".
func Append(ev []detectors.Evidence, part string, pts ...flows.LagPoint) []detectors.Evidence {
	for _, p := range pts {
		if p.Packet == 0 || slices.ContainsFunc(ev, func(e detectors.Evidence) bool { return e.File == p.File && e.Packet == p.Packet }) {
			continue
		}
		ev = append(ev, detectors.Evidence{File: p.File, Packet: p.Packet, Conn: p.Conn,
			What: fmt.Sprintf("Fetch response for %s: high watermark %d, fetch offset %d: lag %d", part, p.HighWatermark, p.Offset, p.Lag)})
	}
	return ev
}

// Where collects the servers and connections of a finding's points.
type Where struct {
	servers map[netip.AddrPort]bool
	conns   map[int]bool
}

// Add notes a server fetched from and the connections of points.
func (w *Where) Add(server netip.AddrPort, pts ...flows.LagPoint) {
	if w.servers == nil {
		w.servers, w.conns = map[netip.AddrPort]bool{}, map[int]bool{}
	}
	w.servers[server] = true
	for _, p := range pts {
		if p.Conn > 0 {
			w.conns[p.Conn] = true
		}
	}
}

// Servers returns the servers, sorted: labelled with their node ids where
// known, as addresses, and the node ids.
func (w *Where) Servers(p *detectors.Pass) (labels []string, addrs []netip.AddrPort, nodes []int32) {
	addrs = slices.SortedFunc(maps.Keys(w.servers), netip.AddrPort.Compare)
	ids := tally.IDs{}
	for _, ap := range addrs {
		labels = append(labels, p.Label(ap))
		if p.Nodes != nil {
			ids.Add(p.Nodes.Server(ap))
		}
	}
	sort.Strings(labels)
	if len(ids) > 0 {
		nodes = ids.Sorted()
	}
	return labels, addrs, nodes
}

// Conns returns the connection ids, sorted.
func (w *Where) Conns() []int {
	return slices.Sorted(maps.Keys(w.conns))
}

// Span gathers a finding's partitions: their names ("orders-0"), the
// subject's partitions, and the time they cover.
type Span struct {
	Names       []string
	Partitions  []cluster.Partition
	First, Last time.Time
}

// Add adds a partition seen from first to last and returns its name.
func (s *Span) Add(topic string, partition int32, first, last time.Time) string {
	name := topic + "-" + strconv.Itoa(int(partition))
	s.Names = append(s.Names, name)
	s.Partitions = append(s.Partitions, cluster.Partition{Topic: topic, Num: partition})
	if s.First.IsZero() || first.Before(s.First) {
		s.First = first
	}
	if last.After(s.Last) {
		s.Last = last
	}
	return name
}

// Groups gathers the parts of findings by key, keys in the order they
// first come.
type Groups[K comparable, P any] struct {
	order []K
	parts map[K][]P
}

// Add adds part p under k.
func (g *Groups[K, P]) Add(k K, p P) {
	if g.parts == nil {
		g.parts = map[K][]P{}
	}
	if _, ok := g.parts[k]; !ok {
		g.order = append(g.order, k)
	}
	g.parts[k] = append(g.parts[k], p)
}

// Each calls fn for each key with its parts, sorted by less, in the order
// the keys came.
func (g *Groups[K, P]) Each(less func(a, b *P) bool, fn func(k K, parts []P)) {
	for _, k := range g.order {
		ps := g.parts[k]
		sort.SliceStable(ps, func(i, j int) bool { return less(&ps[i], &ps[j]) })
		fn(k, ps)
	}
}

// Others is the end of an explanation: the other partitions ("Partitions
// falling behind: ..."), and what the bound of flows.LagTable left out.
func Others(what string, names []string, dropped int64) string {
	var s string
	if len(names) > 1 {
		s = fmt.Sprintf(" Partitions %s: %s.", what, text.List(names, 8))
	}
	if dropped > 0 {
		s += fmt.Sprintf(" (%d samples of partitions beyond the %d followed were not examined.)", dropped, flows.DefaultMaxLagSeries)
	}
	return s
}
