package flows

import (
	"bytes"
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Lag on the wire. A fetcher's lag on a partition is the high watermark a
// Fetch response gives minus the fetch offset its request asked from: the
// records it has still to read. A consumer's is how far it is behind the
// producers (what the consumer metric records-lag and kafka-consumer-groups.sh
// show); a follower's is how far its replica trails the leader's high
// watermark, which an in-sync follower never does (the leader counts the
// follower's fetch offset before it advances the high watermark), so a
// follower behind it is out of the ISR.
//
// A LagTable follows each fetcher's partitions through fetch sessions
// (KIP-227): an incremental request names a partition only when its fetch
// offset changed, and an incremental response names it only when
// something changed (records, high watermark, an error), so the last
// offset asked and the last high watermark given are remembered per
// partition and a sample is taken whenever either side names it.

// LagKey names one fetcher's view of one partition: the client (client id
// and host), the node it fetches for (a follower's node id, -1 for a
// consumer) and the partition (by name, or by topic id from Fetch v13).
type LagKey struct {
	Client    cluster.Client
	Replica   int32
	Partition cluster.Partition
}

// LagPoint is one sample of a fetcher's lag: at the response's packet, the
// fetch offset asked and the high watermark given.
type LagPoint struct {
	Time          time.Time
	File          int
	Packet        uint64
	Conn          int
	Offset        int64
	HighWatermark int64
	// Lag is HighWatermark - Offset (the last stable offset for a
	// read_committed fetcher), 0 when the fetcher is at or past it.
	Lag int64
}

// LagSeries is one key's state. Its owners keep theirs in a slice by
// Index.
type LagSeries struct {
	Key LagKey
	// TopicName is the topic's name as known when the series began (a
	// topic id learned later is named by Nodes.TopicName).
	TopicName string
	// ReadCommitted is set when the fetcher reads committed records only:
	// its lag is measured to the last stable offset.
	ReadCommitted bool
	// Offset is the last fetch offset asked (-1 before any), HighWatermark
	// and LastStable the last given (-1 before any, or after an error).
	Offset, HighWatermark, LastStable int64
	// Server is the broker last fetched from.
	Server netip.AddrPort
	// Samples counts the points taken.
	Samples int64
	// Index numbers the series from 0, in the order they began, densely;
	// RoleIndex numbers those of its role (Role) alike: an owner keeps
	// its state of a series by one of them (LagStates) rather than in a
	// map.
	Index, RoleIndex int
	// InAll is set when the series is one of the table's first Max of
	// both roles together: what an owner following both roles (the
	// report) follows. A series not InAll is followed by its role's
	// owners only (LagTable.Max).
	InAll bool

	asked, answered uint64 // the exchange that last named it
}

// Role is the role of the series' fetcher: RoleReplication for a
// follower's, RoleConsumer for a consumer's.
func (s *LagSeries) Role() cluster.Role {
	if s.Key.Replica >= 0 {
		return cluster.RoleReplication
	}
	return cluster.RoleConsumer
}

// Topic names the series' topic: by the name Metadata gave its id (n) if
// it was fetched by id, else as when the series began.
func (s *LagSeries) Topic(n *cluster.Nodes) string {
	if s.Key.Partition.Topic == "" && n != nil {
		if name, ok := n.TopicName(s.Key.Partition.TopicID); ok {
			return name
		}
	}
	return s.TopicName
}

// LagSample is a point taken by LagTable.Fetch, with its series.
type LagSample struct {
	S *LagSeries
	P LagPoint
}

// DefaultMaxLagSeries bounds a LagTable whose Max is not set.
const DefaultMaxLagSeries = 4096

// maxGroupKeys bounds the client ids and hosts whose groups are learned;
// maxGroups the groups kept for one.
const (
	maxGroupKeys = 4096
	maxGroups    = 4
)

// LagTable follows the lag of every consumer's and follower's partitions;
// the zero value is ready. It is fed requests (Request, for consumer
// groups) and Fetch exchanges (Fetch): by a Delivery, once for all the
// handlers that follow lag (LagUser), which read the samples of each
// exchange (Exchange.Lag) and keep their own state of a series by its
// Index.
//
// It follows the first Max series of each role (consumers, followers), so
// that an owner following one role sees the same partitions as if the
// other's fetches were not there, and marks the first Max of both roles
// together (LagSeries.InAll), which an owner following both follows.
type LagTable struct {
	// Max bounds the series of each role, and those InAll (0:
	// DefaultMaxLagSeries). Dropped counts the partitions asked (one a
	// partition of a Fetch request) whose series is not InAll: those an
	// owner of both roles does not follow; RoleDropped those of one role
	// beyond its bound.
	Max     int
	Dropped int64
	// Only, if set (RoleConsumer or RoleReplication), follows the
	// fetches of that role only.
	Only cluster.Role

	series  map[LagKey]*LagSeries
	all     []*LagSeries // by Index
	ofRole  [2]int       // series of consumers, followers
	dropped [2]int64     // partitions asked beyond ofRole's bound
	groups  map[cluster.Client]*[maxGroups]string
	// GroupsDropped counts group sightings beyond the bounds.
	GroupsDropped int64
	out           []LagSample
	tick          uint64
	// asked are the series of the request being read, in its order (nil
	// for a partition not followed): a response lists its partitions in
	// the request's order as a rule, so each is found without hashing
	// its key again.
	asked []*LagSeries
	// byConn are the series a connection's last Fetch asked for, in the
	// slot of its number modulo lagConnSlots (the connection that last
	// used the slot): a fetcher asks for the same partitions again and
	// again, found there without a map lookup (a cache miss a partition,
	// in a table of thousands). A fixed table, allocated at the first
	// Fetch: indexed by the number itself up to 65,536, it filled for 22
	// minutes of a live capture at 50 new connections a second (1.5 MB
	// of slice headers, most of connections long closed), and followed
	// no connection numbered beyond (TestLagConnCacheFixed).
	byConn []lagConnSlot
}

type lagConnSlot struct {
	id     int
	series []*LagSeries
}

// lagConnSlots is how many connections' last Fetch series are cached:
// connections are numbered in order of opening, so those fetching at
// once share a slot only 4096 openings apart; a shared slot is a miss,
// the series then found by key.
const lagConnSlots = 1 << 12

// Request learns the consumer group of the request's client id and host,
// from any of its connections (the fetch connections and the coordinator's
// differ).
func (t *LagTable) Request(m *Message) {
	g := m.Group
	if g == "" || m.Conn == nil {
		return
	}
	k := m.Client
	gs := t.groups[k]
	if gs == nil {
		if len(t.groups) >= maxGroupKeys {
			t.GroupsDropped++
			return
		}
		if t.groups == nil {
			t.groups = make(map[cluster.Client]*[maxGroups]string)
		}
		gs = new([maxGroups]string)
		t.groups[k] = gs
	}
	for i := range gs {
		switch gs[i] {
		case g:
			return
		case "":
			gs[i] = g
			return
		}
	}
	t.GroupsDropped++
}

// Groups returns the consumer groups learned for a client id and host, in
// the order first seen; none when its group requests were not captured.
func (t *LagTable) Groups(clientID string, host netip.Addr) []string {
	if t == nil {
		return nil
	}
	gs := t.groups[cluster.ClientAt(host, clientID)]
	if gs == nil {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(gs[:]), func(g string) bool { return g == "" })
}

// Fetch reads an exchange and returns the points it gives: one per
// partition of a consumer's or follower's Fetch whose response (or, in an
// incremental session, whose earlier response) gave a high watermark. The
// slice is reused by the next call.
func (t *LagTable) Fetch(req, resp *Message) []LagSample {
	t.out = t.out[:0]
	if req == nil || resp == nil || req.Conn == nil || req.Key != int16(kmsg.Fetch) ||
		req.Role != cluster.RoleConsumer && req.Role != cluster.RoleReplication || t.Only != cluster.RoleNone && req.Role != t.Only {
		return nil
	}
	q, ok := req.Req.(*kmsg.FetchRequest)
	r, ok2 := resp.Resp.(*kmsg.FetchResponse)
	if !ok || !ok2 || r.ErrorCode != 0 {
		return nil
	}
	t.tick++
	base := LagKey{Client: req.Client, Replica: -1}
	if req.Role == cluster.RoleReplication {
		base.Replica = req.Fetcher.ID()
	}
	if t.byConn == nil {
		t.byConn = make([]lagConnSlot, lagConnSlots)
	}
	id := req.Conn.ID
	slot := &t.byConn[uint(id)%lagConnSlots]
	var prev []*LagSeries
	if slot.id == id {
		prev = slot.series
	}
	t.asked = t.asked[:0]
	for i := range q.Topics {
		tp := &q.Topics[i]
		k := base
		k.Partition = cluster.Partition{Topic: tp.Topic, TopicID: tp.TopicID}.Key(req.names())
		for j := range tp.Partitions {
			k.Partition.Num = tp.Partitions[j].Partition
			var s *LagSeries
			if n := len(t.asked); n < len(prev) && prev[n] != nil && prev[n].Key == k {
				s = prev[n]
			} else {
				s = t.get(k, req)
			}
			t.asked = append(t.asked, s)
			if s == nil {
				t.Dropped++
				continue
			}
			if !s.InAll {
				t.Dropped++
			}
			s.Offset, s.asked = tp.Partitions[j].FetchOffset, t.tick
			s.ReadCommitted, s.Server = q.IsolationLevel == 1, req.Conn.Server
		}
	}
	slot.id, slot.series = id, append(slot.series[:0], t.asked...)
	next := 0 // the asked series the response's next partition should be
	for i := range r.Topics {
		tp := &r.Topics[i]
		k := base
		k.Partition = cluster.Partition{Topic: tp.Topic, TopicID: tp.TopicID}.Key(req.names())
		for j := range tp.Partitions {
			p := &tp.Partitions[j]
			k.Partition.Num = p.Partition
			var s *LagSeries
			if next < len(t.asked) && t.asked[next] != nil && t.asked[next].Key == k {
				s = t.asked[next]
			} else {
				s = t.series[k]
			}
			next++
			if s == nil {
				continue // a session's partition asked before the capture
			}
			s.answered = t.tick
			if p.ErrorCode != 0 || p.HighWatermark < 0 {
				s.HighWatermark, s.LastStable = -1, -1
				continue
			}
			s.HighWatermark, s.LastStable = p.HighWatermark, p.LastStableOffset
			t.sample(s, resp)
		}
	}
	if q.Version >= 7 && q.SessionEpoch > 0 {
		// Partitions an incremental response leaves out have not
		// changed: their high watermark is the one last given.
		for _, s := range t.asked {
			if s != nil && s.asked == t.tick && s.answered != t.tick {
				t.sample(s, resp)
			}
		}
	}
	return t.out
}

// get returns k's series, made if its role has room (counted in
// t.dropped if not).
func (t *LagTable) get(k LagKey, req *Message) *LagSeries {
	if s := t.series[k]; s != nil {
		return s
	}
	limit := t.limit()
	r := roleIndex(k.Replica)
	if t.ofRole[r] >= limit {
		t.dropped[r]++
		return nil
	}
	if t.series == nil {
		t.series = make(map[LagKey]*LagSeries)
	}
	s := &LagSeries{Key: k, TopicName: req.TopicName(k.Partition.Topic, k.Partition.TopicID), Offset: -1, HighWatermark: -1, LastStable: -1,
		Index: len(t.all), RoleIndex: t.ofRole[r], InAll: len(t.all) < limit}
	// Whatever is among the first limit of both roles is among the
	// first of its own, so InAll marks the first limit series of both
	// roles exactly: those a table bounded to limit over both would
	// have followed.
	t.series[k] = s
	t.all = append(t.all, s)
	t.ofRole[r]++
	return s
}

func (t *LagTable) limit() int {
	if t.Max <= 0 {
		return DefaultMaxLagSeries
	}
	return t.Max
}

// roleIndex is a series' place in LagTable.ofRole: 0 for a consumer's
// (replica -1), 1 for a follower's.
func roleIndex(replica int32) int {
	if replica >= 0 {
		return 1
	}
	return 0
}

// RoleDropped counts the partitions asked by fetchers of role r
// (RoleConsumer or RoleReplication) beyond the first Max series of that
// role, not followed: what an owner following that role alone misses.
func (t *LagTable) RoleDropped(r cluster.Role) int64 {
	if t == nil {
		return 0
	}
	switch r {
	case cluster.RoleConsumer:
		return t.dropped[0]
	case cluster.RoleReplication:
		return t.dropped[1]
	}
	return 0
}

// sample takes a point of s at resp, if both sides are known.
func (t *LagTable) sample(s *LagSeries, resp *Message) {
	if s.Offset < 0 || s.HighWatermark < 0 {
		return
	}
	bound := s.HighWatermark
	if s.ReadCommitted && s.LastStable >= 0 {
		bound = s.LastStable
	}
	s.Samples++
	t.out = append(t.out, LagSample{S: s, P: LagPoint{Time: resp.Time, File: resp.File, Packet: resp.Packet, Conn: resp.Conn.ID,
		Offset: s.Offset, HighWatermark: s.HighWatermark, Lag: max(bound-s.Offset, 0)}})
}

// Len is how many series the table follows.
func (t *LagTable) Len() int { return len(t.all) }

// Series returns the series of role r with at least one point (r
// RoleConsumer or RoleReplication; RoleNone: both roles, those InAll):
// consumers first, then followers by node id, each by client id, host,
// topic and partition.
func (t *LagTable) Series(r cluster.Role) []*LagSeries {
	if t == nil {
		return nil
	}
	var out []*LagSeries
	for _, s := range t.all {
		if s.Samples > 0 && (r == cluster.RoleNone && s.InAll || r != cluster.RoleNone && s.Role() == r) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(x, y *LagSeries) int {
		a, b := &x.Key, &y.Key
		return cmp.Or(cmp.Compare(a.Replica, b.Replica), strings.Compare(a.Client.ID, b.Client.ID), a.Client.Host.Compare(b.Client.Host),
			strings.Compare(x.TopicName, y.TopicName), bytes.Compare(a.Partition.TopicID[:], b.Partition.TopicID[:]), cmp.Compare(a.Partition.Num, b.Partition.Num))
	})
	return out
}

// LagStates keeps an owner's state of each series by an index of the
// series (LagSeries.Index, or RoleIndex for an owner of one role): in pages,
// so that growing copies nothing and a state stays where it is. The zero
// value is ready.
type LagStates[T any] struct {
	pages []*[lagPage]T
}

// lagPage is how many states a page holds.
const lagPage = 64

// At returns the state of index i, made (zero) if new.
func (st *LagStates[T]) At(i int) *T {
	for i/lagPage >= len(st.pages) {
		st.pages = append(st.pages, new([lagPage]T))
	}
	return &st.pages[i/lagPage][i%lagPage]
}

// Get returns the state of index i, nil if none was ever made on its page.
func (st *LagStates[T]) Get(i int) *T {
	if i < 0 || i/lagPage >= len(st.pages) {
		return nil
	}
	return &st.pages[i/lagPage][i%lagPage]
}

// Samples returns the points the last Fetch took: in a handler's
// OnExchange, those of the exchange delivered (LagUser); none at other
// times. The slice is reused.
func (t *LagTable) Samples() []LagSample {
	if t == nil {
		return nil
	}
	return t.out
}

// LagUser is a handler that follows lag from the Delivery's one table: the
// Delivery, when it is made, offers it the table, and feeds the table only
// if some handler takes it (UseLag returns true). Then it feeds it every
// request (Request) before the handlers' OnRequest and every exchange
// (Fetch) before their OnExchange, which read the exchange's samples
// (Samples: not on the Exchange, which would grow every exchange's
// allocation for the few that are Fetches) and, at the end, the table's
// series, groups and drop counts. The table is written on the delivering goroutine: a handler read
// from another (the TUI's) keeps a table of its own instead.
type LagUser interface {
	UseLag(t *LagTable) bool
}
