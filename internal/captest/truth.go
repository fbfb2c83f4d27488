package captest

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
)

// Directions of a connection.
const (
	ToServer = 0 // client to server: requests
	ToClient = 1 // server to client: responses
)

// DirName names a direction as kfsniff's reports do.
func DirName(d int) string {
	if d == ToServer {
		return "client->server"
	}
	return "server->client"
}

// maxFrame is Kafka's default socket.request.max.bytes and kfsniff's
// default --max-frame: a larger size prefix is not a frame boundary.
const maxFrame = 100 << 20

// maxStream bounds the bytes of a direction the truth holds in memory.
const maxStream = 1 << 30

// Truth is what a capture holds, worked out from the whole capture: its TCP
// connections, which end of each is the client (the sender of the SYN),
// and every Kafka frame of the connections whose handshake was captured,
// framed by the 4-byte size prefix from the first byte after the SYN, with
// the packets that carried its bytes.
type Truth struct {
	// Conns are the connections whose frames are known (Known), and the
	// others with the reason they are not, in order of first packet.
	Conns   []*Conn
	byTuple map[tuple]*Conn
	// pkts places every TCP packet in its connection and direction.
	pkts map[uint64]place
}

type place struct {
	c *Conn
	d int
}

// Conn is one TCP connection.
type Conn struct {
	// Client sent the SYN (for connections without one, the first
	// packet's sender, a guess: Known is false).
	Client, Server netip.AddrPort
	// Known is true when the handshake was captured both ways and both
	// directions frame as Kafka from their first byte: Frames are then
	// every frame of the connection.
	Known bool
	// NotKafka is set when the client's bytes, from the handshake, are
	// not Kafka requests (another protocol on the same host).
	NotKafka bool
	// Why says why the frames are not known.
	Why string
	// Frames per direction (ToServer: requests), in stream order.
	Frames [2][]*Frame

	first uint64
	isn   [2]uint32
	syn   [2]uint64 // packet numbers of the SYN and the SYN-ACK (0: not captured)
	segs  [2][]seg
	data  [2][]byte
	have  [2][]bool
}

func (c *Conn) String() string { return c.Client.String() + " -> " + c.Server.String() }

// Handshake reports whether the client's SYN was captured: Client is then
// certain.
func (c *Conn) Handshake() bool { return c.syn[ToServer] != 0 }

// seg is the payload of one packet in one direction, as stream offsets
// from the first byte after the SYN.
type seg struct {
	n    uint64
	a, b int64
	syn  bool // the SYN (or SYN-ACK) itself, which carries no data here
	// bare: a packet without data (an ACK), at a == b: where the
	// direction's bytes go on, for a reassembler that starts there.
	bare bool
}

// Frame is one Kafka frame.
type Frame struct {
	Conn     *Conn
	Response bool
	// Start and End are its stream offsets, the size prefix included,
	// End exclusive.
	Start, End int64
	// Key and Version of the request (of the request it answers, for a
	// response; -1 if there is none in the capture); Correlation read
	// from the frame. HeaderKnown is false when the bytes holding them
	// were not captured.
	Key, Version int16
	Correlation  int32
	HeaderKnown  bool
	// Complete: every byte was captured.
	Complete bool
	// Packet completed the frame in the whole capture, reassembled in
	// order from the handshake; Exact is false when bytes before the
	// frame were not captured, and Packet is then the packet that
	// brought its own last missing byte (an analyzer that waits for the
	// hole reports it later).
	Packet uint64
	Exact  bool
	// Pieces are the packets that carried its bytes, in capture order; a
	// byte sent twice (retransmission) is in two pieces.
	Pieces []Piece
	// Pair is the response of a request, the request of a response.
	Pair *Frame
}

// Piece is the part [From, To) of a frame's stream carried by packet N.
type Piece struct {
	N        uint64
	From, To int64
}

// Dir is the frame's direction.
func (f *Frame) Dir() int {
	if f.Response {
		return ToClient
	}
	return ToServer
}

