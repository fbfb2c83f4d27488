package flows

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/reassembly"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/packet"
	"github.com/kfsniff/kfsniff/tlsdec"
)

// Config holds the analysis settings. The zero value is not valid; start
// from DefaultConfig.
type Config struct {
	// TLSKeys decrypts connections that begin with a ClientHello whose
	// session it has keys for (--tls-keylog); nil: TLS is not decrypted.
	TLSKeys  *tlsdec.Keys
	Ports    *Ports
	MaxFrame int // frames larger than this are framing errors
	// MaxPending bounds the requests waiting for a response per
	// connection; older ones are dropped and counted.
	MaxPending int
	// ReorderWindow is how long (capture time) reassembly waits for a
	// missing segment before skipping the hole.
	ReorderWindow time.Duration
	// MaxBufferedPages bounds out-of-order data per connection
	// (gopacket pages of 1900 bytes).
	MaxBufferedPages int
	// IdleTimeout (capture time) drops the reassembly state of a
	// connection with no packet for that long; traffic resuming on it
	// continues the same connection. Zero keeps state forever.
	IdleTimeout time.Duration
	// MaxConns bounds the connections reported one by one; beyond it the
	// oldest (closed ones first) are folded into Stats.Evicted.
	MaxConns int
	// KeepClosed (capture time), if not zero, folds a connection closed
	// (FIN both ways, or RST) and without a packet for that long into
	// Stats.Evicted, counted in Stats.Evicted.Aged: a live capture left
	// running keeps the records of the connections open and recently
	// closed, not of every short-lived one of the last hours. Zero (the
	// default, and offline) keeps them all up to MaxConns.
	KeepClosed time.Duration
	// MaxPendingTotal bounds the requests waiting for a response across
	// all connections; above it the oldest waiting anywhere is dropped and
	// counted unanswered, as for MaxPending. Zero: no total bound.
	MaxPendingTotal int
	// BufferBudget bounds the bytes (capacity) the framers of all
	// connections may hold in partial frames; above it the largest partial
	// frame is dropped and its bytes are skipped as "budget". Zero: no
	// bound. An analysis split over N analyzers gives each BufferBudget/N.
	BufferBudget int
	// MaxStreams bounds the TCP connections tracked at once; above it
	// the older half not heard from since they opened is closed early
	// (connection churn).
	MaxStreams int
	// FragTimeout (capture time) gives up an IP datagram whose fragments
	// have not all come; MaxFragDatagrams and MaxFragBytes bound the
	// datagrams being reassembled and the bytes they hold (the oldest is
	// given up first). See packet/defrag.go.
	FragTimeout      time.Duration
	MaxFragDatagrams int
	MaxFragBytes     int
}

// Worker is how an engine that splits one capture among analyzers (the
// sharded pipeline) runs one of them: what a lone analyzer, made by New
// with the user's bounds alone, never needs. NewWorker takes it.
type Worker struct {
	// Sink takes the analyzer's events instead of handlers (the
	// analyzer is deferred): flushing on the clock is left to the
	// caller (Flush); see Event and Delivery. It must be set.
	Sink func(Event)
	// StablePackets says that the bytes of every packet
	// given to the analyzer stay as they are until the events made at
	// that packet have been delivered (the sharded engine keeps its
	// rounds of packets so): a Produce request that lies whole in its
	// packet is then handed on as a view of it instead of a copy, as
	// nothing of it is used after its delivery (see own).
	StablePackets bool
	// Shards is how many analyzers split the connections of one capture
	// among them (0 or 1: this one has them all); each keeps its share of
	// the fixed bounds (connection attempts, idle connections).
	Shards int
	// Listeners, if set, are the endpoints seen accepting connections,
	// learned by whoever reads the packets in order (Listeners.Observe),
	// with packets given to the analyzer by PacketAt at the same places.
	// If nil, the analyzer learns them from its own packets.
	Listeners *Listeners
	// Defragmented says IP fragments are reassembled before this
	// analyzer, by the packet.Sharder that feeds it: fragments are only
	// counted, and reassembled datagrams and the losses come through Do.
	Defragmented bool
}

// defaultPorts is DefaultPorts parsed, once: a Ports is an 8 KiB set no
// one changes, and DefaultConfig is asked for at start-up several times.
var defaultPorts = sync.OnceValue(func() *Ports {
	p, _ := ParsePorts(DefaultPorts)
	return p
})

// DefaultConfig returns the defaults documented in the README.
func DefaultConfig() Config {
	return Config{
		Ports:            defaultPorts(),
		MaxFrame:         decode.DefaultMaxFrame,
		MaxPending:       100000,
		ReorderWindow:    2 * time.Second,
		MaxBufferedPages: 4096,
		IdleTimeout:      10 * time.Minute,
		MaxConns:         100000,
		MaxStreams:       20000,
		MaxPendingTotal:  100000,
		BufferBudget:     64 << 20,
		FragTimeout:      packet.DefaultFragTimeout,
		MaxFragDatagrams: packet.DefaultFragDatagrams,
		MaxFragBytes:     packet.DefaultFragBytes,
	}
}

