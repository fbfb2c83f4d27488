package packet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/kfsniff/kfsniff/capture"
)

// Kind is what a packet's headers say it is.
type Kind uint8

const (
	TCP      Kind = iota
	NonIP         // no IPv4/IPv6 (ARP, LLC, ...)
	Bad           // headers that do not decode
	Fragment      // an IPv4 or IPv6 fragment (Headers.Frag describes it)
	NonTCP        // UDP, ICMP, ...
)

// Headers decodes IPv4/IPv6 and TCP with one reused gopacket parser per
// first layer, and follows IPv6 extension headers (which the parsers stop
// at) by hand.
type Headers struct {
	parser4, parser6 *gopacket.DecodingLayerParser
	ip4              layers.IPv4
	ip6              layers.IPv6
	TCP              layers.TCP
	payload          gopacket.Payload
	decoded          []gopacket.LayerType
	// Frag describes the packet when Parse says Fragment.
	Frag Frag
}

// Frag is an IP fragment as Parse found it; its slices alias the
// packet.
type Frag struct {
	v6       bool
	src, dst netip.Addr
	id       uint32
	proto    uint8 // IPv4 protocol, or the fragment header's next header
	// hdr is the IPv4 header, or the IPv6 header and the extension
	// headers before the fragment header (the unfragmentable part);
	// nhOff is, for IPv6, where in hdr the next-header byte naming the
	// fragment header is.
	hdr   []byte
	nhOff int
	// off is where data goes in the datagram's payload, in bytes; more
	// is false for the last fragment.
	off  int
	more bool
	// size is the fragment's length as its IP header says; data holds
	// what the capture has of it (less when cut by the snaplen).
	size int
	data []byte
}

// cut says the capture holds less of the fragment than its IP length.
func (f *Frag) cut() bool { return len(f.data) < f.size }

func (h *Headers) Init() {
	h.parser4 = gopacket.NewDecodingLayerParser(layers.LayerTypeIPv4, &h.ip4, &h.ip6, &h.TCP, &h.payload)
	h.parser6 = gopacket.NewDecodingLayerParser(layers.LayerTypeIPv6, &h.ip4, &h.ip6, &h.TCP, &h.payload)
	h.parser4.IgnoreUnsupported = true
	h.parser6.IgnoreUnsupported = true
	h.decoded = make([]gopacket.LayerType, 0, 4)
}

// MaxNesting bounds the IP headers followed inside one packet (tunnels).
const MaxNesting = 4

// Parse decodes p's headers; for TCP it returns the endpoints (h.TCP
// holds the segment), for Fragment the fragment's addresses (h.Frag
// describes it), for Bad the error.
func (h *Headers) Parse(p *capture.Packet) (kind Kind, src, dst netip.AddrPort, err error) {
	et, netb, _, ok := p.Link.Network(p.Data)
	if !ok {
		return NonIP, src, dst, nil
	}
	return h.parseIP(et, netb, 0)
}

func (h *Headers) parseIP(et uint16, netb []byte, depth int) (kind Kind, src, dst netip.AddrPort, err error) {
	if et == capture.EtherTypeIPv4 {
		if src, dst, ok, err := h.tcp4(netb); ok {
			if err != nil {
				return Bad, src, dst, err
			}
			return TCP, src, dst, nil
		}
	}
	return h.parseLayers(et, netb, depth)
}

// tcp4 decodes an IPv4 packet that carries a TCP segment and is not a
// fragment, as the parser does but without its machinery (decoders
// looked up by layer type, called through interfaces: half of the
// headers' cost). ok is false for any other packet, and for one whose IP
// header does not decode or that made a decoder panic: the parser does
// those over again.
func (h *Headers) tcp4(netb []byte) (src, dst netip.AddrPort, ok bool, err error) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	ip := &h.ip4
	if ip.DecodeFromBytes(netb, gopacket.NilDecodeFeedback) != nil || ip.Flags&layers.IPv4MoreFragments != 0 || ip.FragOffset != 0 ||
		ip.Protocol != layers.IPProtocolTCP || len(ip.Payload) == 0 || len(ip.SrcIP) != 4 || len(ip.DstIP) != 4 {
		return src, dst, false, nil
	}
	if err := h.TCP.DecodeFromBytes(ip.Payload, gopacket.NilDecodeFeedback); err != nil {
		return src, dst, true, err
	}
	s, d := netip.AddrFrom4([4]byte(ip.SrcIP)), netip.AddrFrom4([4]byte(ip.DstIP))
	return netip.AddrPortFrom(s, uint16(h.TCP.SrcPort)), netip.AddrPortFrom(d, uint16(h.TCP.DstPort)), true, nil
}

