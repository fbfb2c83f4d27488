package copies

import (
	"math/bits"
	"net/netip"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
)

// Path is how a copy of a batch travelled.
type Path uint8

// The paths, in the order pathNames lists them.
const (
	Produce       Path = iota // a Produce request: the producer's bytes
	ConsumerFetch             // a client's Fetch response
	ReplicaFetch              // a follower's Fetch response
	RaftFetch                 // a KRaft voter's or observer's Fetch response
)

func (p Path) String() string {
	switch p {
	case Produce:
		return "produce"
	case ConsumerFetch:
		return "consumer-fetch"
	case ReplicaFetch:
		return "replica-fetch"
	case RaftFetch:
		return "raft-fetch"
	}
	return "?"
}

// Stored reports a copy a broker served: what it holds.
func (p Path) Stored() bool { return p != Produce }

// Replicated reports a copy fetched by a replica (follower or voter).
func (p Path) Replicated() bool { return p == ReplicaFetch || p == RaftFetch }

// FetchPath is the path of a Fetch's copies, by the request's role.
func FetchPath(m *flows.Message) Path {
	switch m.Role {
	case cluster.RoleReplication:
		return ReplicaFetch
	case cluster.RoleRaft:
		return RaftFetch
	}
	return ConsumerFetch
}

// Source is one connection and path that carried copies of batches, with
// what is needed to name the nodes at each end once the capture has been
// read (the nodes are learnt as it goes).
type Source struct {
	Path     Path
	Conn     int
	ClientID string
	Client   netip.AddrPort
	Server   netip.AddrPort
	Fetcher  int32 // the node a replica's Fetch speaks for, -1 if none
}

// ServerNode is the node that served (or, for a produce, received) the
// copy, -1 if unknown.
func (s *Source) ServerNode(n *cluster.Nodes) int32 {
	if n == nil {
		return -1
	}
	return n.Server(s.Server)
}

// HolderNode is the node that holds the copy once it has arrived: the
// fetching replica for replica and raft fetches, else the server.
func (s *Source) HolderNode(n *cluster.Nodes) int32 {
	if !s.Path.Replicated() {
		return s.ServerNode(n)
	}
	if s.Fetcher >= 0 {
		return s.Fetcher
	}
	if n == nil {
		return -1
	}
	return n.Host(s.Client.Addr())
}

// ServerLabel is "node 2 (172.31.2.2:9092)" or the address.
func (s *Source) ServerLabel(n *cluster.Nodes) string {
	if n == nil {
		return s.Server.String()
	}
	return n.Label(s.Server, true)
}

// HolderLabel names the holder of a copy for a person.
func (s *Source) HolderLabel(n *cluster.Nodes) string {
	switch s.Path {
	case ReplicaFetch, RaftFetch:
		if id := s.HolderNode(n); id >= 0 {
			return "node " + strconv.Itoa(int(id)) + " (" + s.ClientID + ", " + s.Client.Addr().String() + ")"
		}
		return s.ClientID + " (" + s.Client.Addr().String() + ")"
	case ConsumerFetch:
		return "consumer " + s.ClientID + " (" + s.Client.String() + ") reading from " + s.ServerLabel(n)
	}
	return "producer " + s.ClientID + " (" + s.Client.String() + ") writing to " + s.ServerLabel(n)
}

// Sources interns the sources of copies so that per-batch state holds a
// small index; past MaxSources, new sources share index 0, "unknown"
// (never the case in practice: a source is a connection).
type Sources struct {
	list []Source
	idx  map[sourceKey]uint32
	// cache holds recent lookups by connection and path: a connection
	// carries the copies of one source, over and over. It is sized for
	// the connections numbered so far, up to maxSourceCache slots: a
	// capture of a few connections never needs the 512 KiB.
	cache []sourceSlot
	// copy is the Copy handed to Copies' fn, reused.
	copy Copy
}

// MaxSources bounds the sources interned.
const MaxSources = 8192

// maxSourceCache is the most slots of Sources' cache, a power of two.
const maxSourceCache = 1 << 14

type sourceKey struct {
	conn     int
	path     Path
	fetcher  int32
	clientID string
}