// keepFirst makes p the earlier of p and o: by file, then packet number
// (exact for one file; for several merged by time, the earliest file's).
// Packet 0 is none.
func (p *Problem) keepFirst(o Problem) {
	if o.Packet != 0 && (p.Packet == 0 || o.File < p.File || o.File == p.File && o.Packet < p.Packet) {
		*p = o
	}
}

// Stats are capture-wide counters.
type Stats struct {
	Packets   int64
	Bytes     int64
	NonIP     int64 // frames with no IPv4/IPv6 (ARP, LLC, ...)
	NonTCP    int64 // IP packets that are not TCP (UDP, ICMP, ...)
	Fragments int64 // IP fragments (IPv4, or IPv6 fragment header)
	// Reassembled counts the IP datagrams rebuilt from fragments;
	// FragLost the datagrams that could not be, by reason
	// (packet.FragMissing, ...), and FragLostBytes the bytes of their
	// fragments. Losses are also counted on the connection when the first
	// fragment named it.
	Reassembled   int64
	FragLost      map[string]int64
	FragLostBytes int64
	Truncated     int64 // packets cut by the snaplen
	BadPackets    int64 // headers that do not decode
	TCPPackets    int64
	KafkaPackets  int64
	OtherTCP      int64 // TCP connections not recognised as Kafka
	FirstTime     time.Time
	LastTime      time.Time
	// FirstBad is the first undecodable packet, for the report.
	FirstBad Problem
	// UnknownAPIs counts request frames kmsg cannot decode, by key and
	// version, for the first MaxUnknownAPIs pairs; UnknownAPIsNotListed
	// counts the requests of further pairs (a wire value keys this
	// table: each pair would cost an entry).
	UnknownAPIs          map[UnknownAPI]int
	UnknownAPIsNotListed int64
	// InternalErrors counts recovered panics (connections abandoned);
	// FirstInternal places the first met outside any connection (one met
	// on a connection is on it: Conn.Broken).
	InternalErrors int64
	FirstInternal  Problem
	// IdleEvicted counts connections whose reassembly state was dropped
	// after IdleTimeout without packets.
	IdleEvicted int64
	// IdleForgotten counts quiet connections forgotten from the full
	// table of those remembered for resumption: one that speaks again is
	// counted as another connection.
	IdleForgotten int64
	// KeptDropped counts requests whose kept record fingerprints (Keep)
	// were dropped before their response, to stay within the bounds: the
	// duplicate-batches rule compared those batches by CRC only.
	KeptDropped int64
	// Evicted sums the connections dropped from the table for MaxConns.
	Evicted EvictedConns
	// TLS counts the TLS sessions met with a key log (tls.go).
	TLS TLSStats
}

// EvictedConns sums the counters of connections no longer listed.
type EvictedConns struct {
	// Conns counts them all; Aged those of them folded for
	// Config.KeepClosed, the rest were folded for MaxConns.
	Conns, Aged                                             int
	Requests, Responses, ErrorResponses, Unmatched          int
	Unanswered, NoResponse, Gaps, FramingErrors, DecodeErrs int
	NotCaptured                                             int
	Lost                                                    int64
	Skipped                                                 map[string]int64
}

// UnknownAPI is an API key and version kmsg does not know.
type UnknownAPI struct{ Key, Version int16 }

