package packet

import (
	"net/netip"
	"time"

	"github.com/kfsniff/kfsniff/capture"
)

// Bounds are the user's bounds the Sharder and Defrag keep to (the
// pipeline fills them from the analysis' configuration; zero fields take
// the defaults).
type Bounds struct {
	// FragTimeout (capture time) gives up an IP datagram whose fragments
	// have not all come; MaxFragDatagrams and MaxFragBytes bound the
	// datagrams being reassembled and the bytes they hold (the oldest is
	// given up first). See defrag.go.
	FragTimeout      time.Duration
	MaxFragDatagrams int
	MaxFragBytes     int
	// IdleTimeout and ReorderWindow are the analyzers': an ended
	// connection's entry in the Sharder's table may go after two of each
	// without a packet (IdleTimeout 0: never).
	IdleTimeout, ReorderWindow time.Duration
	// ByHosts shards connections by their pair of hosts instead of by
	// load (with TLS key logs: see hostHash).
	ByHosts bool
}

// Sharder assigns packets to shards by TCP connection, both directions of
// a connection to the same shard, for running one deferred flows.Analyzer per
// shard (with flows.Worker.Defragmented): a connection goes to the shard least
// loaded at its first packet, and stays there (balance.go). IP fragments
// carry no ports but in their first fragment, so the Sharder reassembles
// them itself, before sharding, and sends each datagram to its
// connection's shard.
type Sharder struct {
	hdr  Headers
	n    int
	frag *Defrag
	work Work
	own  *owners // nil for one shard
}

// NewSharder returns a Sharder over n shards within b.
func NewSharder(n int, b Bounds) *Sharder {
	s := &Sharder{n: n, frag: NewDefrag(&b)}
	if n > 1 {
		s.own = newOwners(n, &b)
	}
	s.hdr.Init()
	return s
}

// HashedPackets counts the packets sharded by their 4-tuple's hash
// because the table of connections was full of live ones (balance.go).
func (s *Sharder) HashedPackets() int64 {
	if s.own == nil {
		return 0
	}
	return s.own.hashed
}

// Route hands what packet p asks of the analyzers to emit, in order: the
// losses of datagrams given up at p (to their connection's shard), p
// itself, and the datagrams p completes. Packets that are not TCP (IP
// fragments among them) go to shard 0: any shard would do, they only add
// to counters. The Work and its packet are valid only during emit.
func (s *Sharder) Route(p *capture.Packet, emit func(shard int, w *Work)) {
	if s.frag.Pending() {
		s.frag.Expire(p.Time)
		s.losses(emit)
	}
	s.work = Work{Kind: WorkPacket, Packet: p}
	src, dst, flags, ok := QuickTCP(p)
	if ok {
		emit(s.place(p, src, dst, flags, false), &s.work)
		return
	}
	// Whatever the quick look does not know, gopacket decides, as for the
	// Analyzer.
	kind, src, dst, _ := s.hdr.Parse(p)
	if kind == TCP {
		emit(s.place(p, src, dst, 0, true), &s.work)
		return
	}
	emit(0, &s.work)
	if kind == Fragment {
		s.reassemble(p, emit, 0)
	}
}

// reassemble does what flows.Analyzer.reassemble does, emitting the
// datagrams.
func (s *Sharder) reassemble(p *capture.Packet, emit func(int, *Work), depth int) {
	if !Reassembles(&s.hdr.Frag) {
		return
	}
	dg := s.frag.Add(p, &s.hdr.Frag)
	s.losses(emit)
	if dg == nil || depth >= MaxNesting {
		return
	}
	kind, src, dst, _ := s.hdr.Parse(dg)
	shard := 0
	if kind == TCP {
		shard = s.place(dg, src, dst, 0, true)
	}
	s.work = Work{Kind: WorkDatagram, Packet: dg}
	emit(shard, &s.work)
	if kind == Fragment {
		s.reassemble(dg, emit, depth+1)
	}
}

// End emits the losses of the datagrams still in progress at the end of
// the capture; call it after the last packet.
func (s *Sharder) End(emit func(shard int, w *Work)) {
	s.frag.End()
	s.losses(emit)
}

func (s *Sharder) losses(emit func(int, *Work)) {
	for _, l := range s.frag.Lost {
		shard := 0
		if l.TCP {
			shard = s.shard(l.Src, l.Dst)
		}
		s.work = Work{Kind: WorkLoss, Loss: l}
		emit(shard, &s.work)
	}
	s.frag.Lost = s.frag.Lost[:0]
}

// shard returns the shard of the connection between src and dst, for a
// datagram's loss: its connection's if it has one, else any (no analyzer
// holds anything of a connection the table does not know, but a hashed
// one's, hashed again).
func (s *Sharder) shard(src, dst netip.AddrPort) int {
	if s.n <= 1 {
		return 0
	}
	k, _ := MakeKey(src, dst)
	if i, ok := s.own.idx[k]; ok {
		return int(s.own.slots[i].shard)
	}
	return s.own.hash(k)
}

// TCP flags as the quick look reads them.
const (
	flagFIN = 0x01
	flagSYN = 0x02
	flagRST = 0x04
)

// place returns the shard of the TCP segment in p from src to dst (a
// connection's first packet gives it one), and notes on the connection
// what the segment says of its end: decoded says s.hdr holds p's TCP
// header; otherwise flags are its flags as the quick look read them, and
// gopacket decodes it if they, or a connection attempt pending, may make
// it matter.
func (s *Sharder) place(p *capture.Packet, src, dst netip.AddrPort, flags uint8, decoded bool) int {
	if s.n <= 1 {
		return 0
	}
	o := s.own
	now := p.Time.UnixNano()
	o.tick(now)
	k, fromB := MakeKey(src, dst)
	w, i := o.lookup(k, now)
	if i < 0 {
		return w
	}
	e := &o.slots[i]
	e.last = now
	o.add(i, w, uint64(len(p.Data))+pktCost)
	if decoded || flags&(flagSYN|flagFIN|flagRST) != 0 || e.state&ownSYN != 0 {
		if !decoded {
			if kind, _, _, _ := s.hdr.Parse(p); kind != TCP {
				return w // the analyzer rejects it too
			}
		}
		o.saw(i, &s.hdr.TCP, fromB)
	}
	return w
}

// WorkKind says what a Work asks of an analyzer.
type WorkKind uint8

// What a Work asks.
const (
	WorkPacket   WorkKind = iota // analyse a captured packet (Packet)
	WorkDatagram                 // analyse an IP datagram reassembled from fragments
	WorkLoss                     // count a datagram that could not be reassembled
)

// Work is one thing to do for one analyzer of a sharded analysis
// (flows.Analyzer.Do), at one captured packet (see Sharder.Route).
type Work struct {
	Kind   WorkKind
	Packet *capture.Packet // WorkPacket, WorkDatagram
	Loss   FragLoss        // WorkLoss
	// Seq is the place of the captured packet among all packets of the
	// analysis (see flows.Analyzer.PacketAt).
	Seq uint64
}