type sourceSlot struct {
	clientID string
	conn     int32
	fetcher  int32
	i        uint32
	path     Path
	ok       bool
}

// Of returns the index of the source of m's copies, by path.
func (cs *Sources) Of(m *flows.Message, path Path) uint32 {
	if cs.idx == nil {
		cs.idx = make(map[sourceKey]uint32)
		cs.list = append(cs.list, Source{Path: path, ClientID: "?", Fetcher: -1})
	}
	fetcher := int32(-1)
	if path.Replicated() {
		fetcher = m.Fetcher.ID()
	}
	k := sourceKey{conn: m.Conn.ID, path: path, fetcher: fetcher, clientID: m.Client.ID}
	if h := uint(k.conn)<<2 | 3; h >= uint(len(cs.cache)) && len(cs.cache) < maxSourceCache {
		// Grown by replacing: a cache, emptied, loses nothing.
		cs.cache = make([]sourceSlot, min(max(uint(256), 1<<bits.Len(h)), maxSourceCache))
	}
	slot := &cs.cache[(uint(k.conn)<<2|uint(path))%uint(len(cs.cache))]
	if slot.ok && int(slot.conn) == k.conn && slot.path == path && slot.fetcher == fetcher && slot.clientID == k.clientID {
		return slot.i
	}
	i, ok := cs.idx[k]
	if !ok {
		if len(cs.list) >= MaxSources {
			return 0 // not cached: the map is full for good
		}
		i = uint32(len(cs.list))
		cs.list = append(cs.list, Source{Path: path, Conn: m.Conn.ID, ClientID: m.Client.ID,
			Client: m.Conn.Client, Server: m.Conn.Server, Fetcher: fetcher})
		cs.idx[k] = i
	}
	if int(int32(k.conn)) == k.conn {
		*slot = sourceSlot{clientID: k.clientID, conn: int32(k.conn), fetcher: fetcher, i: i, path: path, ok: true}
	}
	return i
}

// Get returns source i.
func (cs *Sources) Get(i uint32) *Source { return &cs.list[i] }

// Copy is one copy of a batch an exchange carried.
type Copy struct {
	B *flows.BatchRef
	// I is its index in Msg.Batches.
	I int
	// Base is its offset: a fetched batch's own, a produced one's from
	// the Produce response (flows.ProducedBatches); -1 if the partition
	// was refused (Code) or the broker gave none, or the Produce was not
	// answered.
	Base int64
	Code int16
	// Answered is false for a Produce without a response (acks=0, never
	// answered, not captured).
	Answered bool
	// Msg is the message that carried the copy, Src its source.
	Msg  *flows.Message
	Src  uint32
	Path Path
}

// Copies calls fn with each copy of a batch that exchange x carried: a
// Produce's batches (those of partitions its response answers,
// x.Produced, or all of them if it has none), a Fetch response's. The
// batches' bytes (B.Raw) are there for a Fetch's copies only: flows
// released the request's. The Copy is valid during the call.
func (cs *Sources) Copies(x *detectors.Exchange, fn func(c *Copy)) {
	req, resp := x.Req, x.Resp
	if req == nil {
		return
	}
	c := &cs.copy
	defer func() { *c = Copy{} }()
	switch kmsg.Key(req.Key) {
	case kmsg.Produce:
		*c = Copy{Msg: req, Src: cs.Of(req, Produce), Path: Produce}
		if resp == nil {
			for i := range req.Batches {
				c.B, c.I, c.Base = &req.Batches[i], i, -1
				fn(c)
			}
			return
		}
		c.Answered = true
		ps := x.Produced()
		for i := range ps {
			c.B, c.I, c.Base, c.Code = ps[i].B, ps[i].I, ps[i].Base, ps[i].Code
			fn(c)
		}
	case kmsg.Fetch:
		if resp == nil || len(resp.Batches) == 0 {
			return
		}
		path := FetchPath(req)
		*c = Copy{Msg: resp, Src: cs.Of(req, path), Path: path, Answered: true}
		for i := range resp.Batches {
			c.B, c.I, c.Base = &resp.Batches[i], i, resp.Batches[i].BaseOffset
			fn(c)
		}
	}
}