// Analyzer turns packets into Kafka messages and exchanges. It is not safe
// for concurrent use: one goroutine feeds it packets.
type Analyzer struct {
	// tlsHeld: bytes TLS sessions hold for their keys (tls.go), within
	// cfg.BufferBudget.
	tlsHeld int64
	cfg     Config
	w       Worker // the engine's options (NewWorker); zero for New
	dl      *Delivery
	phase   uint8
	stats   Stats
	conns   []*Conn
	nodes   *cluster.Nodes
	streams map[packet.Key]*stream
	idle    map[packet.Key]*Conn
	// gone remembers the quiet connections dropped from the table
	// (MaxConns) by a 64-bit hash of their 4-tuple (goneSeed: random per
	// run), so that one speaking again is not counted as another
	// connection (stream.continues): 24 to 37 bytes each (measured, Go
	// 1.26 maps) where a 4-tuple and pointer cost 73 to 115.
	gone     map[uint64]struct{}
	goneSeed maphash.Seed
	lastIdle time.Time
	lastAged time.Time // capture time of the last foldClosed
	// born holds the creation times of recent streams, oldest first, to
	// pick how far back to close under churn (at most MaxStreams+2 of
	// them: noteBorn).
	born      []time.Time
	connScan  int
	lastID    int
	syns      map[packet.Key]*synState
	synq      synQueue
	pool      *reassembly.StreamPool
	asm       *reassembly.Assembler
	ctx       packetCtx
	hdr       packet.Headers
	tcp       *layers.TCP
	lastFlush time.Time
	clock     FlushClock
	closed    bool
	flushNow  bool
	// lastQueued is when a segment last arrived ahead of a hole.
	lastQueued time.Time
	// at is the place of the packet at work: the packet (or datagram)
	// being analysed, the held delivery being framed (stream.start), or,
	// outside packet work, the last packet given at the latest time seen
	// (quiet), the capture's end at Close. Reassembly's callbacks read it
	// (they are called with no place of ours); the framer is handed it.
	at Place
	// last is the place of the last packet given.
	last Place
	ar   arena
	// spare takes big frame buffers back from the delivery; fpool keeps
	// big buffers for reuse.
	spare chan []byte
	fpool framePool
	// payload is the TCP payload of the packet being reassembled, with
	// Worker.StablePackets (stableView).
	payload []byte
	// memoHeld is what the connections' memos hold (memo.go), and wide.
	memoHeld int64
	// wide is the answers remembered for all connections (decodeWide).
	wide *memo
	// msgs are the messages given back once delivered (msgpool.go).
	msgs msgPool
	// fixed bounds, this analyzer's share (Config.Shards)
	maxSYNs, maxIdle, maxGone int
	// waits and bufs bound what all connections hold together (see
	// Config.MaxPendingTotal and Config.BufferBudget).
	waits waits
	bufs  buffers
	// seq is the place of the packet being processed among all packets
	// of the analysis (see Listeners).
	seq       uint64
	listeners *Listeners
	learn     bool
	// holders are the connections held until their client side is known,
	// held the bytes they hold together (orient.go).
	holders []*stream
	held    int64
	// order is the place of the first packet of the stream at work, put
	// on its events (Event.Order); gathering collects events into
	// gathered while several streams may emit at once (see gather).
	order     uint64
	gathering int
	gathered  []Event
	// frag reassembles IP fragments (nil with Config.Defragmented).
	frag *packet.Defrag
	// gens numbers the streams' reassembly keys; superseded are the
	// streams a new connection on their 4-tuple replaced while
	// reassembly still held some of their bytes; rst is the segment
	// that drops a finished stream's reassembly state (life.go).
	gens       uint64
	superseded []*stream
	rst        layers.TCP
	rstHdr     [20]byte
	// hot holds some of the streams, each in its key's slot and each
	// its key's stream in streams (see streamOf).
	hot [packet.HotSlots]*stream
}

// deferred reports an analyzer handing its events to its Worker's Sink.
func (a *Analyzer) deferred() bool { return a.w.Sink != nil }

// New returns an Analyzer delivering events to the handlers, each of which
// implements any of RequestHandler, ExchangeHandler and ConnHandler.
func New(cfg Config, handlers ...Handler) *Analyzer {
	return newAnalyzer(cfg, Worker{}, handlers)
}

// NewWorker returns an Analyzer that is one of the workers of an engine,
// handing its events to w.Sink.
func NewWorker(cfg Config, w Worker) *Analyzer {
	if w.Sink == nil {
		panic("flows: NewWorker without a Sink")
	}
	return newAnalyzer(cfg, w, nil)
}

func newAnalyzer(cfg Config, w Worker, handlers []Handler) *Analyzer {
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultConfig().MaxStreams
	}
	a := &Analyzer{
		cfg:      cfg,
		w:        w,
		dl:       newDelivery(handlers),
		streams:  make(map[packet.Key]*stream),
		idle:     make(map[packet.Key]*Conn),
		gone:     make(map[uint64]struct{}),
		goneSeed: maphash.MakeSeed(),
		syns:     make(map[packet.Key]*synState),
	}
	// A deferred analyzer's nodes are the Delivery's of whoever delivers
	// its events; it never reads them itself.
	a.nodes = a.dl.nodes
	a.msgs = newMsgPool()
	if a.deferred() {
		a.spare = make(chan []byte, 16)
		a.ar.spares = make(chan []byte, arenaSpares)
	}
	shards := max(1, w.Shards)
	// cfg.MaxConns is this analyzer's share already (pipeline).
	a.maxSYNs, a.maxIdle = max(1, maxSYNs/shards), max(1, maxIdle/shards, cfg.MaxConns)
	a.maxGone = max(1, maxGone/shards, 16*cfg.MaxConns)
	a.stats.UnknownAPIs = make(map[UnknownAPI]int)
	a.pool = reassembly.NewStreamPool((*factory)(a))
	a.asm = reassembly.NewAssembler(a.pool)
	a.asm.MaxBufferedPagesPerConnection = cfg.MaxBufferedPages
	a.asm.MaxBufferedPagesTotal = cfg.MaxBufferedPages * 16
	a.hdr.Init()
	a.tcp = &a.hdr.TCP
	a.listeners = w.Listeners
	if a.listeners == nil {
		a.listeners, a.learn = NewListeners(), true
	}
	if !w.Defragmented {
		a.frag = packet.NewDefrag(&packet.Bounds{FragTimeout: cfg.FragTimeout, MaxFragDatagrams: cfg.MaxFragDatagrams, MaxFragBytes: cfg.MaxFragBytes})
	}
	return a
}

