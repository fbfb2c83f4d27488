package packet

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/kfsniff/kfsniff/capture"
)

// IP fragments are reassembled before TCP sees them, in packet order and in
// capture time, with bounds: datagrams in progress (Bounds.MaxFragDatagrams),
// bytes they hold (Bounds.MaxFragBytes) and how long one may wait for its
// missing fragments (Bounds.FragTimeout). What cannot be reassembled is a
// FragLoss, counted capture-wide and, when the first fragment named the TCP
// connection, on that connection with the packet of its first fragment.
//
// gopacket's ip4defrag does IPv4 only, allocates per datagram and bounds
// nothing; this one takes IPv4 and IPv6 (fragment header) alike, reuses
// its buffers and is driven by packet time, so that a capture gives the
// same result however it is sharded: the pipeline's reader reassembles
// before sharding (Sharder.Route), one analyzer reassembles for itself.

// Reasons a datagram is not reassembled (flows.Stats.FragLost keys).
const (
	FragMissing = "missing" // a fragment never came (timeout, or the capture ended)
	FragOverlap = "overlap" // fragments overlap with different bytes, or disagree on the end
	FragBound   = "bound"   // dropped to keep within the bounds (oldest first)
	FragSnaplen = "snaplen" // a fragment was cut by the snapshot length
)

// Default bounds of reassembly, as Linux's (ipfrag_time 30 s, 4 MB).
const (
	DefaultFragTimeout   = 30 * time.Second
	DefaultFragDatagrams = 1024
	DefaultFragBytes     = 4 << 20
	// maxFragments bounds the fragments of one datagram (a 64 KB
	// datagram in 576-byte packets has 118).
	maxFragments = 256
	// A fragment of a datagram reassembled less than dupWindow ago, that
	// fits in it, is a duplicate come late, not a new datagram; the last
	// maxRecent datagrams reassembled are remembered for this.
	dupWindow = time.Second
	maxRecent = 64
	// keepBuffers bounds the datagram buffers kept for reuse.
	keepBuffers = 16
)

// FragLoss is an IP datagram that could not be reassembled.
type FragLoss struct {
	Why       string
	Fragments int // fragments of it taken before it was given up
	Bytes     int // their bytes
	// File and Packet locate its first fragment seen.
	File   int
	Packet uint64
	// TCP is set when the fragment at offset 0 was seen and named a TCP
	// connection: Src and Dst are its endpoints.
	TCP      bool
	Src, Dst netip.AddrPort
}

type fragKey struct {
	src, dst [16]byte
	id       uint32
	proto    uint8
	v6       bool
}

type span struct{ off, end int }

type recentDatagram struct {
	key   fragKey
	total int
	at    time.Time
}

// late reports whether a fragment at off..end of k, which starts no
// datagram in progress, belongs to one reassembled just before now.
func (d *Defrag) late(k fragKey, off, end int, now time.Time) bool {
	for i := range min(d.nrecent, maxRecent) {
		r := &d.recent[i]
		if r.key == k && end <= r.total && now.Sub(r.at) < dupWindow {
			return true
		}
	}
	return false
}

// datagram is one datagram being reassembled.
type datagram struct {
	key   fragKey
	first time.Time // capture time of its first fragment seen
	buf   []byte    // the payload so far; len is the highest end seen
	spans []span    // the fragments taken, in arrival order
	total int       // payload length once the last fragment came, else -1
	have  int       // bytes taken (spans do not overlap)
	hdr   []byte    // header of the fragment at offset 0, once seen
	nhOff int
	dead  bool // given up: later fragments are dropped until it times out
	loss  FragLoss
}

// Defrag reassembles IP fragments; see the top of this file.
type Defrag struct {
	timeout      time.Duration
	maxDatagrams int
	maxBytes     int
	table        map[fragKey]*datagram
	queue        []*datagram // oldest first; entries no longer in table are skipped
	head         int
	held         int // bytes of the datagrams' buffers
	free         [][]byte
	out          []byte
	peek         Headers // reads the TCP endpoints of first fragments
	peekBuf      []byte
	// Lost holds the datagrams given up, for the caller to take.
	Lost     []FragLoss
	datagram capture.Packet
	// recent are the last datagrams reassembled (a ring).
	recent    [maxRecent]recentDatagram
	nrecent   int
	spansFree [][]span
}

// NewDefrag returns a Defrag within b's fragment bounds.
func NewDefrag(b *Bounds) *Defrag {
	d := &Defrag{
		timeout:      b.FragTimeout,
		maxDatagrams: b.MaxFragDatagrams,
		maxBytes:     b.MaxFragBytes,
		table:        make(map[fragKey]*datagram),
	}
	if d.timeout <= 0 {
		d.timeout = DefaultFragTimeout
	}
	if d.maxDatagrams <= 0 {
		d.maxDatagrams = DefaultFragDatagrams
	}
	if d.maxBytes <= 0 {
		d.maxBytes = DefaultFragBytes
	}
	d.peek.Init()
	return d
}

