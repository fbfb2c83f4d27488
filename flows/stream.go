package flows

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/reassembly"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/packet"
)

// factory creates a stream per TCP connection for gopacket's reassembly.
type factory Analyzer

// New implements reassembly.StreamFactory.
func (f *factory) New(netFlow, tcpFlow gopacket.Flow, tcp *layers.TCP, ac reassembly.AssemblerContext) reassembly.Stream {
	a := (*Analyzer)(f)
	src := netip.AddrPortFrom(addrFrom(netFlow.Src()), uint16(tcp.SrcPort))
	dst := netip.AddrPortFrom(addrFrom(netFlow.Dst()), uint16(tcp.DstPort))
	key, _ := packet.MakeKey(src, dst)
	// Every stream has a reassembly key of its own (netFlow carries its
	// generation, see Analyzer.tcpPacket): New is only called for a new
	// connection.
	s := &stream{a: a, key: key, ends: [2]netip.AddrPort{src, dst}, clientEnd: -1, gen: generation(netFlow)}
	s.first = a.at
	s.firstSeq = a.seq
	s.fr[0].s, s.fr[1].s = s, s
	s.fr[1].resp = true
	if c := a.idle[key]; c != nil {
		delete(a.idle, key)
		if !tcp.SYN {
			// The connection went quiet for longer than the idle
			// timeout and its reassembly state was dropped; it
			// carries on under the same Conn, framed again from the
			// next boundary. (A SYN opens a new one.)
			s.resume(c)
		}
	} else if len(a.gone) > 0 {
		h := a.goneHash(key)
		if _, ok := a.gone[h]; ok {
			// Its record was dropped from the table (MaxConns) while
			// it was quiet: a new record, which counts it again in
			// place of the one folded into Stats.Evicted (start).
			delete(a.gone, h)
			s.continues = !tcp.SYN
		}
	}
	a.setStream(s)
	a.noteBorn(a.at.Time)
	return s
}

// noteBorn keeps t, a new stream's creation time, in born. Only the
// newest MaxStreams/2 are ever read (tcpPacket's churn cut), so past
// MaxStreams the older ones are let go, one more than that kept: a live
// capture's connections opened and closed in turn (never over
// MaxStreams at once) grew born by 24 bytes each, for ever (4 MB an
// hour at 50 a second: the soak's stream-object growth).
func (a *Analyzer) noteBorn(t time.Time) {
	a.born = append(a.born, t)
	if keep := a.cfg.MaxStreams/2 + 1; len(a.born) > 2*keep {
		a.born = append(a.born[:0], a.born[len(a.born)-keep:]...)
	}
}

// resume continues an idle-evicted connection c on this new stream.
func (s *stream) resume(c *Conn) {
	s.conn, s.decided = c, true
	s.clientEnd = 0
	if s.ends[1] == c.Client {
		s.clientEnd = 1
	}
	for i := range s.fr {
		s.fr[i].synced, s.fr[i].initial, s.fr[i].mid = false, true, true
	}
}

func addrFrom(e gopacket.Endpoint) netip.Addr {
	a, _ := netip.AddrFromSlice(e.Raw())
	return a
}