// parseLayers is parseIP by the parsers.
func (h *Headers) parseLayers(et uint16, netb []byte, depth int) (kind Kind, src, dst netip.AddrPort, err error) {
	parser := h.parser4
	if et == capture.EtherTypeIPv6 {
		parser = h.parser6
	}
	h.decoded = h.decoded[:0]
	if err := parser.DecodeLayers(netb, &h.decoded); err != nil {
		return Bad, src, dst, err
	}
	var s, d netip.Addr
	isTCP := false
	for i, lt := range h.decoded {
		switch lt {
		case layers.LayerTypeIPv4:
			ip := &h.ip4
			s, _ = netip.AddrFromSlice(ip.SrcIP.To4())
			d, _ = netip.AddrFromSlice(ip.DstIP.To4())
			if ip.Flags&layers.IPv4MoreFragments != 0 || ip.FragOffset != 0 {
				h.Frag = Frag{
					src: s, dst: d, id: uint32(ip.Id), proto: uint8(ip.Protocol),
					hdr: ip.Contents, off: int(ip.FragOffset) * 8, more: ip.Flags&layers.IPv4MoreFragments != 0,
					size: int(ip.Length) - len(ip.Contents), data: ip.Payload,
				}
				if err := h.Frag.check(); err != nil {
					return Bad, src, dst, err
				}
				return Fragment, netip.AddrPortFrom(s, 0), netip.AddrPortFrom(d, 0), nil
			}
		case layers.LayerTypeIPv6:
			s, _ = netip.AddrFromSlice(h.ip6.SrcIP)
			d, _ = netip.AddrFromSlice(h.ip6.DstIP)
			if i == len(h.decoded)-1 && extension6(h.ip6.NextLayerType()) {
				// The parser stops at extension headers other than
				// hop-by-hop: follow them by hand, from the IPv6 header
				// (a slice of netb).
				return h.ext6(netb[cap(netb)-cap(h.ip6.Contents):], s, d, depth)
			}
		case layers.LayerTypeTCP:
			isTCP = true
		}
	}
	if !isTCP {
		return NonTCP, src, dst, nil
	}
	return TCP, netip.AddrPortFrom(s, uint16(h.TCP.SrcPort)), netip.AddrPortFrom(d, uint16(h.TCP.DstPort)), nil
}

func extension6(lt gopacket.LayerType) bool {
	switch lt {
	case layers.LayerTypeIPv6Routing, layers.LayerTypeIPv6Fragment, layers.LayerTypeIPv6Destination,
		layers.LayerTypeIPv6HopByHop, layers.LayerTypeIPSecAH:
		return true
	}
	return false
}

// maxExtensions bounds the IPv6 extension headers followed in one packet.
const maxExtensions = 8

// IP protocol numbers met while following IPv6 extension headers.
const (
	protoHopByHop    = 0
	protoIPv4        = 4
	protoTCP         = 6
	protoIPv6        = 41
	protoRouting     = 43
	protoFragment    = 44
	protoAH          = 51
	protoDestination = 60
)

// ext6 follows the extension headers of ip, an IPv6 packet from src to
// dst (from its fixed header on, as captured), to TCP, a fragment header
// or a tunnelled IP packet. A routing header with segments left names the
// final destination, which TCP uses as the connection's (RFC 8200 8.1).
func (h *Headers) ext6(ip []byte, src, dst netip.Addr, depth int) (kind Kind, s, d netip.AddrPort, err error) {
	if len(ip) < 40 {
		return Bad, s, d, errors.New("IPv6 header cut")
	}
	whole := 40 + int(binary.BigEndian.Uint16(ip[4:]))
	end := min(whole, len(ip))
	nh, nhOff, at := ip[6], 6, 40
	for range maxExtensions {
		switch nh {
		case protoTCP:
			if err := h.TCP.DecodeFromBytes(ip[at:end], gopacket.NilDecodeFeedback); err != nil {
				return Bad, s, d, err
			}
			return TCP, netip.AddrPortFrom(src, uint16(h.TCP.SrcPort)), netip.AddrPortFrom(dst, uint16(h.TCP.DstPort)), nil
		case protoIPv4, protoIPv6:
			if depth >= MaxNesting {
				return NonTCP, s, d, nil
			}
			et := uint16(capture.EtherTypeIPv4)
			if nh == protoIPv6 {
				et = capture.EtherTypeIPv6
			}
			return h.parseIP(et, ip[at:end], depth+1)
		case protoFragment:
			if end-at < 8 {
				return Bad, s, d, errors.New("IPv6 fragment header cut")
			}
			fh := ip[at:]
			offMore := binary.BigEndian.Uint16(fh[2:])
			h.Frag = Frag{
				v6: true, src: src, dst: dst, id: binary.BigEndian.Uint32(fh[4:]), proto: fh[0],
				hdr: ip[:at], nhOff: nhOff, off: int(offMore>>3) * 8, more: offMore&1 != 0,
				size: whole - at - 8, data: ip[at+8 : end],
			}
			if err := h.Frag.check(); err != nil {
				return Bad, s, d, err
			}
			return Fragment, netip.AddrPortFrom(src, 0), netip.AddrPortFrom(dst, 0), nil
		case protoHopByHop, protoRouting, protoDestination, protoAH:
			if end-at < 8 {
				return Bad, s, d, errors.New("IPv6 extension header cut")
			}
			n := (int(ip[at+1]) + 1) * 8
			if nh == protoAH {
				n = (int(ip[at+1]) + 2) * 4
			}
			if end-at < n {
				return Bad, s, d, errors.New("IPv6 extension header cut")
			}
			if nh == protoRouting && ip[at+3] > 0 {
				if final, ok := finalDestination(ip[at : at+n]); ok {
					dst = final
				}
			}
			nh, nhOff, at = ip[at], at, at+n
		default:
			return NonTCP, s, d, nil
		}
	}
	return NonTCP, s, d, nil
}

