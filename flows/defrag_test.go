package flows

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/internal/fuzzing"
)

// fragScript writes one connection whose client sends segments of
// 1000 bytes, each in three IP fragments (400, 400, 220 bytes), written
// interleaved (every first fragment, then every second, ...) so that n
// datagrams are in progress at once, then answers each segment later.
func fragScript(n int, opt gen.ConnOptions) func(w *gen.Writer) {
	return func(w *gen.Writer) {
		opt.MSS, opt.FragmentSize, opt.InterleaveFragments = 1000, 400, true
		c := w.Conn(bClient(1), bBroker, bt0, opt)
		c.Send(gen.ClientToServer, bt0.Add(time.Millisecond), bigProduce(1, n*1000))
		c.Response(bt0.Add(2*time.Second), 1, produceResp())
	}
}

// fragBytes is the IP payload the fragments of n segments carry (each a
// 20-byte TCP header and 1000 bytes).
func fragBytes(n int) int64 { return int64(n * 1020) }

// TestDefragBounds: datagrams in progress and the bytes they hold stay
// within their bounds after every packet; what the bounds drop is counted
// (capture-wide and on the connection, whose first fragments were seen),
// every fragment's bytes either reassembled or counted lost; with room
// enough, everything is reassembled and the request decodes.
func TestDefragBounds(t *testing.T) {
	for _, tc := range []struct {
		name        string
		datagrams   int
		bytes       int
		reassembled int64
	}{
		{name: "room for all", datagrams: 4, bytes: 1 << 20, reassembled: 4},
		{name: "two datagrams", datagrams: 2, bytes: 1 << 20},
		{name: "5000 bytes", datagrams: 100, bytes: 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MaxFragDatagrams, cfg.MaxFragBytes = tc.datagrams, tc.bytes
			a, ev := run(t, cfg, fragScript(4, gen.ConnOptions{}), func(a *Analyzer) {
				if d := a.frag; len(d.table) > tc.datagrams || d.held > tc.bytes {
					t.Fatalf("%d datagrams holding %d bytes in progress; bounds %d, %d", len(d.table), d.held, tc.datagrams, tc.bytes)
				}
			})
			st := a.Stats()
			if st.Fragments != 12 || st.Reassembled != tc.reassembled {
				t.Errorf("%d fragments, %d reassembled; want 12, %d", st.Fragments, st.Reassembled, tc.reassembled)
			}
			lost := st.FragLost[FragBound] + st.FragLost[FragMissing]
			if (tc.reassembled == 4) != (lost == 0) || tc.reassembled < 4 && st.FragLost[FragBound] == 0 {
				t.Errorf("lost %v", st.FragLost)
			}
			if tc.reassembled == 0 && st.FragLostBytes != fragBytes(4) {
				t.Errorf("%d bytes of fragments counted lost, want all %d", st.FragLostBytes, fragBytes(4))
			}
			c := a.Conns()
			if tc.reassembled == 4 {
				if len(ev.requests) != 1 || ev.requests[0].Err != nil {
					t.Errorf("requests %v", ev.requests)
				}
				return
			}
			if len(c) != 1 {
				// The connection is known from the handshake and the
				// response even when every fragment is lost.
				t.Fatalf("%d connections", len(c))
			}
			// Each segment's first fragment (with the ports) was seen
			// and its datagram lost before another fragment joined it.
			if c[0].FragLost != 4 || c[0].FragLostBytes != 4*400 {
				t.Errorf("connection: %d datagrams, %d bytes lost; want 4 first fragments of 400 bytes", c[0].FragLost, c[0].FragLostBytes)
			}
		})
	}
}

// TestDefragTimeout: a datagram missing a fragment is given up once the
// timeout has passed in capture time, at the next packet, not only at the
// end; the problem names the packet of its first fragment.
func TestDefragTimeout(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FragTimeout = time.Second
	lostAt := uint64(0)
	pkts := 0
	a, _ := run(t, cfg, func(w *gen.Writer) {
		c := w.Conn(bClient(2), bBroker, bt0, gen.ConnOptions{MSS: 1000, FragmentSize: 400, FragmentFaults: map[int]gen.FragmentFault{0: gen.FragMissing}})
		c.Send(gen.ClientToServer, bt0.Add(time.Millisecond), bigProduce(1, 996))
		c.Response(bt0.Add(3*time.Second), 1, produceResp())
	}, func(a *Analyzer) {
		pkts++
		if lostAt == 0 && a.stats.FragLost[FragMissing] > 0 {
			lostAt = uint64(pkts)
		}
	})
	if lostAt == 0 || lostAt > uint64(a.stats.Packets) {
		t.Fatalf("the datagram was given up at the end (packet %d of %d), not at the first packet after the timeout", lostAt, a.stats.Packets)
	}
	c := a.Conns()[0]
	var pr *Problem
	for i := range c.Problems {
		if strings.Contains(c.Problems[i].What, "not reassembled") {
			pr = &c.Problems[i]
		}
	}
	if pr == nil || c.FragLost != 1 {
		t.Fatalf("connection: %d datagrams lost, problems %v", c.FragLost, c.Problems)
	}
	// Packets 1-3 are the handshake; 4 is the first fragment.
	if pr.Packet != 4 {
		t.Errorf("problem at packet %d, want the first fragment's (4)", pr.Packet)
	}
}