// stream is the state of one TCP connection: which end is the client,
// whether it carries Kafka, and a framer per direction.
type stream struct {
	a   *Analyzer
	key packet.Key
	// ends[0] sent the packet that created the stream; reassembly's
	// direction d carries bytes from ends[d] to ends[1-d].
	ends      [2]netip.AddrPort
	clientEnd int // index into ends, -1 until known
	// gen makes the stream's reassembly key its own (see netFlow).
	gen uint64
	// continues: the connection's earlier record was dropped from the
	// table while it was quiet (see evictedConn).
	continues bool
	handshake bool
	midstream [2]bool
	decided   bool
	ignore    bool
	done      bool
	conn      *Conn
	// tls decrypts a connection that began with a ClientHello when a
	// key log was given (tls.go); tlsSeen: its first bytes were looked
	// at.
	tls     *tlsState
	tlsSeen bool
	// fr[0] frames requests (client to server), fr[1] responses.
	fr [2]framer
	// h holds the bytes of a connection joined mid-way until it is
	// known which end is the client (orient.go).
	h *holding
	// pre-decision counters, folded into the Conn when it is created.
	packets [2]int64
	bytes   [2]int64
	// firstSeq is the place of its first packet (Analyzer.seq).
	firstSeq uint64
	// first and last packet seen of the connection.
	first, last Place
	// Sequence tracking, to tell a hole that will never be filled: the
	// first sequence number of each direction, the bytes reassembly has
	// delivered or skipped since, and the highest sequence number seen.
	fin       [2]bool
	seqBase   [2]uint32
	seqKnown  [2]bool
	delivered [2]uint32
	maxSeen   [2]uint32
	// cuts remembers where the last packets cut by the snaplen ended,
	// to tell a hole cut by the snaplen from one lost in the network
	// (allocated at the first cut packet).
	cuts *cutPoints
	// The life of the TCP connection (life.go): SYNs seen per end, with
	// their sequence numbers and whether they carried ACK; a FIN or RST
	// seen; the last ACK number each end sent; and, once a new
	// connection took the 4-tuple, when.
	synSeen    [2]bool
	synOnly    [2]bool
	synSeq     [2]uint32
	ended      bool
	ackKnown   [2]bool
	ack        [2]uint32
	superseded time.Time
	// lostFrags are IP datagrams of the connection lost before it was
	// known as Kafka (Analyzer.fragLost), counted on its Conn when made.
	lostFrags []lostFrag
}

// cutPoints are, per direction, the last maxCuts packets cut by the
// snaplen: where their captured part ended (sequence number) and how many
// of their bytes were not captured. Holes are skipped in sequence order
// within a reorder window, so the recent ones are those that matter; a
// hole whose cut point was forgotten is called lost.
type cutPoints struct {
	p [2][maxCuts]struct{ end, missing uint32 }
	n [2]int
}

const maxCuts = 32

// Accept implements reassembly.Stream.
func (s *stream) Accept(tcp *layers.TCP, ci gopacket.CaptureInfo, dir reassembly.TCPFlowDirection, nextSeq reassembly.Sequence, start *bool, ac reassembly.AssemblerContext) bool {
	if s.done {
		// A connection finished early (finish): this is the RST that
		// closes its reassembly.
		*start = nextSeq == -1
		return true
	}
	d := dirIndex(dir)
	if tcp.SYN {
		s.syn(tcp, d)
	}
	s.last = s.a.at
	// A keep-alive or a bare ACK does not start a direction (see
	// startsAt); the next data does.
	skip := nextSeq == -1 && !tcp.SYN && !s.startsAt(tcp, d)
	if nextSeq != -1 && len(tcp.Payload) > 0 && int32(tcp.Seq-uint32(nextSeq)) > 0 {
		// Ahead of a hole: reassembly will hold it.
		s.a.lastQueued = ci.Timestamp
	}
	if nextSeq == -1 && !tcp.SYN && !skip {
		// The capture began after this direction's SYN: start here.
		*start = true
		s.midstream[d] = true
	}
	s.packets[d]++
	if !skip {
		s.bytes[d] += int64(len(tcp.Payload))
	}
	s.trackSeq(tcp, d, !skip)
	if tcp.ACK {
		s.ack[d], s.ackKnown[d] = tcp.Ack, true
	}
	if tcp.FIN || tcp.RST {
		s.ended = true
	}
	if ci.CaptureLength < ci.Length && len(tcp.Payload) > 0 {
		seq := tcp.Seq
		if tcp.SYN {
			seq++
		}
		if s.cuts == nil {
			s.cuts = new(cutPoints)
		}
		c := s.cuts
		c.p[d][c.n[d]%maxCuts] = struct{ end, missing uint32 }{seq + uint32(len(tcp.Payload)), uint32(ci.Length - ci.CaptureLength)}
		c.n[d]++
	}
	if s.conn != nil {
		c := s.conn
		r := s.role(d)
		c.Packets[r]++
		c.Bytes[r] += int64(len(tcp.Payload))
		c.LastPacket, c.LastSeen = s.last.Packet, s.last.Time
		if tcp.RST {
			c.Reset = true
		}
		if tcp.FIN {
			s.fin[d] = true
			c.Closed = s.fin[0] && s.fin[1]
		}
	}
	return !s.ignore && !skip
}

