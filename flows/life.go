package flows

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// The ordinary life of a TCP connection, as far as it changes what
// reassembly must do: a 4-tuple used again after FIN or RST (or after the
// connection was abandoned) by a new connection; simultaneous open;
// keep-alives. Zero-window probes and window updates need nothing: a probe
// carries the next byte, which the full segment carries again.

// genBase is the first gopacket endpoint type used for reassembly keys:
// every stream's netFlow has the type genBase+gen, so that a new connection
// on a 4-tuple whose previous connection is still held by reassembly gets
// a reassembly state of its own (gopacket has no way to drop one
// connection's state). Types below 1000 are gopacket's.
const genBase = 1 << 20

// netFlow is the reassembly key of a packet from src to dst of the stream
// of generation gen.
func netFlow(src, dst netip.AddrPort, gen uint64) gopacket.Flow {
	s, d := src.Addr(), dst.Addr()
	t := gopacket.EndpointType(genBase + int64(gen))
	if s.Is4() {
		s4, d4 := s.As4(), d.As4()
		return gopacket.NewFlow(t, s4[:], d4[:])
	}
	s16, d16 := s.As16(), d.As16()
	return gopacket.NewFlow(t, s16[:], d16[:])
}

// generation reads a stream's generation from its reassembly key.
func generation(f gopacket.Flow) uint64 {
	return uint64(int64(f.EndpointType()) - genBase)
}

// syn notes a SYN from end d. A SYN without ACK from each end is a
// simultaneous open (RFC 9293 3.5): neither is the client by the
// handshake, so the client end is left to the ports or to the direction
// of the requests (decide); the handshake was still captured, so both
// directions are framed from their first byte.
func (s *stream) syn(tcp *layers.TCP, d int) {
	if !s.synSeen[d] {
		s.synSeen[d], s.synSeq[d] = true, tcp.Seq
	}
	if tcp.ACK {
		if !s.handshake && !s.decided {
			// The capture began between the SYN and the SYN-ACK:
			// the SYN-ACK's receiver is the client.
			s.clientEnd, s.handshake = 1-d, true
		}
		return
	}
	s.synOnly[d] = true
	s.handshake = true
	s.clientEnd = d
	if s.synOnly[1-d] {
		s.clientEnd = -1
	}
}

// startsAt says whether a segment from end d, the first of its direction,
// may start it (the capture began after the SYN). A bare ACK does when its
// sequence number is what the peer acknowledged: then it places the next
// byte, and a hole before the first data is a gap (the first request was
// lost). A keep-alive carries the sequence number before the next byte
// (and maybe a garbage byte), which would make reassembly start one byte
// early. A one-byte keep-alive is
// known by the peer's ACK of it, or, before the peer was heard, by what
// Windows and BSD send: a zero byte without PSH.
func (s *stream) startsAt(tcp *layers.TCP, d int) bool {
	switch n := len(tcp.Payload); {
	case tcp.FIN || tcp.RST:
		return true
	case n == 0:
		// A bare ACK carries the next sequence number: where the
		// direction goes on, when it is what the peer acknowledged
		// (a keep-alive's is one byte below).
		return s.ackKnown[1-d] && tcp.Seq == s.ack[1-d]
	case n > 1:
		return true
	case s.ackKnown[1-d]:
		return tcp.Seq+1 != s.ack[1-d]
	}
	return tcp.PSH || tcp.Payload[0] != 0
}

// reopenedBy says whether a SYN from src on this stream's 4-tuple opens a
// new connection: the stream ended (FIN or RST), carried data, or that end
// already sent a SYN with another initial sequence number. A retransmitted
// SYN, the SYN|ACK answering it and the second SYN of a simultaneous open
// belong to the stream.
func (s *stream) reopenedBy(tcp *layers.TCP, src netip.AddrPort) bool {
	d := 0
	if src != s.ends[0] {
		d = 1
	}
	switch {
	case s.ended, s.bytes[0]+s.bytes[1] > 0:
		return true
	case s.synSeen[d]:
		return tcp.Seq != s.synSeq[d]
	}
	return false
}

// outstanding says whether reassembly still holds bytes of the stream
// behind a hole.
func (s *stream) outstanding() bool {
	for d := range 2 {
		if s.seqKnown[d] && int32(s.maxSeen[d]-(s.seqBase[d]+s.delivered[d])) > 0 {
			return true
		}
	}
	return false
}

// supersede ends stream s, whose 4-tuple a new connection has just taken.
// If reassembly holds none of its bytes, it ends now; otherwise it stays
// under its own reassembly key until those bytes are pushed through (a
// flush after the reorder window) and ends then (finishSuperseded).
func (a *Analyzer) supersede(s *stream, now time.Time) {
	a.dropStream(s)
	s.superseded = now
	if s.outstanding() {
		a.superseded = append(a.superseded, s)
		return
	}
	a.finish(s)
}

// finishSuperseded ends the superseded streams whose held bytes the flush
// at now has pushed through.
func (a *Analyzer) finishSuperseded(now time.Time) {
	keep := a.superseded[:0]
	for _, s := range a.superseded {
		switch {
		case s.done:
		case now.Sub(s.superseded) >= a.cfg.ReorderWindow:
			a.finish(s)
		default:
			keep = append(keep, s)
		}
	}
	clear(a.superseded[len(keep):])
	a.superseded = keep
}

// finish ends stream s as reassembly completing it would, then drops its
// reassembly state: a RST in each direction, behind what was delivered,
// closes each half that is still open.
func (a *Analyzer) finish(s *stream) {
	if s.done {
		return
	}
	s.ReassemblyComplete(nil)
	s.ignore = true
	for d := range 2 {
		src, dst := s.ends[d], s.ends[1-d]
		var seq uint32
		if s.seqKnown[d] {
			seq = s.seqBase[d] + s.delivered[d] - 1
		}
		a.asm.AssembleWithContext(netFlow(src, dst, s.gen), a.rstSegment(src.Port(), dst.Port(), seq), &a.ctx)
	}
}

// rstSegment is a RST from port src to dst at seq, decoded from header
// bytes as a captured one is: reassembly keys a segment by the port bytes
// decoding keeps (layers.TCP.TransportFlow), not by SrcPort and DstPort,
// so a segment built from fields alone would reach a connection of no
// ports instead of the stream it ends.
func (a *Analyzer) rstSegment(src, dst uint16, seq uint32) *layers.TCP {
	h := &a.rstHdr
	*h = [20]byte{}
	binary.BigEndian.PutUint16(h[0:], src)
	binary.BigEndian.PutUint16(h[2:], dst)
	binary.BigEndian.PutUint32(h[4:], seq)
	h[12] = 5 << 4 // data offset: 5 words, no options
	h[13] = 0x04   // RST
	a.rst = layers.TCP{}
	if err := a.rst.DecodeFromBytes(h[:], gopacket.NilDecodeFeedback); err != nil {
		panic(err) // a 20-byte header without options always decodes
	}
	return &a.rst
}
