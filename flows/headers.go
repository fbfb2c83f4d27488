package flows

import (
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/kfsniff/kfsniff/capture"
)

// pktKind is what a packet's headers say it is.
type pktKind uint8

const (
	pktTCP      pktKind = iota
	pktNonIP            // no IPv4/IPv6 (ARP, LLC, ...)
	pktBad              // headers that do not decode
	pktFragment         // an IPv4 fragment
	pktNonTCP           // UDP, ICMP, IPv6 extension headers...
)

// headers decodes IPv4/IPv6 and TCP with one reused gopacket parser per
// first layer.
type headers struct {
	parser4, parser6 *gopacket.DecodingLayerParser
	ip4              layers.IPv4
	ip6              layers.IPv6
	tcp              layers.TCP
	payload          gopacket.Payload
	decoded          []gopacket.LayerType
}

func (h *headers) init() {
	h.parser4 = gopacket.NewDecodingLayerParser(layers.LayerTypeIPv4, &h.ip4, &h.ip6, &h.tcp, &h.payload)
	h.parser6 = gopacket.NewDecodingLayerParser(layers.LayerTypeIPv6, &h.ip4, &h.ip6, &h.tcp, &h.payload)
	h.parser4.IgnoreUnsupported = true
	h.parser6.IgnoreUnsupported = true
	h.decoded = make([]gopacket.LayerType, 0, 4)
}

// parse decodes p's headers; for TCP it returns the endpoints (h.tcp
// holds the segment), for pktBad the error.
func (h *headers) parse(p *capture.Packet) (kind pktKind, src, dst netip.AddrPort, err error) {
	et, netb, _, ok := p.Link.Network(p.Data)
	if !ok {
		return pktNonIP, src, dst, nil
	}
	parser := h.parser4
	if et == capture.EtherTypeIPv6 {
		parser = h.parser6
	}
	h.decoded = h.decoded[:0]
	if err := parser.DecodeLayers(netb, &h.decoded); err != nil {
		return pktBad, src, dst, err
	}
	var s, d netip.Addr
	isTCP := false
	for _, lt := range h.decoded {
		switch lt {
		case layers.LayerTypeIPv4:
			if h.ip4.Flags&layers.IPv4MoreFragments != 0 || h.ip4.FragOffset != 0 {
				return pktFragment, src, dst, nil
			}
			s, _ = netip.AddrFromSlice(h.ip4.SrcIP.To4())
			d, _ = netip.AddrFromSlice(h.ip4.DstIP.To4())
		case layers.LayerTypeIPv6:
			s, _ = netip.AddrFromSlice(h.ip6.SrcIP)
			d, _ = netip.AddrFromSlice(h.ip6.DstIP)
		case layers.LayerTypeTCP:
			isTCP = true
		}
	}
	if !isTCP {
		return pktNonTCP, src, dst, nil
	}
	return pktTCP, netip.AddrPortFrom(s, uint16(h.tcp.SrcPort)), netip.AddrPortFrom(d, uint16(h.tcp.DstPort)), nil
}

// Sharder assigns packets to shards by TCP connection, both directions of
// a connection to the same shard, for running one deferred Analyzer per
// shard.
type Sharder struct {
	hdr headers
	n   int
}

// NewSharder returns a Sharder over n shards.
func NewSharder(n int) *Sharder {
	s := &Sharder{n: n}
	s.hdr.init()
	return s
}

// Shard returns p's shard. Packets that are not TCP go to shard 0 (any
// shard would do: they only add to counters).
func (s *Sharder) Shard(p *capture.Packet) int {
	if s.n == 1 {
		return 0
	}
	src, dst, ok := quickTCP(p)
	if !ok {
		// Whatever the quick look does not know, gopacket decides, as
		// for the Analyzer.
		var kind pktKind
		if kind, src, dst, _ = s.hdr.parse(p); kind != pktTCP {
			return 0
		}
	}
	k, _ := makeKey(src, dst)
	// FNV-1a: deterministic, so that runs shard alike.
	h := uint64(14695981039346656037)
	for i := range k.a {
		h = (h ^ uint64(k.a[i])) * 1099511628211
		h = (h ^ uint64(k.b[i])) * 1099511628211
	}
	h = (h ^ uint64(k.pa)) * 1099511628211
	h = (h ^ uint64(k.pb)) * 1099511628211
	return int(h % uint64(s.n))
}

// quickTCP reads the endpoints of a plain IPv4 or IPv6 TCP packet without
// decoding it. A packet it accepts that gopacket would reject only lands
// on some shard, whose Analyzer rejects it; the endpoints of a packet
// gopacket accepts are the same either way.
func quickTCP(p *capture.Packet) (src, dst netip.AddrPort, ok bool) {
	et, b, _, ok := p.Link.Network(p.Data)
	if !ok || len(b) < 1 {
		return src, dst, false
	}
	switch {
	case et == capture.EtherTypeIPv4 && b[0]>>4 == 4:
		ihl := int(b[0]&0x0f) * 4
		if ihl < 20 || len(b) < ihl+4 || b[9] != 6 || (b[6]&0x3f) != 0 || b[7] != 0 {
			return src, dst, false // options of other protocols, fragments
		}
		s4, d4 := [4]byte(b[12:16]), [4]byte(b[16:20])
		sp, dp := uint16(b[ihl])<<8|uint16(b[ihl+1]), uint16(b[ihl+2])<<8|uint16(b[ihl+3])
		return netip.AddrPortFrom(netip.AddrFrom4(s4), sp), netip.AddrPortFrom(netip.AddrFrom4(d4), dp), true
	case et == capture.EtherTypeIPv6 && b[0]>>4 == 6:
		if len(b) < 44 || b[6] != 6 {
			return src, dst, false
		}
		s16, d16 := [16]byte(b[8:24]), [16]byte(b[24:40])
		sp, dp := uint16(b[40])<<8|uint16(b[41]), uint16(b[42])<<8|uint16(b[43])
		return netip.AddrPortFrom(netip.AddrFrom16(s16), sp), netip.AddrPortFrom(netip.AddrFrom16(d16), dp), true
	}
	return src, dst, false
}