// trackSeq notices when the peer acknowledges bytes of direction 1-d that
// reassembly is still waiting for while it holds later bytes: the segment
// was received by the peer but not captured, so it will never arrive (no
// retransmission follows an ACK). Reassembly is then flushed at once rather
// than after the reorder window, so that requests are not held back while
// their responses are already being paired.
//
// own is false for a segment that does not start its direction (see
// startsAt): only its ACK counts.
func (s *stream) trackSeq(tcp *layers.TCP, d int, own bool) {
	seq := tcp.Seq
	if tcp.SYN {
		seq++
	}
	if own && !s.seqKnown[d] {
		s.seqBase[d], s.seqKnown[d] = seq, true
		s.maxSeen[d] = seq
	}
	if end := seq + uint32(len(tcp.Payload)); own && int32(end-s.maxSeen[d]) > 0 {
		s.maxSeen[d] = end
	}
	if tcp.ACK && s.provesLost(tcp.Ack, d) {
		s.a.flushNow = true
	}
}

// provesLost reports whether an acknowledgment ack sent in direction d
// covers bytes of direction 1-d that reassembly still waits for while it
// holds later ones: a hole the peer received but the capture lost.
func (s *stream) provesLost(ack uint32, d int) bool {
	o := 1 - d
	if !s.seqKnown[o] {
		return false
	}
	expect := s.seqBase[o] + s.delivered[o]
	return int32(ack-expect) > 1 && int32(s.maxSeen[o]-expect) > 0
}

// dirOf returns the reassembly direction of a packet sent from src.
func (s *stream) dirOf(src netip.AddrPort) int {
	if src == s.ends[0] {
		return 0
	}
	return 1
}

func dirIndex(dir reassembly.TCPFlowDirection) int {
	if dir == reassembly.TCPDirClientToServer {
		return 0
	}
	return 1
}

// role maps a reassembly direction to ToServer or ToClient.
func (s *stream) role(d int) Dir {
	if d == s.clientEnd {
		return ToServer
	}
	return ToClient
}

// ReassembledSG implements reassembly.Stream.
func (s *stream) ReassembledSG(sg reassembly.ScatterGather, ac reassembly.AssemblerContext) {
	if s.ignore {
		return
	}
	s.a.order = s.firstSeq
	defer s.recoverPanic()
	dir, _, _, skip := sg.Info()
	d := dirIndex(dir)
	n, _ := sg.Lengths()
	holeAt := s.seqBase[d] + s.delivered[d]
	s.delivered[d] += uint32(n)
	if skip > 0 {
		s.delivered[d] += uint32(skip)
	}
	if !s.tlsSeen && n > 0 {
		s.tlsSeen = true
		s.startTLS(d, sg.Fetch(n))
	}
	if s.tls != nil {
		var data []byte
		if n > 0 {
			data = sg.Fetch(n)
		}
		s.tlsFeed(d, data, max(skip, 0), holeAt)
		return
	}
	var data []byte
	if n > 0 {
		data = sg.Fetch(n)
	}
	s.deliver(d, data, skip, holeAt)
}