// packetCtx is the reassembly context of the packet being processed. One
// value is reused: kfsniff takes packet numbers from the analyzer's current
// packet, never from contexts kept by reassembly.
type packetCtx struct{ ci gopacket.CaptureInfo }

func (c *packetCtx) GetCaptureInfo() gopacket.CaptureInfo { return c.ci }

// streamOf returns the stream of key, nil if none: from hot, where the
// streams last looked up stay until another takes their slot, or else
// from the map, whose look-up (hashing and comparing a 36-byte key, cache
// misses on busy captures) was 4 % of one worker's time on the small
// capture.
func (a *Analyzer) streamOf(key packet.Key) *stream {
	h := &a.hot[key.Slot()]
	if s := *h; s != nil && s.key == key {
		return s
	}
	s := a.streams[key]
	if s != nil {
		*h = s
	}
	return s
}

// setStream makes s the stream of its key.
func (a *Analyzer) setStream(s *stream) {
	a.streams[s.key] = s
	a.hot[s.key.Slot()] = s
}

// dropStream forgets s as the stream of its key, if it is.
func (a *Analyzer) dropStream(s *stream) {
	if a.streams[s.key] == s {
		delete(a.streams, s.key)
	}
	if h := &a.hot[s.key.Slot()]; *h == s {
		*h = nil
	}
}

// Stats returns the capture-wide counters.
func (a *Analyzer) Stats() *Stats { return &a.stats }

// nextID numbers connections from 1, never reusing a number.
func (a *Analyzer) nextID() int {
	if a.deferred() {
		return 0 // numbered when delivered (Delivery)
	}
	a.lastID++
	return a.lastID
}

// maxIdle bounds the quiet connections still listed remembered for
// resumption (idle), raised to MaxConns: the table holds their records
// anyway. maxGone bounds those dropped from the table (gone), raised to 16
// times MaxConns (1.6 million by default, 38 MB at most): a run with
// more quiet connections than that forgets some, and each one forgotten
// that speaks again is counted again (Stats.IdleForgotten says how many
// were forgotten).
const (
	maxIdle = 65536
	maxGone = 1 << 18
)

// goneHash is the hash gone remembers a 4-tuple by. Two 4-tuples of one
// run share one with a chance of about n*n/2^65 for n remembered (1e-7 at
// 1.6 million): a connection without a handshake on the second would be
// taken for the first resuming, counted once.
func (a *Analyzer) goneHash(key packet.Key) uint64 { return maphash.Comparable(a.goneSeed, key) }

// rememberGone remembers a quiet connection dropped from the table,
// forgetting another when gone is full.
func (a *Analyzer) rememberGone(key packet.Key) {
	if len(a.gone) >= a.maxGone {
		for h := range a.gone {
			delete(a.gone, h)
			a.stats.IdleForgotten++
			break
		}
	}
	a.gone[a.goneHash(key)] = struct{}{}
}

// addConn appends a new connection, folding the oldest one (closed ones
// first) into Stats.Evicted when the table is full.
func (a *Analyzer) addConn(c *Conn) {
	a.conns = append(a.conns, c)
	key, _ := packet.MakeKey(c.Client, c.Server)
	if s := a.streamOf(key); s != nil && s.conn == c {
		// IP datagrams of the connection lost before it was known.
		for _, l := range s.lostFrags {
			c.fragLost(int64(l.bytes), l.problem)
		}
		s.lostFrags = nil
	}
	if a.cfg.MaxConns <= 0 || len(a.conns) <= a.cfg.MaxConns {
		return
	}
	victim := -1
	for i := a.connScan; i < len(a.conns) && i < a.connScan+1024; i++ {
		if a.conns[i].Closed || a.conns[i].Reset {
			victim = i
			break
		}
	}
	if victim < 0 {
		victim = 0
	}
	a.connScan = victim
	a.evict(a.conns[victim])
	a.conns = append(a.conns[:victim], a.conns[victim+1:]...)
}

func (a *Analyzer) evict(c *Conn) {
	key, _ := packet.MakeKey(c.Client, c.Server)
	if a.idle[key] == c {
		// Quiet, its reassembly state dropped (idle timeout or churn):
		// the idle table would pin the whole record. Only its 4-tuple
		// is remembered (gone), so that traffic resuming on it is not
		// counted as another connection (stream.continues).
		delete(a.idle, key)
		a.rememberGone(key)
	}
	c.dropped = true
	if s := a.streamOf(key); s != nil && s.conn == c && !s.done {
		// Still carrying traffic: what it carries until its stream
		// ends is counted on the record (its requests, their
		// responses), folded then (stream.ReassemblyComplete). Folded
		// now, that traffic was lost from the totals and requests
		// answered later were counted unanswered.
		c.foldLate = true
		return
	}
	a.foldEvicted(c)
}

// foldEvicted folds a connection dropped from the table into
// Stats.Evicted.
func (a *Analyzer) foldEvicted(c *Conn) {
	// Requests still pending on it will never be reported unanswered.
	if c.Packets[ToClient] == 0 {
		c.NotCaptured += c.Pending()
	} else {
		c.Unanswered += c.Pending()
	}
	c.drain()
	a.stats.Evicted.Fold(c)
}