// Reassembles says whether datagrams of this protocol are reassembled:
// those that can carry TCP (directly, through IPv6 extension headers, or
// tunnelled).
func Reassembles(f *Frag) bool {
	switch f.proto {
	case protoTCP, protoIPv4, protoIPv6:
		return true
	case protoHopByHop, protoRouting, protoDestination, protoAH:
		return f.v6
	}
	return false
}

// Expire gives up the datagrams waiting longer than the timeout at now
// (their losses go to d.Lost).
func (d *Defrag) Expire(now time.Time) {
	for d.head < len(d.queue) {
		g := d.queue[d.head]
		if d.table[g.key] == g && now.Sub(g.first) <= d.timeout {
			return
		}
		d.pop()
		d.giveUp(g, FragMissing)
	}
}

// giveUp gives up g, just popped from the queue, for why (its loss goes
// to d.Lost); a dead one is just forgotten (its loss was counted). It
// reports false for an entry no longer in the table, skipped.
func (d *Defrag) giveUp(g *datagram, why string) bool {
	switch {
	case d.table[g.key] != g:
		return false
	case g.dead:
		d.forget(g)
	default:
		d.drop(g, why)
	}
	return true
}

// Held returns the datagrams in progress and the bytes they hold.
func (d *Defrag) Held() (datagrams, bytes int) { return len(d.table), d.held }

// Pending reports whether any datagram is in progress.
func (d *Defrag) Pending() bool { return d.head < len(d.queue) }

func (d *Defrag) pop() {
	d.queue[d.head] = nil
	d.head++
	if d.head == len(d.queue) {
		d.queue, d.head = d.queue[:0], 0
	} else if d.head > 1024 && d.head > len(d.queue)/2 {
		n := copy(d.queue, d.queue[d.head:])
		clear(d.queue[n:])
		d.queue, d.head = d.queue[:n], 0
	}
}

// Add takes the fragment f of packet p; datagrams given up go to d.Lost.
// It returns the datagram f completes, as a raw IP packet at p's place,
// valid until the next call; or nil.
func (d *Defrag) Add(p *capture.Packet, f *Frag) *capture.Packet {
	k := fragKey{src: f.src.As16(), dst: f.dst.As16(), id: f.id, proto: f.proto, v6: f.v6}
	g := d.table[k]
	if g == nil {
		if d.late(k, f.off, f.off+f.size, p.Time) {
			return nil
		}
		for len(d.table) >= d.maxDatagrams {
			d.dropOldest()
		}
		g = &datagram{key: k, first: p.Time, total: -1}
		g.loss = FragLoss{File: p.File, Packet: p.N}
		if n := len(d.spansFree); n > 0 {
			g.spans, d.spansFree = d.spansFree[n-1][:0], d.spansFree[:n-1]
		}
		d.table[k] = g
		d.queue = append(d.queue, g)
	}
	g.loss.Fragments++
	g.loss.Bytes += len(f.data)
	if g.dead {
		return nil
	}
	switch {
	case f.cut():
		d.drop(g, FragSnaplen)
		return nil
	case len(g.spans) >= maxFragments:
		d.drop(g, FragBound)
		return nil
	}
	end := f.off + f.size
	for _, s := range g.spans {
		if f.off < s.end && s.off < end {
			if s.off == f.off && s.end == end && string(g.buf[s.off:s.end]) == string(f.data) {
				// The same fragment again (a duplicated packet).
				g.loss.Fragments--
				g.loss.Bytes -= len(f.data)
				return nil
			}
			d.drop(g, FragOverlap)
			return nil
		}
	}
	if !f.more {
		if g.total >= 0 && g.total != end || end < len(g.buf) {
			d.drop(g, FragOverlap)
			return nil
		}
		g.total = end
	} else if g.total >= 0 && end > g.total {
		d.drop(g, FragOverlap)
		return nil
	}
	if f.off == 0 {
		g.hdr = append(g.hdr[:0], f.hdr...)
		g.nhOff = f.nhOff
		d.peekTCP(g, f)
	}
	if end > len(g.buf) {
		d.grow(g, end)
	}
	copy(g.buf[f.off:], f.data)
	g.spans = append(g.spans, span{f.off, end})
	g.have += f.size
	if d.held > d.maxBytes {
		// Keep within the bound: the oldest go first, this one last.
		for d.held > d.maxBytes && d.table[k] == g {
			d.dropOldest()
		}
		if d.table[k] != g {
			return nil
		}
	}
	if g.total < 0 || g.have < g.total || g.hdr == nil {
		return nil
	}
	return d.complete(p, g)
}