// deliver takes the next bytes of reassembly direction d, after a hole
// of skip bytes at sequence number holeAt: the connection's bytes, or a
// TLS connection's decrypted ones (tls.go).
func (s *stream) deliver(d int, data []byte, skip int, holeAt uint32) {
	if s.ignore {
		return
	}
	n := len(data)
	if !s.decided {
		cut := 0
		if skip > 0 {
			cut = s.cutAt(d, holeAt, skip)
		}
		if n > 0 || skip > 0 {
			s.decide(d, data, max(skip, 0), cut)
		}
		return
	}
	// The framer is handed the packet the bytes came in.
	at := s.a.at
	if skip > 0 && s.conn != nil {
		s.fr[s.role(d)].gap(skip, s.cutAt(d, holeAt, skip), at)
	}
	if n == 0 {
		return
	}
	s.fr[s.role(d)].feed(data, at)
}

// cutAt returns how many of the n bytes missing at sequence number seq of
// direction d were cut by the snaplen from the packet before them (the
// rest were lost).
func (s *stream) cutAt(d int, seq uint32, n int) int {
	if s.cuts == nil {
		return 0
	}
	for i := range min(s.cuts.n[d], maxCuts) {
		if c := s.cuts.p[d][i]; c.end == seq {
			return min(n, int(c.missing))
		}
	}
	return 0
}

// cutLast returns how many bytes were cut by the snaplen from the packet
// whose end is where the bytes delivered so far for framer role r end:
// bytes that will never be delivered, not even as a hole, when the
// connection ends there; 0 if that packet was not cut.
func (s *stream) cutLast(r Dir) int {
	d := s.clientEnd
	if r == ToClient {
		d = 1 - d
	}
	if d < 0 || d > 1 {
		return 0
	}
	return s.cutAt(d, s.seqBase[d]+s.delivered[d], int(^uint(0)>>1))
}

// recoverPanic isolates a fault while handling one connection (a decoder
// or handler bug met by hostile input): the connection is marked broken
// with the packet number and ignored from then on; the rest of the capture
// is analysed and the report carries an internal-error finding.
func (s *stream) recoverPanic() {
	p := recover()
	if p == nil {
		return
	}
	s.ignore = true
	a := s.a
	a.stats.InternalErrors++
	at := a.at
	what := fmt.Sprintf("internal error, connection abandoned: %v", p)
	if c := s.conn; c != nil {
		c.Broken = true
		c.BrokenPacket, c.BrokenFile, c.BrokenWhy = at.Packet, at.File, fmt.Sprint(p)
		c.problem(at.File, at.Packet, what)
		return
	}
	a.stats.FirstInternal.keepFirst(Problem{File: at.File, Packet: at.Packet, What: what})
}

// ReassemblyComplete implements reassembly.Stream.
func (s *stream) ReassemblyComplete(ac reassembly.AssemblerContext) bool {
	if s.done {
		return true // finished early (finish)
	}
	s.a.order = s.firstSeq
	if s.tls != nil {
		func() {
			defer s.recoverPanic()
			s.tlsEnd()
		}()
	}
	if !s.decided && s.h != nil {
		s.assessSafely()
	}
	s.done = true
	a := s.a
	a.dropStream(s)
	if c := s.conn; c != nil && !c.Closed && !c.Reset && !a.closed && s.superseded.IsZero() {
		// Completed by the idle timeout, not by FIN or RST: remember the
		// connection so that traffic resuming on it continues it.
		if c.dropped {
			a.rememberGone(s.key) // see Analyzer.evict
		} else {
			if len(a.idle) >= a.maxIdle {
				for k := range a.idle {
					delete(a.idle, k)
					a.stats.IdleForgotten++
					break
				}
			}
			a.idle[s.key] = c
		}
		a.stats.IdleEvicted++
	}
	if s.conn != nil {
		s.fr[0].end()
		s.fr[1].end()
		// Reassembly also completes streams at the end of the capture;
		// only a FIN or RST, or a new connection on the 4-tuple, is a
		// close.
		if s.conn.Closed || s.conn.Reset || !s.superseded.IsZero() {
			at := s.a.at
			s.a.emitConn(&ConnEvent{Kind: ConnClosed, Conn: s.conn, Client: s.conn.Client, Server: s.conn.Server, File: at.File, Packet: at.Packet, Time: at.Time})
		}
		if s.conn.foldLate {
			s.conn.foldLate = false
			a.foldEvicted(s.conn) // see Analyzer.evict
		}
	}
	s.release()
	return true
}