// agedEvery is how often (capture time) closed connections are looked
// at for KeepClosed.
const agedEvery = 10 * time.Second

// foldClosed folds into Stats.Evicted the connections closed with no
// packet since before cut (KeepClosed), keeping the others in order.
// A connection with requests still waiting (reported unanswered at the
// end, where the rules weigh how the connection ended) or abandoned
// after an internal error (internal-error reads it at the end) stays.
func (a *Analyzer) foldClosed(cut time.Time) {
	kept := a.conns[:0]
	for _, c := range a.conns {
		if (c.Closed || c.Reset) && c.LastSeen.Before(cut) && c.Pending() == 0 && !c.Broken {
			a.evict(c)
			a.stats.Evicted.Aged++
			continue
		}
		kept = append(kept, c)
	}
	clear(a.conns[len(kept):])
	if len(kept) < len(a.conns) {
		a.connScan = 0
	}
	a.conns = kept
}

// Nodes returns what the traffic said about node identities.
func (a *Analyzer) Nodes() *cluster.Nodes { return a.nodes }

// Conns returns the Kafka connections in order of first packet.
func (a *Analyzer) Conns() []*Conn { return a.conns }

// Packet processes one captured packet, the next after the last one.
func (a *Analyzer) Packet(p *capture.Packet) { a.PacketAt(p, a.seq+1) }

// PacketAt processes one captured packet at place seq among the packets
// of the analysis (counted from 1): the reader of a sharded analysis gives
// each analyzer its packets with their places in the whole capture.
func (a *Analyzer) PacketAt(p *capture.Packet, seq uint64) {
	a.seq = seq
	a.at = placeOf(p)
	a.last = a.at
	a.packet(p)
	if !a.deferred() {
		a.maybeFlush(p.Time)
	}
}

func (a *Analyzer) packet(p *capture.Packet) {
	st := &a.stats
	st.Packets++
	st.Bytes += int64(p.Len)
	if st.FirstTime.IsZero() || p.Time.Before(st.FirstTime) {
		st.FirstTime = p.Time
	}
	if p.Time.After(st.LastTime) {
		st.LastTime = p.Time
	}
	if len(p.Data) < p.Len {
		st.Truncated++
	}
	if a.frag != nil && a.frag.Pending() {
		a.frag.Expire(p.Time)
		a.fragLosses()
	}
	kind, src, dst, err := a.hdr.Parse(p)
	switch kind {
	case packet.NonIP:
		st.NonIP++
		return
	case packet.Bad:
		a.bad(p, "bad IP/TCP header: "+err.Error())
		return
	case packet.Fragment:
		st.Fragments++
		a.reassemble(p, 0)
		return
	case packet.NonTCP:
		st.NonTCP++
		return
	}
	st.TCPPackets++
	a.tcpPacket(p, src, dst)
}

// reassemble hands the fragment the headers just parsed, of packet p, to
// reassembly, and analyses the datagram it completes.
func (a *Analyzer) reassemble(p *capture.Packet, depth int) {
	if a.frag == nil || !packet.Reassembles(&a.hdr.Frag) {
		return
	}
	dg := a.frag.Add(p, &a.hdr.Frag)
	a.fragLosses()
	if dg != nil && depth < packet.MaxNesting {
		a.datagram(dg, depth)
	}
}

// datagram analyses an IP datagram reassembled from fragments, at the
// packet of its last fragment.
func (a *Analyzer) datagram(p *capture.Packet, depth int) {
	st := &a.stats
	st.Reassembled++
	outer := a.at
	a.at = placeOf(p)
	defer func() { a.at = outer }()
	kind, src, dst, err := a.hdr.Parse(p)
	switch kind {
	case packet.TCP:
		st.TCPPackets++
		a.tcpPacket(p, src, dst)
	case packet.Bad:
		a.bad(p, "bad IP/TCP header in a datagram reassembled from fragments: "+err.Error())
	case packet.Fragment:
		// A tunnel's inner datagram, fragmented too.
		a.reassemble(p, depth+1)
	case packet.NonTCP:
		st.NonTCP++
	}
}

// fragLosses counts the datagrams reassembly gave up.
func (a *Analyzer) fragLosses() {
	for i := range a.frag.Lost {
		a.fragLost(&a.frag.Lost[i])
	}
	a.frag.Lost = a.frag.Lost[:0]
}