// Name shows the frame as a user would look it up.
func (f *Frame) Name() string {
	kind := "request"
	if f.Response {
		kind = "response"
	}
	api := kmsg.NameForKey(f.Key)
	if api == "" {
		api = fmt.Sprintf("key %d", f.Key)
	}
	return fmt.Sprintf("%s v%d %s corr %d (packet %d)", api, f.Version, kind, f.Correlation, f.Packet)
}

// Packets lists the numbers of the packets that carried the frame.
func (f *Frame) Packets() []uint64 {
	var out []uint64
	for _, p := range f.Pieces {
		if !slices.Contains(out, p.N) {
			out = append(out, p.N)
		}
	}
	return out
}

type tuple struct {
	a, b netip.AddrPort
}

func tupleOf(x, y netip.AddrPort) tuple {
	if x.Addr().Less(y.Addr()) || x.Addr() == y.Addr() && x.Port() < y.Port() {
		return tuple{x, y}
	}
	return tuple{y, x}
}

// Conn returns the connection between the two endpoints, in either order.
func (t *Truth) Conn(x, y netip.AddrPort) *Conn { return t.byTuple[tupleOf(x, y)] }

// Place returns the connection and direction of TCP packet n.
func (t *Truth) Place(n uint64) (*Conn, int, bool) {
	p, ok := t.pkts[n]
	return p.c, p.d, ok
}

// Frames returns every complete frame of the known connections in one
// direction (ToServer: requests), connection by connection.
func (t *Truth) Frames(d int) []*Frame {
	var out []*Frame
	for _, c := range t.Conns {
		if !c.Known {
			continue
		}
		for _, f := range c.Frames[d] {
			if f.Complete {
				out = append(out, f)
			}
		}
	}
	return out
}

// Known returns the connections whose frames are known.
func (t *Truth) Known() []*Conn {
	var out []*Conn
	for _, c := range t.Conns {
		if c.Known {
			out = append(out, c)
		}
	}
	return out
}

// Study works out the truth of a whole capture.
func Study(c *Capture) *Truth {
	t := &Truth{byTuple: map[tuple]*Conn{}, pkts: map[uint64]place{}}
	reused := map[tuple]bool{}
	for i := range c.Packets {
		p := &c.Packets[i]
		h, ok := parseTCP(p)
		if !ok {
			continue
		}
		k := tupleOf(h.src, h.dst)
		conn := t.byTuple[k]
		if conn == nil {
			conn = &Conn{Client: h.src, Server: h.dst, first: p.N}
			if h.syn && h.ack {
				conn.Client, conn.Server = h.dst, h.src
			}
			t.byTuple[k] = conn
			t.Conns = append(t.Conns, conn)
		}
		if h.syn && !h.ack && (conn.syn[ToServer] != 0 && (h.seq != conn.isn[ToServer] || h.src != conn.Client) ||
			conn.syn[ToServer] == 0 && conn.first != p.N) {
			// A new connection on the same 4-tuple (or after packets of
			// an earlier one): kfsniff's connections and these could
			// not be told apart by their endpoints.
			reused[k] = true
		}
		d := ToServer
		if h.src == conn.Server {
			d = ToClient
		}
		t.pkts[p.N] = place{conn, d}
		switch {
		case h.syn && !h.ack && conn.syn[ToServer] == 0:
			conn.Client, conn.Server = h.src, h.dst
			d = ToServer
			t.pkts[p.N] = place{conn, d}
			conn.isn[d], conn.syn[d] = h.seq, p.N
		case h.syn && h.ack && conn.syn[ToClient] == 0 && h.src == conn.Server:
			conn.isn[d], conn.syn[d] = h.seq, p.N
		}
		if conn.syn[d] == 0 {
			continue // data before this direction's SYN: offsets unknown
		}
		seq := h.seq
		if h.syn {
			seq++
			conn.segs[d] = append(conn.segs[d], seg{n: p.N, syn: true})
		}
		a := int64(int32(seq - (conn.isn[d] + 1)))
		if len(h.payload) == 0 {
			if a >= 0 && !h.syn {
				conn.segs[d] = append(conn.segs[d], seg{n: p.N, a: a, b: a, bare: true})
			}
			continue
		}
		if a < 0 {
			// A keep-alive probe's byte before any data, or bytes
			// from before the SYN: not part of the stream.
			if -a >= int64(len(h.payload)) {
				continue
			}
			h.payload, a = h.payload[-a:], 0
		}
		b := a + int64(len(h.payload))
		if b > maxStream {
			conn.Why = "stream longer than the truth follows"
			continue
		}
		conn.segs[d] = append(conn.segs[d], seg{n: p.N, a: a, b: b})
		if int64(len(conn.data[d])) < b {
			conn.data[d] = append(conn.data[d], make([]byte, b-int64(len(conn.data[d])))...)
			conn.have[d] = append(conn.have[d], make([]bool, b-int64(len(conn.have[d])))...)
		}
		for j, x := range h.payload {
			if o := a + int64(j); !conn.have[d][o] {
				conn.data[d][o], conn.have[d][o] = x, true
			}
		}
	}
	for k, conn := range t.byTuple {
		switch {
		case conn.Why != "":
		case reused[k]:
			conn.Why = "4-tuple reused by another connection"
		case conn.syn[ToServer] == 0:
			conn.Why = "no SYN captured"
		case conn.syn[ToClient] == 0:
			conn.Why = "no SYN-ACK captured"
		default:
			conn.frame()
		}
		conn.data, conn.have = [2][]byte{}, [2][]bool{}
	}
	return t
}