// finalDestination reads the last address of a routing header with
// segments left (r is the whole header): type 0 (source route, last
// address), type 2 (Mobile IPv6, the home address) and type 4 (segment
// routing, segment list[0]).
func finalDestination(r []byte) (netip.Addr, bool) {
	var a []byte
	switch r[2] {
	case 0:
		if n := (len(r) - 8) / 16; n > 0 {
			a = r[8+16*(n-1) : 8+16*n]
		}
	case 2, 4:
		if len(r) >= 24 {
			a = r[8:24]
		}
	}
	if a == nil {
		return netip.Addr{}, false
	}
	return netip.AddrFrom16([16]byte(a)), true
}

// maxDatagram is the largest IP datagram a fragment may belong to.
const maxDatagram = 65535

// check rejects a fragment that no datagram can hold: one ending past
// the largest datagram, or a fragment followed by others whose length is
// not a multiple of 8.
func (f *Frag) check() error {
	// An IPv4 datagram's length counts its header; an IPv6 payload
	// length counts the extension headers before the fragment header.
	hdr := len(f.hdr)
	if f.v6 {
		hdr -= 40
	}
	if f.size < 0 || hdr+f.off+f.size > maxDatagram {
		return fmt.Errorf("IP fragment at %d of %d bytes ends past %d bytes", f.off, f.size, maxDatagram)
	}
	if f.more && (f.size == 0 || f.size%8 != 0) {
		return fmt.Errorf("IP fragment at %d of %d bytes, not a multiple of 8, followed by others", f.off, f.size)
	}
	return nil
}

// QuickTCP reads the endpoints and TCP flags (0 if the packet is too
// short to hold them) of a plain IPv4 or IPv6 TCP packet without decoding
// it. A packet it accepts that gopacket would reject only lands on some
// shard, whose Analyzer rejects it; the endpoints of a packet gopacket
// accepts are the same either way.
func QuickTCP(p *capture.Packet) (src, dst netip.AddrPort, flags uint8, ok bool) {
	et, b, _, ok := p.Link.Network(p.Data)
	if !ok || len(b) < 1 {
		return src, dst, 0, false
	}
	switch {
	case et == capture.EtherTypeIPv4 && b[0]>>4 == 4:
		ihl := int(b[0]&0x0f) * 4
		if ihl < 20 || len(b) < ihl+4 || b[9] != 6 || (b[6]&0x3f) != 0 || b[7] != 0 {
			return src, dst, 0, false // options of other protocols, fragments
		}
		s4, d4 := [4]byte(b[12:16]), [4]byte(b[16:20])
		sp, dp := uint16(b[ihl])<<8|uint16(b[ihl+1]), uint16(b[ihl+2])<<8|uint16(b[ihl+3])
		if len(b) > ihl+13 {
			flags = b[ihl+13]
		}
		return netip.AddrPortFrom(netip.AddrFrom4(s4), sp), netip.AddrPortFrom(netip.AddrFrom4(d4), dp), flags, true
	case et == capture.EtherTypeIPv6 && b[0]>>4 == 6:
		if len(b) < 44 || b[6] != 6 {
			return src, dst, 0, false
		}
		s16, d16 := [16]byte(b[8:24]), [16]byte(b[24:40])
		sp, dp := uint16(b[40])<<8|uint16(b[41]), uint16(b[42])<<8|uint16(b[43])
		if len(b) > 53 {
			flags = b[53]
		}
		return netip.AddrPortFrom(netip.AddrFrom16(s16), sp), netip.AddrPortFrom(netip.AddrFrom16(d16), dp), flags, true
	}
	return src, dst, 0, false
}