// raw returns a raw-IP packet.
func raw(b []byte) *capture.Packet {
	return &capture.Packet{N: 1, Link: capture.LinkRaw, Data: b, Len: len(b)}
}

// tcpHeader is a 20-byte TCP header from sport to dport.
func tcpHeader(sport, dport uint16) []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint16(b, sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint32(b[4:], 1000)
	b[12] = 5 << 4
	b[13] = 0x10 // ACK
	binary.BigEndian.PutUint16(b[14:], 1000)
	return b
}

var (
	v6a   = netip.MustParseAddr("fd00::1")
	v6b   = netip.MustParseAddr("fd00::2")
	v6way = netip.MustParseAddr("fd00::99")
)

// ipv6 builds an IPv6 packet from v6a to dst whose next header is nh.
func ipv6(dst netip.Addr, nh byte, rest ...[]byte) []byte {
	b := make([]byte, 40)
	b[0] = 6 << 4
	b[6], b[7] = nh, 64
	copy(b[8:], v6a.AsSlice())
	copy(b[24:], dst.AsSlice())
	for _, r := range rest {
		b = append(b, r...)
	}
	binary.BigEndian.PutUint16(b[4:], uint16(len(b)-40))
	return b
}

// ext is an extension header (options padded) followed by nh.
func ext(nh byte, n int) []byte {
	b := make([]byte, 8*n)
	b[0], b[1] = nh, byte(n-1)
	if n > 0 {
		b[2], b[3] = 1, byte(8*n-4) // PadN
	}
	return b
}

// srh is a segment routing header (type 4) followed by nh, with segments
// left and the segment list.
func srh(nh byte, left byte, segs ...netip.Addr) []byte {
	b := []byte{nh, byte(2 * len(segs)), 4, left, byte(len(segs) - 1), 0, 0, 0}
	for _, s := range segs {
		b = append(b, s.AsSlice()...)
	}
	return b
}

func TestParseIPv6Extensions(t *testing.T) {
	tcp := tcpHeader(51000, 9092)
	route0 := []byte{6, 4, 0, 2, 0, 0, 0, 0}
	route0 = append(append(route0, v6way.AsSlice()...), v6b.AsSlice()...)
	ah := append([]byte{6, 4, 0, 0}, make([]byte, 20)...) // (4+2)*4 = 24 bytes
	frag := []byte{6, 0, 0x00, 0x51, 0, 0, 0, 7}          // offset 80 bytes (10<<3), more, id 7
	for _, tc := range []struct {
		name string
		pkt  []byte
		kind pktKind
		dst  netip.Addr
	}{
		{"hop-by-hop, routing done, destination", ipv6(v6b, 0, ext(43, 1), srh(60, 0, v6b), ext(6, 1), tcp), pktTCP, v6b},
		{"routing to a waypoint: the final destination", ipv6(v6way, 43, srh(60, 1, v6b, v6way), ext(6, 1), tcp), pktTCP, v6b},
		{"source route (type 0)", ipv6(v6way, 43, route0, tcp), pktTCP, v6b},
		{"authentication header", ipv6(v6b, 51, ah, tcp), pktTCP, v6b},
		{"fragment", ipv6(v6b, 0, ext(44, 1), frag, make([]byte, 16)), pktFragment, v6b},
		{"no next header", ipv6(v6b, 60, ext(59, 1)), pktNonTCP, v6b},
		{"UDP after options", ipv6(v6b, 60, ext(17, 1), make([]byte, 8)), pktNonTCP, v6b},
		{"too many headers", ipv6(v6b, 60, ext(60, 1), ext(60, 1), ext(60, 1), ext(60, 1), ext(60, 1), ext(60, 1), ext(60, 1), ext(60, 1), ext(6, 1), tcp), pktNonTCP, v6b},
		{"header cut", ipv6(v6b, 60, ext(6, 1)[:4]), pktBad, v6b},
		{"header longer than the packet", ipv6(v6b, 60, []byte{6, 3, 1, 2, 0, 0, 0, 0}), pktBad, v6b},
		{"IPv6 in IPv6 with options", ipv6(v6way, 41, ipv6(v6b, 60, ext(6, 1), tcp)), pktTCP, v6b},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h headers
			h.init()
			kind, src, dst, err := h.parse(raw(tc.pkt))
			if kind != tc.kind {
				t.Fatalf("kind %d (%v), want %d", kind, err, tc.kind)
			}
			switch kind {
			case pktTCP:
				if src != netip.AddrPortFrom(v6a, 51000) || dst != netip.AddrPortFrom(tc.dst, 9092) {
					t.Errorf("%v -> %v", src, dst)
				}
			case pktFragment:
				f := &h.frag
				if !f.v6 || f.off != 80 || !f.more || f.id != 7 || f.proto != 6 || len(f.hdr) != 48 || f.hdr[f.nhOff] != 44 || f.size != 16 {
					t.Errorf("fragment %+v", f)
				}
			}
		})
	}
}