// frame splits both directions into frames and pairs them.
func (c *Conn) frame() {
	for d := range 2 {
		if why := c.split(d); why != "" {
			c.Why = why
			return
		}
	}
	c.Known = true
	// A response answers the oldest unanswered request with its
	// correlation id (acks=0 produce requests are never answered).
	waiting := map[int32][]*Frame{}
	for _, f := range c.Frames[ToServer] {
		if f.HeaderKnown {
			waiting[f.Correlation] = append(waiting[f.Correlation], f)
		}
	}
	for _, f := range c.Frames[ToClient] {
		f.Key, f.Version = -1, -1
		if q := waiting[f.Correlation]; f.HeaderKnown && len(q) > 0 {
			f.Pair, q[0].Pair = q[0], f
			f.Key, f.Version = q[0].Key, q[0].Version
			waiting[f.Correlation] = q[1:]
		}
	}
	all := func(uint64) bool { return true }
	for d := range 2 {
		exp := c.expect(d, all)
		for i, f := range c.Frames[d] {
			f.Packet, f.Exact = exp[i].Packet, exp[i].Exact
		}
	}
}

// split frames direction d from its first byte; it returns why it cannot.
func (c *Conn) split(d int) string {
	data, have := c.data[d], c.have[d]
	covered := func(a, b int64) bool {
		if b > int64(len(have)) {
			return false
		}
		return !slices.Contains(have[a:b], false)
	}
	minSize := int64(8)
	if d == ToClient {
		minSize = 4
	}
	for off := int64(0); off < int64(len(data)); {
		if !covered(off, off+4) {
			return fmt.Sprintf("%s size prefix at stream byte %d not captured: framing lost", DirName(d), off)
		}
		size := int64(int32(binary.BigEndian.Uint32(data[off:])))
		if size < minSize || size > maxFrame {
			if d == ToServer && off == 0 {
				c.NotKafka = true
				return "client bytes are not Kafka requests"
			}
			return fmt.Sprintf("%s size %d at stream byte %d is not a frame", DirName(d), size, off)
		}
		f := &Frame{Conn: c, Response: d == ToClient, Start: off, End: off + 4 + size}
		if covered(off+4, off+4+minSize) {
			f.HeaderKnown = true
			if d == ToServer {
				f.Key = int16(binary.BigEndian.Uint16(data[off+4:]))
				f.Version = int16(binary.BigEndian.Uint16(data[off+6:]))
				f.Correlation = int32(binary.BigEndian.Uint32(data[off+8:]))
				r := kmsg.RequestForKey(f.Key)
				if r == nil || f.Version < 0 || f.Version > r.MaxVersion() {
					if off == 0 {
						c.NotKafka = true
						return "client bytes are not Kafka requests"
					}
					return fmt.Sprintf("request at stream byte %d has key %d v%d, unknown to kmsg", off, f.Key, f.Version)
				}
			} else {
				f.Correlation = int32(binary.BigEndian.Uint32(data[off+4:]))
			}
		}
		f.Complete = covered(f.Start, f.End)
		c.Frames[d] = append(c.Frames[d], f)
		off = f.End
	}
	// Pieces: every segment's share of every frame it overlaps.
	fs := c.Frames[d]
	for _, s := range c.segs[d] {
		if s.bare {
			continue
		}
		i, _ := slices.BinarySearchFunc(fs, s.a, func(f *Frame, a int64) int {
			if f.End <= a {
				return -1
			}
			return 1
		})
		for ; i < len(fs) && fs[i].Start < s.b; i++ {
			f := fs[i]
			f.Pieces = append(f.Pieces, Piece{N: s.n, From: max(s.a, f.Start), To: min(s.b, f.End)})
		}
	}
	return ""
}

