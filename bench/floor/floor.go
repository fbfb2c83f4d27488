// Package floor measures the least any analysis of a capture has to do:
// read every packet record and decode it to TCP. It is the "floor" the
// end-to-end benchmarks compare kfsniff with (issue 4): kfsniff's own
// capture reader (capture.Open, File.Next, which is what kfsniff reads
// with), the link layer stripped by capture.LinkType.Network, and gopacket
// DecodingLayerParsers over IPv4, IPv6 and TCP built once and reused for
// every packet, exactly as flows.Analyzer decodes (one parser per first
// layer, IPv4 or IPv6, since a DecodingLayerParser starts at a fixed
// layer). Nothing else: no reassembly, no Kafka.
package floor

import (
	"encoding/binary"
	"io"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/kfsniff/kfsniff/capture"
)

// Result counts what was read, so the work cannot be optimised away and so
// callers can check the capture was read whole.
type Result struct {
	Packets int64 // records read
	Bytes   int64 // captured bytes
	TCP     int64 // packets decoded to TCP
	Payload int64 // TCP payload bytes
	Bad     int64 // packets whose IP or TCP header did not decode
	// Reassembled is the TCP payload bytes reassembly delivered (Live).
	Reassembled int64
}

// Decoder is the reusable IP/TCP decoding state.
type Decoder struct {
	ip4     layers.IPv4
	ip6     layers.IPv6
	tcp     layers.TCP
	payload gopacket.Payload
	p4, p6  *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
}

// NewDecoder builds the parsers once.
func NewDecoder() *Decoder {
	d := &Decoder{decoded: make([]gopacket.LayerType, 0, 4)}
	d.p4 = gopacket.NewDecodingLayerParser(layers.LayerTypeIPv4, &d.ip4, &d.ip6, &d.tcp, &d.payload)
	d.p6 = gopacket.NewDecodingLayerParser(layers.LayerTypeIPv6, &d.ip4, &d.ip6, &d.tcp, &d.payload)
	d.p4.IgnoreUnsupported = true
	d.p6.IgnoreUnsupported = true
	return d
}

// Packet decodes one packet into r's counters.
func (d *Decoder) Packet(p *capture.Packet, r *Result) {
	r.Packets++
	r.Bytes += int64(len(p.Data))
	et, nb, _, ok := p.Link.Network(p.Data)
	if !ok {
		return
	}
	parser := d.p4
	if et == capture.EtherTypeIPv6 {
		parser = d.p6
	}
	if err := parser.DecodeLayers(nb, &d.decoded); err != nil {
		r.Bad++
		return
	}
	for i, lt := range d.decoded {
		if lt == layers.LayerTypeTCP {
			r.TCP++
			r.Payload += int64(len(d.tcp.Payload))
		}
		if lt == layers.LayerTypeIPv6 && i == len(d.decoded)-1 {
			d.extensions(nb[cap(nb)-cap(d.ip6.Contents):], r)
		}
	}
}

// extensions follows, as flows does, the IPv6 extension headers the
// parser stops at (routing, destination options, AH) to TCP. A fragment is
// not TCP here: the floor does not reassemble.
func (d *Decoder) extensions(ip []byte, r *Result) {
	if len(ip) < 40 {
		return
	}
	end := min(len(ip), 40+int(binary.BigEndian.Uint16(ip[4:])))
	nh, at := ip[6], 40
	for range 8 {
		switch nh {
		case 6:
			if d.tcp.DecodeFromBytes(ip[at:end], gopacket.NilDecodeFeedback) != nil {
				r.Bad++
				return
			}
			r.TCP++
			r.Payload += int64(len(d.tcp.Payload))
			return
		case 0, 43, 51, 60:
			if end-at < 8 {
				r.Bad++
				return
			}
			n := (int(ip[at+1]) + 1) * 8
			if nh == 51 {
				n = (int(ip[at+1]) + 2) * 4
			}
			if end-at < n {
				r.Bad++
				return
			}
			nh, at = ip[at], at+n
		default:
			return
		}
	}
}

// Read reads the capture file name to the end, decoding every packet to
// TCP.
func Read(name string) (Result, error) {
	var r Result
	f, err := capture.Open(name, 0)
	if err != nil {
		return r, err
	}
	defer f.Close()
	d := NewDecoder()
	var p capture.Packet
	for {
		err := f.Next(&p)
		if err == io.EOF {
			return r, nil
		}
		if err != nil {
			return r, err
		}
		d.Packet(&p, &r)
	}
}