// decide takes data delivered in direction d (after a hole of skip bytes,
// cut of them by the snaplen) before the connection is decided. With the
// handshake captured the client is known and the connection is decided
// at once; otherwise the data is held until the evidence says which end is
// the client (orient.go).
func (s *stream) decide(d int, data []byte, skip, cut int) {
	if s.clientEnd >= 0 && s.handshake {
		ports := s.a.cfg.Ports
		byPort := ports.Has(s.ends[0].Port()) || ports.Has(s.ends[1].Port())
		if !byPort && (d != s.clientEnd || !decode.PlausibleRequest(data, s.a.cfg.MaxFrame)) {
			// Kafka clients speak first, with a request.
			s.notKafka()
			return
		}
		how := ByContent
		if byPort {
			how = ByPort
		}
		s.hold(d, data, skip, cut)
		s.start(how, ClientByHandshake)
		return
	}
	s.hold(d, data, skip, cut)
	s.assess(false)
}

// assessSafely is assess(true) for the end of a connection, outside
// ReassembledSG's panic isolation.
func (s *stream) assessSafely() {
	defer s.recoverPanic()
	s.assess(true)
}

func (s *stream) notKafka() {
	s.decided, s.ignore = true, true
	s.release()
	s.a.stats.OtherTCP++
}

// start makes the connection a Kafka connection (s.clientEnd is known)
// and frames the bytes held, each at the packet that delivered it.
func (s *stream) start(how Recognition, by ClientSide) {
	s.decided = true
	a := s.a
	ci := s.clientEnd
	if s.continues && a.stats.Evicted.Conns > 0 {
		// The connection's earlier record was folded into
		// Stats.Evicted: this one counts it from now on.
		a.stats.Evicted.Conns--
	}
	c := &Conn{
		ConnInfo: ConnInfo{
			ID:          a.nextID(),
			Client:      s.ends[ci],
			Server:      s.ends[1-ci],
			Recognised:  how,
			Handshake:   s.handshake,
			MidStream:   s.midstream[0] || s.midstream[1],
			File:        s.first.File,
			FirstPacket: s.first.Packet,
			FirstSeen:   s.first.Time,
			nodes:       a.nodes,
		},
		ClientBy:   by,
		waits:      &a.waits,
		LastPacket: s.last.Packet,
		LastSeen:   s.last.Time,
	}
	for i := 0; i < 2; i++ {
		r := s.role(i)
		c.Packets[r] += s.packets[i]
		c.Bytes[r] += s.bytes[i]
		// A direction is framed from its first byte if the handshake
		// was captured and that direction did not start mid-stream (a
		// direction not seen yet will start with its SYN only if the
		// client's SYN was seen).
		synced := s.handshake && !s.midstream[i]
		s.fr[r].synced = synced
		s.fr[r].initial, s.fr[r].mid = !synced, !synced
	}
	s.conn = c
	s.tlsStarted(c)
	a.addConn(c)
	a.emitConn(&ConnEvent{Kind: ConnOpened, Conn: c, Client: c.Client, Server: c.Server, File: c.File, Packet: c.FirstPacket, Time: c.FirstSeen})
	h := s.h
	if h == nil {
		return
	}
	for _, kv := range h.apis[ci] {
		c.hint(kv)
	}
	// Each held delivery is framed at its own packet, which stands for
	// the packet at work meanwhile.
	outer := a.at
	defer func() { a.at = outer }()
	for i := range h.order {
		p := &h.order[i]
		a.at = p.at
		f := &s.fr[s.role(int(p.dir))]
		if p.gap > 0 {
			f.gap(int(p.gap), int(p.cut), p.at)
		}
		if p.n > 0 {
			f.feed(h.buf[p.dir][p.off:p.off+p.n], p.at)
		}
	}
	s.release()
}