// fragLost counts a datagram that could not be reassembled, capture-wide
// and on its connection when its first fragment named one.
func (a *Analyzer) fragLost(l *packet.FragLoss) {
	st := &a.stats
	if st.FragLost == nil {
		st.FragLost = make(map[string]int64)
	}
	st.FragLost[l.Why]++
	st.FragLostBytes += int64(l.Bytes)
	if !l.TCP {
		return
	}
	what := map[string]string{
		packet.FragMissing: "a fragment never came",
		packet.FragOverlap: "fragments overlap with different bytes",
		packet.FragBound:   "dropped to keep within the reassembly bounds",
		packet.FragSnaplen: "a fragment was cut by the snaplen",
	}[l.Why]
	pr := Problem{File: l.File, Packet: l.Packet, What: fmt.Sprintf("IP datagram from %s not reassembled (%s): %d fragments, %d bytes dropped; its TCP data is lost",
		l.Src, what, l.Fragments, l.Bytes)}
	key, _ := packet.MakeKey(l.Src, l.Dst)
	if s := a.streamOf(key); s != nil && s.conn == nil {
		// Not known as Kafka yet: counted on the connection if it
		// becomes one (addConn).
		if !s.ignore {
			s.lostFrags = append(s.lostFrags, lostFrag{bytes: l.Bytes, problem: pr})
		}
		return
	}
	if c := a.connOf(key, l.Src, l.Dst); c != nil {
		c.fragLost(int64(l.Bytes), pr)
	}
}

// lostFrag is a datagram lost on a connection not known as Kafka yet.
type lostFrag struct {
	bytes   int
	problem Problem
}

func (c *Conn) fragLost(bytes int64, pr Problem) {
	c.FragLost++
	c.FragLostBytes += bytes
	c.problem(pr.File, pr.Packet, pr.What)
}

// connOf returns the Kafka connection between x and y (whose key is key):
// the current one on that 4-tuple, or else the last one reported (it may
// have ended).
func (a *Analyzer) connOf(key packet.Key, x, y netip.AddrPort) *Conn {
	if s := a.streamOf(key); s != nil {
		return s.conn
	}
	for i := len(a.conns) - 1; i >= 0 && i >= len(a.conns)-64; i-- {
		c := a.conns[i]
		if c.Client == x && c.Server == y || c.Client == y && c.Server == x {
			return c
		}
	}
	return nil
}

// Do does w, routed to this analyzer by a packet.Sharder (with
// Worker.Defragmented).
func (a *Analyzer) Do(w *packet.Work) {
	switch w.Kind {
	case packet.WorkPacket:
		a.PacketAt(w.Packet, w.Seq)
	case packet.WorkDatagram:
		a.seq = w.Seq
		a.at = placeOf(w.Packet)
		a.last = a.at
		a.datagram(w.Packet, 0)
	case packet.WorkLoss:
		a.fragLost(&w.Loss)
	}
}

func (a *Analyzer) bad(p *capture.Packet, why string) {
	st := &a.stats
	st.BadPackets++
	st.FirstBad.keepFirst(Problem{File: p.File, Packet: p.N, What: why})
}

func (a *Analyzer) tcpPacket(p *capture.Packet, src, dst netip.AddrPort) {
	t := a.tcp
	key, flipped := packet.MakeKey(src, dst)
	a.trackSYN(p, key, flipped, src, dst)
	a.ctx.ci = gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(p.Data), Length: p.Len}
	s := a.streamOf(key)
	if s != nil && t.SYN && s.reopenedBy(t, src) {
		// A new connection on the 4-tuple (life.go).
		a.supersede(s, p.Time)
		s = nil
	}
	if s != nil && s.ignore && !(t.SYN && !t.ACK) {
		return
	}
	if s == nil && len(t.Payload) == 0 && !t.SYN {
		// A bare ACK, FIN or RST of a connection we know nothing of
		// (or that already ended): nothing to reassemble.
		return
	}
	if s != nil && t.ACK && !s.done && s.provesLost(t.Ack, s.dirOf(src)) {
		// This packet acknowledges bytes the capture lost in the other
		// direction: push what waits behind the hole through first, so
		// that a request held there is paired before this packet's
		// response arrives.
		a.flushHoles(p.Time)
	}
	gen := a.gens + 1 // a new stream's
	if s != nil {
		gen = s.gen
	} else {
		a.gens++
	}
	if a.w.StablePackets {
		a.payload = t.Payload
	}
	a.asm.AssembleWithContext(netFlow(src, dst, gen), t, &a.ctx)
	a.payload = nil
	if maxStreams := a.cfg.MaxStreams; len(a.streams)+len(a.superseded) > maxStreams && len(a.born) > maxStreams/2 {
		// Connection churn (SYN floods, port scans): the older half of
		// the connections not heard from since they were created is
		// closed early; a Kafka connection among them resumes when it
		// speaks again.
		cut := a.born[len(a.born)-maxStreams/2]
		a.born = append(a.born[:0], a.born[len(a.born)-maxStreams/2:]...)
		a.asm.FlushWithOptions(reassembly.FlushOptions{T: p.Time.Add(-a.cfg.ReorderWindow), TC: cut})
	}
	if a.flushNow {
		// A hole proven lost by an ACK (see stream.trackSeq).
		a.flushNow = false
		a.flushHoles(p.Time)
	}
}

// flushHoles pushes through what every stream holds behind a hole, at
// now: the events of several streams, in order (gather).
func (a *Analyzer) flushHoles(now time.Time) {
	a.gather()
	a.asm.FlushWithOptions(reassembly.FlushOptions{T: now.Add(time.Nanosecond)})
	a.scatter()
}