// Expect is what an analysis of a variant of the capture must report of
// one frame.
type Expect struct {
	// Kept: every byte of the frame is in the variant. Must: besides,
	// reassembly of the variant, which starts at the first packet of
	// each direction, does not start after the frame's first byte.
	Kept, Must bool
	// Packet completes the frame in the variant: exactly when Exact,
	// else (bytes before the frame lost, or the frame not Must) a lower
	// bound: the packet that brought its last byte.
	Packet uint64
	Exact  bool
}

// Expect returns, for the complete frames of the known connections, what
// the variant made of the packets keep accepts must show. Frames not in
// the map are not complete in the whole capture.
func (t *Truth) Expect(keep func(uint64) bool) map[*Frame]Expect {
	out := map[*Frame]Expect{}
	for _, c := range t.Conns {
		if !c.Known {
			continue
		}
		for d := range 2 {
			exp := c.expect(d, keep)
			for i, f := range c.Frames[d] {
				if f.Complete {
					out[f] = exp[i]
				}
			}
		}
	}
	return out
}

// expect reassembles direction d of the variant in order, as any TCP
// reassembler that starts at a direction's first packet does, and says
// for each frame whether all of it is there and which packet completed it.
func (c *Conn) expect(d int, keep func(uint64) bool) []Expect {
	fs := c.Frames[d]
	out := make([]Expect, len(fs))
	// start is where reassembly of the variant begins: the first byte
	// after the SYN if the SYN is kept before any data, else where the
	// first packet kept of this direction goes on: a data packet, or a
	// bare ACK once the connection is open in the variant (a SYN or data
	// kept in either direction before it; kfsniff, like any reassembler,
	// ignores bare packets of a connection it does not know yet).
	opened := uint64(0)
	for dd := range 2 {
		for _, s := range c.segs[dd] {
			if !s.bare && keep(s.n) {
				if opened == 0 || s.n < opened {
					opened = s.n
				}
				break
			}
		}
	}
	start := int64(-1)
	type at struct {
		n     uint64
		front int64
	}
	var fronts []at
	var ahead [][2]int64
	front := int64(0)
	for _, s := range c.segs[d] {
		if !keep(s.n) || s.bare && (opened == 0 || s.n <= opened) {
			continue
		}
		if start < 0 {
			start = s.a // 0 for the SYN
			front = start
		}
		if s.syn || s.b <= front {
			continue
		}
		if s.a > front {
			ahead = append(ahead, [2]int64{s.a, s.b})
			continue
		}
		front = s.b
		// Data held ahead of a hole just filled.
		slices.SortFunc(ahead, func(x, y [2]int64) int { return cmp.Compare(x[0], y[0]) })
		k := 0
		for ; k < len(ahead) && ahead[k][0] <= front; k++ {
			front = max(front, ahead[k][1])
		}
		ahead = ahead[k:]
		fronts = append(fronts, at{s.n, front})
	}
	for i, f := range fs {
		// The frame's own bytes: the packet that brought the last one.
		var own uint64
		var cov [][2]int64
		whole := false
		for _, p := range f.Pieces {
			if !keep(p.N) {
				continue
			}
			cov = append(cov, [2]int64{p.From, p.To})
			if covers(cov, f.Start, f.End) {
				own, whole = p.N, true
				break
			}
		}
		if !whole {
			continue
		}
		out[i] = Expect{Kept: true, Packet: own}
		if start < 0 || f.Start < start {
			continue
		}
		out[i].Must = true
		j, _ := slices.BinarySearchFunc(fronts, f.End, func(x at, end int64) int {
			if x.front < end {
				return -1
			}
			return 1
		})
		if j < len(fronts) {
			out[i].Packet, out[i].Exact = fronts[j].n, true
		}
	}
	return out
}

