package packet

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/internal/fuzzing"
)

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
		kind Kind
		dst  netip.Addr
	}{
		{"hop-by-hop, routing done, destination", ipv6(v6b, 0, ext(43, 1), srh(60, 0, v6b), ext(6, 1), tcp), TCP, v6b},
		{"routing to a waypoint: the final destination", ipv6(v6way, 43, srh(60, 1, v6b, v6way), ext(6, 1), tcp), TCP, v6b},
		{"source route (type 0)", ipv6(v6way, 43, route0, tcp), TCP, v6b},
		{"authentication header", ipv6(v6b, 51, ah, tcp), TCP, v6b},
		{"fragment", ipv6(v6b, 0, ext(44, 1), frag, make([]byte, 16)), Fragment, v6b},
		{"no next header", ipv6(v6b, 60, ext(59, 1)), NonTCP, v6b},
		{"UDP after options", ipv6(v6b, 60, ext(17, 1), make([]byte, 8)), NonTCP, v6b},
		{"too many headers", ipv6(v6b, 60, ext(60, 1), ext(60, 1), ext(60, 1), ext(60, 1), ext(60, 1), ext(60, 1), ext(60, 1), ext(60, 1), ext(6, 1), tcp), NonTCP, v6b},
		{"header cut", ipv6(v6b, 60, ext(6, 1)[:4]), Bad, v6b},
		{"header longer than the packet", ipv6(v6b, 60, []byte{6, 3, 1, 2, 0, 0, 0, 0}), Bad, v6b},
		{"IPv6 in IPv6 with options", ipv6(v6way, 41, ipv6(v6b, 60, ext(6, 1), tcp)), TCP, v6b},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Headers
			h.Init()
			kind, src, dst, err := h.Parse(raw(tc.pkt))
			if kind != tc.kind {
				t.Fatalf("kind %d (%v), want %d", kind, err, tc.kind)
			}
			switch kind {
			case TCP:
				if src != netip.AddrPortFrom(v6a, 51000) || dst != netip.AddrPortFrom(tc.dst, 9092) {
					t.Errorf("%v -> %v", src, dst)
				}
			case Fragment:
				f := &h.Frag
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
		kind Kind
	}{
		{"first", ip4(0x2000, 16), Fragment},
		{"last", ip4(100, 13), Fragment},
		{"not a multiple of 8 before others", ip4(0x2000, 13), Bad},
		{"empty before others", ip4(0x2000, 0), Bad},
		{"ends past 65535 bytes", ip4(0x1fff, 16), Bad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Headers
			h.Init()
			if kind, _, _, err := h.Parse(raw(tc.pkt)); kind != tc.kind {
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
				d := NewDefrag(&Bounds{})
				var h Headers
				h.Init()
				var got []byte
				var losses []FragLoss
				for i, pc := range tc.pieces {
					pkt := v4(pc.off, pc.more, pc.data)
					if family == "IPv6" {
						pkt = v6(pc.off, pc.more, pc.data)
					}
					p := raw(pkt)
					p.N = uint64(i + 1)
					if kind, _, _, err := h.Parse(p); kind != Fragment {
						t.Fatalf("piece %d: kind %d (%v)", i, kind, err)
					}
					if dg := d.Add(p, &h.Frag); dg != nil {
						if got != nil {
							t.Fatal("two datagrams")
						}
						kind, src, dst, err := h.Parse(dg)
						if kind != TCP || src.Port() != 51000 || dst.Port() != 9092 {
							t.Fatalf("datagram: kind %d (%v) %v -> %v", kind, err, src, dst)
						}
						got = append(append([]byte(nil), h.TCP.Contents...), h.TCP.Payload...)
					}
					losses = append(losses, d.Lost...)
					d.Lost = d.Lost[:0]
				}
				d.End()
				losses = append(losses, d.Lost...)
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
		d := NewDefrag(&Bounds{})
		var h Headers
		h.Init()
		p := raw(v4(0, true, seg[:128]))
		p.Data = p.Data[:100]
		if kind, _, _, _ := h.Parse(p); kind != Fragment || !h.Frag.cut() {
			t.Fatalf("kind %d, cut %v", kind, h.Frag.cut())
		}
		d.Add(p, &h.Frag)
		if len(d.Lost) != 1 || d.Lost[0].Why != FragSnaplen {
			t.Errorf("losses %+v", d.Lost)
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
		d := NewDefrag(&Bounds{MaxFragDatagrams: 8, MaxFragBytes: 1 << 20})
		var h Headers
		h.Init()
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
			if kind, _, _, err := h.Parse(p); kind != Fragment {
				t.Fatalf("fragment %d: kind %d (%v)", n, kind, err)
			}
			if _, ok := firstOf[fr.dg]; !ok {
				firstOf[fr.dg] = n
			}
			if dg := d.Add(p, &h.Frag); dg != nil {
				hdr := 20
				if dg.Data[0]>>4 == 6 {
					hdr = 40
				}
				out = append(out, bytes.Clone(dg.Data[hdr:]))
			}
			for _, l := range d.Lost {
				lost[l.Packet]++
			}
			d.Lost = d.Lost[:0]
			if len(d.table) > d.maxDatagrams || d.held > d.maxBytes {
				t.Fatalf("%d datagrams holding %d bytes", len(d.table), d.held)
			}
		}
		d.End()
		for _, l := range d.Lost {
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