// FlushClock decides when an analyzer flushes on the clock: after 1024
// packets or a reorder window of capture time since the last flush.
// The pipeline keeps one for deferred analyzers, so that each flushes at
// the packet where a single analyzer would.
type FlushClock struct {
	since int
	last  time.Time
}

// Due counts one packet at now and says whether to flush after it.
func (c *FlushClock) Due(now time.Time, window time.Duration) bool {
	c.since++
	if c.since < 1024 && now.Sub(c.last) < window {
		return false
	}
	c.since, c.last = 0, now
	return true
}

func (a *Analyzer) maybeFlush(now time.Time) {
	if a.clock.Due(now, a.cfg.ReorderWindow) {
		a.flush(now)
	}
}

// Flush does what a flush on the clock does (see FlushClock) at packet p,
// whose data is not looked at: data held behind holes older than the
// reorder window is pushed through, and idle connections are dropped.
// Only for deferred analyzers.
func (a *Analyzer) Flush(p *capture.Packet) {
	if a.closed {
		return
	}
	a.at = placeOf(p)
	a.flush(p.Time)
	a.at = a.quiet()
}

func (a *Analyzer) flush(now time.Time) {
	a.gather()
	defer a.scatter()
	if len(a.superseded) > 0 {
		// After the flush, which pushes through what they hold.
		defer a.finishSuperseded(now)
	}
	prev := a.lastFlush
	a.lastFlush = now
	if len(a.holders) > 0 {
		a.sweepHolders(now)
	}
	if a.cfg.IdleTimeout > 0 && now.Sub(a.lastIdle) >= a.cfg.IdleTimeout/4 {
		// Drop the state of connections idle for IdleTimeout (and of
		// SYNs never followed up), bounding memory over long captures.
		if !a.lastIdle.IsZero() {
			a.asm.FlushWithOptions(reassembly.FlushOptions{T: now.Add(-a.cfg.ReorderWindow), TC: now.Add(-a.cfg.IdleTimeout)})
		}
		a.lastIdle = now
	}
	if a.cfg.KeepClosed > 0 && now.Sub(a.lastAged) >= agedEvery {
		a.foldClosed(now.Add(-a.cfg.KeepClosed))
		a.lastAged = now
	}
	// Reassembly holds data only behind a hole. With no segment out of
	// order since two windows before the previous flush, nothing can be
	// waiting, and a flush (which walks every connection) is skipped.
	if a.lastQueued.IsZero() || a.lastQueued.Before(prev.Add(-2*a.cfg.ReorderWindow)) {
		return
	}
	// Push through data held back by holes older than the reorder
	// window; never close connections here (TC zero), as Kafka
	// connections idle for long periods.
	a.asm.FlushWithOptions(reassembly.FlushOptions{T: now.Add(-a.cfg.ReorderWindow)})
}

// Tick lets time pass without a packet (live capture with no traffic):
// data held behind a hole older than the reorder window is pushed through.
func (a *Analyzer) Tick(now time.Time) {
	if a.closed {
		return
	}
	a.at = a.quiet()
	a.maybeFlush(now)
}

// Close ends the analysis: it flushes reassembly, reports requests that
// were never answered and SYNs never answered, and must be called once
// after the last packet.
func (a *Analyzer) Close() { a.closeAt(a.quiet()) }

// closeAt is Close with the events of the end placed at end.
func (a *Analyzer) closeAt(end Place) {
	if a.closed {
		return
	}
	a.closed = true
	a.at = end
	a.phase = 1
	// The end of every stream: datagrams still missing fragments are
	// lost, counted on their connections before these end; the
	// connections still held are decided; then reassembly hands over
	// what it holds. Events in the order of the streams' first packets
	// (gather).
	a.gather()
	if a.frag != nil {
		a.frag.End()
		a.fragLosses()
	}
	a.decideHolders(func(*stream) bool { return true })
	a.asm.FlushAll()
	a.scatter()
	// Unanswered requests, in order of their packets.
	var left []*Message
	for _, c := range a.conns {
		left = append(left, c.drain()...)
	}
	sort.SliceStable(left, func(i, j int) bool { return requestBefore(left[i], left[j]) })
	a.phase = 2
	for _, m := range left {
		if m.conn.Packets[ToClient] == 0 {
			a.notCaptured(m.conn, m)
			continue
		}
		m.conn.Unanswered++
		a.emit(&Exchange{Conn: m.conn, Req: m, Unanswered: true, AtEnd: true, Waited: end.Time.Sub(m.Time)})
	}
	a.phase = 3
	a.closeSYNs()
	// No frame is framed from here on: the buffers kept for the next
	// ones go (the report is built next, with all else still there).
	a.fpool, a.ar.cur = framePool{}, nil
	a.wide.drop(a)
	a.wide = nil
	// What was kept for the handlers is known once the last exchange is
	// delivered (a deferred analyzer delivers nothing: its Delivery
	// keeps nothing).
	a.stats.KeptDropped = a.dl.KeptDropped()
}