// grow makes g's buffer end bytes long, from a kept buffer if one is
// large enough.
func (d *Defrag) grow(g *datagram, end int) {
	if cap(g.buf) < end {
		var b []byte
		for i := len(d.free) - 1; i >= 0; i-- {
			if cap(d.free[i]) >= end {
				b = d.free[i]
				d.free = append(d.free[:i], d.free[i+1:]...)
				break
			}
		}
		if b == nil {
			// Round up, so that a buffer fits most datagrams when reused.
			b = make([]byte, 0, max(end, min(2*end, maxDatagram), 2048))
		}
		d.held += cap(b) - cap(g.buf)
		b = append(b[:0], g.buf...)
		d.release(g.buf)
		g.buf = b
	}
	g.buf = g.buf[:end]
}

func (d *Defrag) release(b []byte) {
	if cap(b) > 0 && len(d.free) < keepBuffers {
		d.free = append(d.free, b[:0])
	}
}

// complete builds g's datagram and forgets g.
func (d *Defrag) complete(p *capture.Packet, g *datagram) *capture.Packet {
	be := binary.BigEndian
	out := append(d.out[:0], g.hdr...)
	if g.key.v6 {
		out[g.nhOff] = g.key.proto
		be.PutUint16(out[4:], uint16(len(g.hdr)-40+g.total))
	} else {
		be.PutUint16(out[2:], uint16(len(g.hdr)+g.total))
		be.PutUint16(out[6:], be.Uint16(out[6:])&0x4000) // DF kept; MF and offset cleared
		be.PutUint16(out[10:], 0)
		be.PutUint16(out[10:], ^ipChecksum(out))
	}
	out = append(out, g.buf[:g.total]...)
	d.out = out
	d.recent[d.nrecent%maxRecent] = recentDatagram{key: g.key, total: g.total, at: p.Time}
	d.nrecent++
	d.forget(g)
	d.datagram = capture.Packet{N: p.N, File: p.File, Time: p.Time, Len: len(out), Link: capture.LinkRaw, Data: out, Offset: p.Offset}
	return &d.datagram
}

// ipChecksum is the ones' complement sum of an IPv4 header.
func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

// forget removes g from the table and frees its buffers.
func (d *Defrag) forget(g *datagram) {
	delete(d.table, g.key)
	d.freeBuffers(g)
}

// freeBuffers keeps g's buffers for reuse.
func (d *Defrag) freeBuffers(g *datagram) {
	d.held -= cap(g.buf)
	d.release(g.buf)
	g.buf, g.hdr = nil, nil
	if len(d.spansFree) < keepBuffers && cap(g.spans) > 0 {
		d.spansFree = append(d.spansFree, g.spans[:0])
	}
	g.spans = nil
}

// drop gives g up for why: its loss goes to d.Lost. A datagram dropped
// for overlapping or cut fragments stays in the table, without its bytes,
// so that its later fragments are dropped with it rather than starting a
// new datagram that would never complete.
func (d *Defrag) drop(g *datagram, why string) {
	g.loss.Why = why
	d.Lost = append(d.Lost, g.loss)
	if why == FragOverlap || why == FragSnaplen {
		g.dead = true
		d.freeBuffers(g)
		return
	}
	d.forget(g)
}

// dropOldest gives up the oldest datagram for the bounds (a dead one is
// just forgotten: its loss was counted).
func (d *Defrag) dropOldest() {
	for d.head < len(d.queue) {
		g := d.queue[d.head]
		d.pop()
		if d.giveUp(g, FragBound) {
			return
		}
	}
}

// End gives up every datagram still in progress (the capture ended), in
// order of first fragment; the losses go to d.Lost.
func (d *Defrag) End() {
	for d.head < len(d.queue) {
		g := d.queue[d.head]
		d.pop()
		d.giveUp(g, FragMissing)
	}
}

// peekTCP reads the TCP endpoints from the first fragment of g, which
// holds the headers up to TCP.
func (d *Defrag) peekTCP(g *datagram, f *Frag) {
	b := append(d.peekBuf[:0], f.hdr...)
	if f.v6 {
		b[f.nhOff] = f.proto
		binary.BigEndian.PutUint16(b[4:], uint16(len(f.hdr)-40+len(f.data)))
	} else {
		binary.BigEndian.PutUint16(b[2:], uint16(len(f.hdr)+len(f.data)))
		binary.BigEndian.PutUint16(b[6:], 0)
	}
	b = append(b, f.data...)
	d.peekBuf = b
	p := capture.Packet{Link: capture.LinkRaw, Data: b, Len: len(b)}
	if kind, src, dst, _ := d.peek.Parse(&p); kind == TCP {
		g.loss.TCP, g.loss.Src, g.loss.Dst = true, src, dst
	}
}