func TestParseIPv4Fragments(t *testing.T) {
	ip4 := func(flagsOff uint16, payload int) []byte {
		b := make([]byte, 20+payload)
		b[0], b[8], b[9] = 0x45, 64, 6
		binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
		binary.BigEndian.PutUint16(b[4:], 0x1234)
		binary.BigEndian.PutUint16(b[6:], flagsOff)
		copy(b[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
		return b
	}
	for _, tc := range []struct {
		name string
		pkt  []byte
		kind pktKind
	}{
		{"first", ip4(0x2000, 16), pktFragment},
		{"last", ip4(100, 13), pktFragment},
		{"not a multiple of 8 before others", ip4(0x2000, 13), pktBad},
		{"empty before others", ip4(0x2000, 0), pktBad},
		{"ends past 65535 bytes", ip4(0x1fff, 16), pktBad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h headers
			h.init()
			if kind, _, _, err := h.parse(raw(tc.pkt)); kind != tc.kind {
				t.Errorf("kind %d (%v), want %d", kind, err, tc.kind)
			}
		})
	}
}

// TestDefragDatagram: fragments in any order, duplicated, become the
// datagram they were cut from, its header made whole; overlapping ones
// with other bytes lose the datagram once, and its later fragments with
// it; a fragment cut by the snaplen loses it.
func TestDefragDatagram(t *testing.T) {
	seg := append(tcpHeader(51000, 9092), bytes.Repeat([]byte("kafka!"), 50)...) // 320 bytes
	v4 := func(off int, more bool, data []byte) []byte {
		b := make([]byte, 20, 20+len(data))
		b[0], b[8], b[9] = 0x45, 64, 6
		binary.BigEndian.PutUint16(b[2:], uint16(20+len(data)))
		binary.BigEndian.PutUint16(b[4:], 0x4321)
		fo := uint16(off / 8)
		if more {
			fo |= 0x2000
		}
		binary.BigEndian.PutUint16(b[6:], fo)
		copy(b[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
		return append(b, data...)
	}
	v6 := func(off int, more bool, data []byte) []byte {
		fh := []byte{6, 0, 0, 0, 0, 0, 0, 9}
		m := uint16(off/8) << 3
		if more {
			m |= 1
		}
		binary.BigEndian.PutUint16(fh[2:], m)
		return ipv6(v6b, 0, ext(44, 1), fh, data)
	}
	type piece struct {
		off  int
		more bool
		data []byte
	}
	cut := func(pcs ...piece) []piece { return pcs }
	a, b, c := piece{0, true, seg[:128]}, piece{128, true, seg[128:256]}, piece{256, false, seg[256:]}
	bad := piece{64, true, bytes.Repeat([]byte{0xee}, 128)}
	for _, tc := range []struct {
		name   string
		pieces []piece
		whole  bool
		lost   string
	}{
		{"in order", cut(a, b, c), true, ""},
		{"reversed", cut(c, b, a), true, ""},
		{"duplicated", cut(a, a, c, b, b), true, ""},
		{"overlap", cut(a, bad, b, c), false, FragOverlap},
		{"missing", cut(a, c), false, FragMissing},
		{"two last fragments", cut(c, piece{256, false, seg[256:300]}), false, FragOverlap},
	} {
		for _, family := range []string{"IPv4", "IPv6"} {
			t.Run(tc.name+" "+family, func(t *testing.T) {
				d := newDefrag(&Config{})
				var h headers
				h.init()
				var got []byte
				var losses []FragLoss
				for i, pc := range tc.pieces {
					pkt := v4(pc.off, pc.more, pc.data)
					if family == "IPv6" {
						pkt = v6(pc.off, pc.more, pc.data)
					}
					p := raw(pkt)
					p.N = uint64(i + 1)
					if kind, _, _, err := h.parse(p); kind != pktFragment {
						t.Fatalf("piece %d: kind %d (%v)", i, kind, err)
					}
					if dg := d.add(p, &h.frag); dg != nil {
						if got != nil {
							t.Fatal("two datagrams")
						}
						kind, src, dst, err := h.parse(dg)
						if kind != pktTCP || src.Port() != 51000 || dst.Port() != 9092 {
							t.Fatalf("datagram: kind %d (%v) %v -> %v", kind, err, src, dst)
						}
						got = append(append([]byte(nil), h.tcp.Contents...), h.tcp.Payload...)
					}
					losses = append(losses, d.lost...)
					d.lost = d.lost[:0]
				}
				d.end()
				losses = append(losses, d.lost...)
				if tc.whole != (got != nil) || tc.whole && !bytes.Equal(got, seg) {
					t.Fatalf("datagram %d bytes, want %v", len(got), tc.whole)
				}
				if tc.lost == "" {
					if len(losses) != 0 {
						t.Errorf("losses %+v", losses)
					}
					return
				}
				if len(losses) != 1 || losses[0].Why != tc.lost || losses[0].Packet != 1 {
					t.Fatalf("losses %+v, want one %q from packet 1", losses, tc.lost)
				}
				if l := losses[0]; tc.pieces[0].off == 0 && (!l.TCP || l.Src.Port() != 51000 || l.Dst.Port() != 9092) {
					t.Errorf("loss does not name the connection: %+v", l)
				}
				if len(d.table) != 0 || d.held != 0 {
					t.Errorf("%d datagrams, %d bytes left", len(d.table), d.held)
				}
			})
		}
	}
	t.Run("cut by the snaplen", func(t *testing.T) {
		d := newDefrag(&Config{})
		var h headers
		h.init()
		p := raw(v4(0, true, seg[:128]))
		p.Data = p.Data[:100]
		if kind, _, _, _ := h.parse(p); kind != pktFragment || !h.frag.cut() {
			t.Fatalf("kind %d, cut %v", kind, h.frag.cut())
		}
		d.add(p, &h.frag)
		if len(d.lost) != 1 || d.lost[0].Why != FragSnaplen {
			t.Errorf("losses %+v", d.lost)
		}
	})
}

// FuzzDefrag cuts up to four IP datagrams (IPv4 or IPv6, up to 2 KB) into
// fragments at sizes chosen by the input, drops, duplicates or spoils some
// (a fragment overlapping others with other bytes, in a datagram with none
// dropped) and feeds them interleaved in an order chosen by the input.
// Every datagram must come out exactly once: reassembled, equal byte for
// byte to what was cut up (and only if every fragment was fed), or counted
// lost; the bounds hold after every fragment; nothing is left at the end.
func FuzzDefrag(f *testing.F) {
	f.Add([]byte{0, 40, 3, 0, 0, 0})
	f.Add([]byte{3, 200, 7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add(bytes.Repeat([]byte{0x55, 0xaa, 0x0f, 0xf0}, 40))
	f.Fuzz(func(t *testing.T, in []byte) {
		defer fuzzing.Input("FuzzDefrag", in)()
		next := func() int {
			if len(in) == 0 {
				return 0
			}
			b := in[0]
			in = in[1:]
			return int(b)
		}
		type frag struct {
			dg   int
			off  int
			more bool
			data []byte
		}
		nd := 1 + next()%4
		var originals [][]byte
		var v6s []bool
		var queues [][]frag
		spoilt := make([]bool, nd)
		dropped := make([]bool, nd)
		for i := range nd {
			v6 := next()%2 == 1
			size := 16 + 8*(next()*7%256)
			body := make([]byte, size)
			for j := range body {
				body[j] = byte(i*31 + j*7 + j/256)
			}
			binary.BigEndian.PutUint16(body, uint16(i)) // tell the datagrams apart
			originals, v6s = append(originals, body), append(v6s, v6)
			var q []frag
			for off := 0; off < size; {
				n := min(size-off, 8*(1+next()%64))
				if off == 0 && n == size {
					n = size - 8 // a fragment, not the whole datagram
				}
				fr := frag{dg: i, off: off, more: off+n < size, data: body[off : off+n]}
				switch next() % 8 {
				case 0:
					dropped[i] = true
				case 1:
					q = append(q, fr, fr)
				default:
					q = append(q, fr)
				}
				off += n
			}
			if next()%4 == 0 && !dropped[i] {
				// Other bytes over a part of the datagram.
				off := 8 * (next() % (size / 8))
				n := min(size-off-8, 8*(1+next()%8))
				if n > 0 {
					bad := bytes.Repeat([]byte{0xee}, n)
					q = append(q[:0:0], append([]frag{{dg: i, off: off, more: true, data: bad}}, q...)...)
					if k := next() % len(q); k > 0 {
						q[0], q[k] = q[k], q[0]
					}
					spoilt[i] = true
				}
			}
			queues = append(queues, q)
		}
		d := newDefrag(&Config{MaxFragDatagrams: 8, MaxFragBytes: 1 << 20})
		var h headers
		h.init()
		var out [][]byte
		lost := map[uint64]int{} // first fragment's packet -> losses
		firstOf := map[int]uint64{}
		n := uint64(0)
		now := bt0
		for {
			live := 0
			for _, q := range queues {
				if len(q) > 0 {
					live++
				}
			}
			if live == 0 {
				break
			}
			i := next() % len(queues)
			for len(queues[i]) == 0 {
				i = (i + 1) % len(queues)
			}
			fr := queues[i][0]
			queues[i] = queues[i][1:]
			n++
			now = now.Add(time.Microsecond)
			var pkt []byte
			if v6s[fr.dg] {
				fh := []byte{6, 0, 0, 0, 0, 0, 0, byte(fr.dg)}
				m := uint16(fr.off/8) << 3
				if fr.more {
					m |= 1
				}
				binary.BigEndian.PutUint16(fh[2:], m)
				pkt = ipv6(v6b, 44, fh, fr.data)
			} else {
				pkt = make([]byte, 20, 20+len(fr.data))
				pkt[0], pkt[8], pkt[9] = 0x45, 64, 6
				binary.BigEndian.PutUint16(pkt[2:], uint16(20+len(fr.data)))
				binary.BigEndian.PutUint16(pkt[4:], uint16(fr.dg))
				fo := uint16(fr.off / 8)
				if fr.more {
					fo |= 0x2000
				}
				binary.BigEndian.PutUint16(pkt[6:], fo)
				copy(pkt[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
				pkt = append(pkt, fr.data...)
			}
			p := raw(pkt)
			p.N, p.Time = n, now
			if kind, _, _, err := h.parse(p); kind != pktFragment {
				t.Fatalf("fragment %d: kind %d (%v)", n, kind, err)
			}
			if _, ok := firstOf[fr.dg]; !ok {
				firstOf[fr.dg] = n
			}
			if dg := d.add(p, &h.frag); dg != nil {
				hdr := 20
				if dg.Data[0]>>4 == 6 {
					hdr = 40
				}
				out = append(out, bytes.Clone(dg.Data[hdr:]))
			}
			for _, l := range d.lost {
				lost[l.Packet]++
			}
			d.lost = d.lost[:0]
			if len(d.table) > d.maxDatagrams || d.held > d.maxBytes {
				t.Fatalf("%d datagrams holding %d bytes", len(d.table), d.held)
			}
		}
		d.end()
		for _, l := range d.lost {
			lost[l.Packet]++
		}
		if len(d.table) != 0 || d.held != 0 {
			t.Fatalf("%d datagrams holding %d bytes after the end", len(d.table), d.held)
		}
		for i, orig := range originals {
			outs := 0
			for _, o := range out {
				if len(o) >= 2 && int(binary.BigEndian.Uint16(o)) == i {
					outs++
					if !bytes.Equal(o, orig) {
						t.Fatalf("datagram %d reassembled with other bytes", i)
					}
				}
			}
			first, fed := firstOf[i]
			losses := lost[first]
			if !fed {
				if outs != 0 {
					t.Fatalf("datagram %d reassembled from nothing", i)
				}
				continue
			}
			if outs+losses != 1 {
				t.Fatalf("datagram %d (dropped %v, spoilt %v): %d reassembled, %d losses", i, dropped[i], spoilt[i], outs, losses)
			}
			if outs == 1 && dropped[i] {
				t.Fatalf("datagram %d reassembled without one of its fragments", i)
			}
		}
	})
}