// CloseAt is Close for a deferred analyzer, whose last packet is not the
// last of the capture: events of the end are placed at the capture's last
// packet (file, n) and last time t, as one analyzer of every packet would
// place them.
func (a *Analyzer) CloseAt(file int, n uint64, t time.Time) {
	a.closeAt(Place{File: file, Packet: n, Time: t})
}

func (a *Analyzer) out(ev Event) {
	ev.Phase, ev.Order = a.phase, a.order
	if a.gathering > 0 {
		a.gathered = append(a.gathered, ev)
		return
	}
	a.hand(&ev)
}

func (a *Analyzer) hand(ev *Event) {
	if a.deferred() {
		a.w.Sink(*ev)
		return
	}
	a.dl.Deliver(ev)
}

// gather starts collecting events, while several streams may emit at once
// (a flush, the end), so that scatter hands them over in the order of
// their streams' first packets: the order does not depend on reassembly's
// map of connections, nor on which analyzer has which streams. Calls nest.
func (a *Analyzer) gather() { a.gathering++ }

// scatter ends a gather, handing over what it collected.
func (a *Analyzer) scatter() {
	if a.gathering--; a.gathering > 0 || len(a.gathered) == 0 {
		return
	}
	evs := a.gathered
	slices.SortStableFunc(evs, func(x, y Event) int { return cmp.Compare(x.Order, y.Order) })
	for i := range evs {
		a.hand(&evs[i])
		evs[i] = Event{}
	}
	a.gathered = evs[:0]
}

// shareOf says, in a problem about a bound split among analyzers
// (Config.Shards), that v is this one's share.
func (a *Analyzer) shareOf(v int) string {
	if n := a.w.Shards; n > 1 {
		return fmt.Sprintf(" (this worker's share of %d, split among %d workers)", v*n, n)
	}
	return ""
}

// own returns frame in memory of its own for a deferred analyzer, whose
// events outlive the reassembly buffers: small frames are carved from
// shared chunks (given back together once their events are delivered, see
// arena.go), large ones copied alone, and owned is the buffer the
// message then holds alone (nil for the arena's and for a view). src says
// where frame lies (frameSource).
func (a *Analyzer) own(frame []byte, src *frameSource) (_, owned []byte) {
	if !a.deferred() {
		return frame, nil
	}
	if src.view == viewRequests && len(frame) >= 2 && binary.BigEndian.Uint16(frame) == uint16(kmsg.Produce) {
		// In a packet that stays until the frame's events are
		// delivered (Config.StablePackets): a Produce request's
		// decoded body keeps nothing of the frame once its records
		// are released (decode.ReleaseRecords), when it is delivered.
		// Other requests' bodies may keep bytes of their frame, read
		// when their exchange is delivered, later; responses' bodies
		// may be kept by what learns from them (a view there pinned
		// whole rounds: churn-conns.pcap's heap grew by 40 MiB).
		return frame, nil
	}
	if cap(src.lend) >= poolMin && &frame[0] == &src.lend[decode.SizeLen] {
		// The frame is alone in its framer's buffer (complete), one
		// the pool takes back: the message takes the buffer, and the
		// framer another.
		src.lent = true
		return frame, src.lend
	}
	if len(frame) > arenaChunk/4 {
		// A big frame gets a buffer of its own, one that the delivery
		// gave back (see release) if one is big enough.
		b := a.getBuffer(len(frame))[:len(frame)]
		copy(b, frame)
		return b, b
	}
	b := a.ar.take(len(frame))
	start := len(b)
	a.ar.cur = append(b, frame...)
	return a.ar.cur[start:len(a.ar.cur):len(a.ar.cur)], nil
}

// viewKind says which frames own may hand on as views (stableView).
type viewKind uint8

const (
	viewNone viewKind = iota
	viewRequests
)

// stableView returns the frames of data that own may hand on as they are,
// for f: data is (the end of) the payload of the packet being reassembled,
// which stays until the packet's events are delivered
// (Config.StablePackets).
func (a *Analyzer) stableView(f *framer, data []byte) viewKind {
	pl := a.payload
	if f.resp || len(data) == 0 || len(pl) < len(data) || &data[len(data)-1] != &pl[len(pl)-1] {
		return viewNone
	}
	return viewRequests
}

func (a *Analyzer) emitRequest(m *Message) { a.out(Event{Req: m}) }

func (a *Analyzer) emit(x *Exchange) {
	if x.Conn != nil {
		x.ConnGaps = x.Conn.Gaps
	}
	a.out(Event{X: x})
}

func (a *Analyzer) emitConn(e *ConnEvent) { a.out(Event{Conn: e}) }

// placeOf is the place of packet p.
func placeOf(p *capture.Packet) Place { return Place{File: p.File, Packet: p.N, Time: p.Time} }

// quiet is the place outside packet work: the last packet given, at the
// latest time seen.
func (a *Analyzer) quiet() Place {
	return Place{File: a.last.File, Packet: a.last.Packet, Time: a.stats.LastTime}
}