// covers reports whether the ranges cover [a, b).
func covers(rs [][2]int64, a, b int64) bool {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(x, y [2]int64) int { return cmp.Compare(x[0], y[0]) })
	for _, r := range rs {
		if r[0] > a {
			return false
		}
		a = max(a, r[1])
		if a >= b {
			return true
		}
	}
	return a >= b
}

// tcpHeader is what the truth needs of a TCP packet.
type tcpHeader struct {
	src, dst netip.AddrPort
	seq      uint32
	syn, ack bool
	payload  []byte
}

// parseTCP decodes a packet to TCP by hand (IPv4 without fragments, IPv6
// with its hop-by-hop, routing and destination options headers): the
// truth does not use kfsniff's decoding.
func parseTCP(p *capture.Packet) (tcpHeader, bool) {
	var h tcpHeader
	et, b, _, ok := p.Link.Network(p.Data)
	if !ok {
		return h, false
	}
	var src, dst netip.Addr
	var proto byte
	switch et {
	case capture.EtherTypeIPv4:
		if len(b) < 20 || b[0]>>4 != 4 {
			return h, false
		}
		ihl := int(b[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(b[2:]))
		if ihl < 20 || len(b) < ihl || binary.BigEndian.Uint16(b[6:])&0x3fff != 0 {
			return h, false // fragments are not followed
		}
		proto = b[9]
		src, dst = netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20]))
		if total >= ihl && total < len(b) {
			b = b[:total] // an Ethernet trailer is not payload
		}
		b = b[ihl:]
	case capture.EtherTypeIPv6:
		if len(b) < 40 || b[0]>>4 != 6 {
			return h, false
		}
		plen := int(binary.BigEndian.Uint16(b[4:]))
		proto = b[6]
		src, dst = netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40]))
		b = b[40:]
		if plen < len(b) {
			b = b[:plen]
		}
		for proto == 0 || proto == 43 || proto == 60 {
			if len(b) < 8 || len(b) < (int(b[1])+1)*8 {
				return h, false
			}
			proto, b = b[0], b[(int(b[1])+1)*8:]
		}
	default:
		return h, false
	}
	if proto != 6 || len(b) < 20 {
		return h, false
	}
	off := int(b[12]>>4) * 4
	if off < 20 || len(b) < off {
		return h, false
	}
	h.src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(b))
	h.dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(b[2:]))
	h.seq = binary.BigEndian.Uint32(b[4:])
	h.syn, h.ack = b[13]&0x02 != 0, b[13]&0x10 != 0
	h.payload = b[off:]
	return h, true
}
