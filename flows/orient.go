package flows

import (
	"cmp"
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/kfsniff/kfsniff/decode"
)

// Which end of a connection is the client, when the capture did not see it
// open (a capture started mid-connection, the usual case for an incident
// capture of long-lived connections).
//
// A connection whose handshake was captured is decided at its first data,
// as before. Any other is held: its bytes are kept, in arrival order with
// their packet positions, and weighed after every delivery:
//
//   - pairing: a request decoded exactly in one direction and a response
//     with its correlation id, decoding exactly as that request's API, in
//     the other. Proof, decided at once.
//   - port: one end is a Kafka server port (--ports, or the server side of
//     a connection seen opening earlier in the capture). Decided at once
//     when the requests' direction agrees; otherwise held for pairing.
//   - content: the direction whose bytes frame as a run of requests
//     decoded exactly (a response read as a request rarely decodes to the
//     exact length of its frame: decode.DecodeRequestExact; but a Produce
//     response with correlation id n <= 13 and one topic reads as a
//     Produce vn request header, and may, so one frame is not enough).
//   - port number: with nothing better, the lower port is the server's
//     (clients connect from ephemeral ports).
//
// Nothing is emitted while a connection is held, so a guess is never shown
// and never has to be taken back: when the evidence comes (or the holding
// ends: the connection closes, the capture ends, holdWindow of capture
// time passes, or the bytes held reach holdMax or the analyzer's holding
// budget), the connection is made and framed from the bytes held, in the
// order they arrived, at the packet positions they arrived in.

// ClientSide says how kfsniff decided which end is the client.
type ClientSide string

// How the client end is chosen, strongest evidence first.
const (
	ClientByHandshake ClientSide = "handshake" // the SYN's sender, or the SYN-ACK's receiver
	ClientByPairing   ClientSide = "pairing"   // a request answered by a response with its correlation id in the other direction
	ClientByPort      ClientSide = "port"      // the other end's port is a Kafka server port
	ClientByContent   ClientSide = "content"   // the direction whose bytes frame as a run of requests
	// ClientByPortNumber: the client's port is the higher one, as an
	// ephemeral port is; the weakest evidence.
	ClientByPortNumber ClientSide = "port-number"
)

const (
	// holdWindow is how long (capture time) a connection joined mid-way
	// may be held for evidence.
	holdWindow = 2 * time.Second
	// holdMax bounds the bytes one connection may hold.
	holdMax = 256 << 10
	// holdBudgetMin is the least the analyzer lets all held connections
	// hold together (a quarter of Config.BufferBudget, or this).
	holdBudgetMin = 4 << 20
)

// holding is what a connection keeps while its client side is not known.
type holding struct {
	// buf holds the bytes of each reassembly direction, as delivered.
	buf [2][]byte
	// order is every delivery (and hole) in arrival order.
	order []heldPiece
	since time.Time
	// probed is how many bytes of each direction the last probe saw.
	probed [2]int
	ev     evidence
	// apis are the keys and versions of the requests found in each
	// direction, for the connection's hints (Conn.hint).
	apis [2][]keyVersion
}

// heldPiece is one delivery of n bytes at off in buf[dir], with the hole
// before it (gap bytes, cut of which were cut by the snaplen) and the
// position of the packet that delivered it.
type heldPiece struct {
	dir      uint8
	off, n   int32
	gap, cut int32
	at       Place
}

// evidence is what the bytes held say about each reassembly direction d.
type evidence struct {
	// reqs counts requests found in d at confirmed boundaries.
	reqs [2]int
	// plausible: d has something that could start a request.
	plausible [2]bool
	// paired: a request of d is answered in the other direction.
	paired [2]bool
}

// hold keeps data delivered in direction d, after a hole of skip bytes of
// which cut were cut by the snaplen.
func (s *stream) hold(d int, data []byte, skip, cut int) {
	a := s.a
	h := s.h
	if h == nil {
		h = &holding{}
		s.h = h
		h.since = a.at.Time
		a.holders = append(a.holders, s)
	}
	h.order = append(h.order, heldPiece{
		dir: uint8(d), off: int32(len(h.buf[d])), n: int32(len(data)),
		gap: int32(skip), cut: int32(cut), at: a.at,
	})
	h.buf[d] = append(h.buf[d], data...)
	a.held += int64(len(data))
}

// heldSize is the bytes the connection holds.
func (h *holding) size() int { return len(h.buf[0]) + len(h.buf[1]) }

// release drops what the connection holds.
func (s *stream) release() {
	if s.h == nil {
		return
	}
	s.a.held -= int64(s.h.size())
	s.h = nil
}

// probe brings the evidence up to date with the bytes held.
func (h *holding) probe(maxFrame int) evidence {
	if h.probed == [2]int{len(h.buf[0]), len(h.buf[1])} {
		return h.ev
	}
	h.probed = [2]int{len(h.buf[0]), len(h.buf[1])}
	var reqs [2]map[int32]keyVersion
	var starts [2][]int32
	for _, p := range h.order {
		if p.n > 0 {
			starts[p.dir] = append(starts[p.dir], p.off)
		}
	}
	for d := range 2 {
		h.ev.plausible[d] = h.ev.plausible[d] || anyPlausible(h.buf[d], maxFrame)
		h.ev.reqs[d] = scanRequests(h.buf[d], starts[d], maxFrame, func(corr int32, key, version int16) {
			if reqs[d] == nil {
				reqs[d] = make(map[int32]keyVersion)
			}
			kv := keyVersion{key, version}
			reqs[d][corr] = kv
			if !slices.Contains(h.apis[d], kv) && len(h.apis[d]) < maxAPIHints {
				h.apis[d] = append(h.apis[d], kv)
			}
		})
	}
	for d := range 2 {
		h.ev.paired[d] = len(reqs[d]) > 0 && answered(h.buf[1-d], reqs[d], maxFrame)
	}
	return h.ev
}

type keyVersion struct{ key, version int16 }

// anyPlausible reports whether b holds a plausible request header anywhere.
func anyPlausible(b []byte, maxFrame int) bool {
	for i := 0; i+14 <= len(b); i++ {
		if decode.PlausibleRequest(b[i:], maxFrame) {
			return true
		}
	}
	return false
}

// scanRequests finds the requests in b, bytes of one direction of unknown
// alignment delivered at starts (ascending offsets): from the first
// confirmed request boundary, then frame after frame while their headers
// are plausible, searching again where the run breaks. It calls fn for
// each and returns how many.
func scanRequests(b []byte, starts []int32, maxFrame int, fn func(corr int32, key, version int16)) int {
	n := 0
	for pos := 0; pos+14 <= len(b); {
		i := firstRequest(b, pos, starts, maxFrame)
		if i < 0 {
			break
		}
		pos = i
		for pos+14 <= len(b) && decode.PlausibleRequest(b[pos:], maxFrame) {
			size, _ := decode.FrameSize(b[pos:])
			end := pos + 4 + int(size)
			if end > len(b) {
				return n
			}
			h, err := decode.ParseRequestHeader(b[pos+4 : end])
			if err != nil {
				break
			}
			fn(h.Correlation, h.Key, h.Version)
			n++
			pos = end
		}
		pos++
	}
	return n
}

// firstRequest returns the offset of the first confirmed request boundary
// in b from offset from, or -1; starts are where deliveries began.
func firstRequest(b []byte, from int, starts []int32, maxFrame int) int {
	for i := from; i+14 <= len(b); i++ {
		if !decode.PlausibleRequest(b[i:], maxFrame) {
			continue
		}
		size, _ := decode.FrameSize(b[i:])
		end := i + 4 + int(size)
		if end > len(b) {
			continue
		}
		_, delivered := slices.BinarySearch(starts, int32(i))
		if confirmRequest(b[i+4:end], b[end:], delivered, maxFrame) {
			return i
		}
	}
	return -1
}

// confirmRequest reports whether frame, a whole request (after its size
// prefix) at a boundary found by searching, followed by rest, is
// confirmed: it decodes exactly and rest could start a frame; or it
// decodes, began where a delivery began (delivered), and is followed by
// the end of the data or by another plausible request, a run of two.
// (Some clients pad requests: librdkafka's ApiVersions v0 carries four
// zero bytes the protocol does not have, so exactness alone would lose
// them.)
func confirmRequest(frame, rest []byte, delivered bool, maxFrame int) bool {
	h, err := decode.ParseRequestHeader(frame)
	if err != nil {
		return false
	}
	_, err = decode.DecodeRequestExact(h.Key, h.Version, frame[h.Len:])
	switch {
	case err == nil:
		return followedByFrame(rest, minRequest, maxFrame)
	case errors.Is(err, decode.ErrTrailing) && delivered:
		return len(rest) == 0 || decode.PlausibleRequest(rest, maxFrame)
	}
	return false
}

// followedByFrame reports whether rest, the bytes after a frame, is empty,
// too short to tell, or starts with a size prefix in [min, maxFrame].
func followedByFrame(rest []byte, min, maxFrame int) bool {
	size, ok := decode.FrameSize(rest)
	return !ok || size >= int32(min) && int64(size) <= int64(maxFrame)
}

// answered reports whether b, bytes of one direction, holds a whole
// response to one of reqs that decodes exactly as that request's API.
func answered(b []byte, reqs map[int32]keyVersion, maxFrame int) bool {
	for i := 0; i+8 <= len(b); i++ {
		size := int32(binary.BigEndian.Uint32(b[i:]))
		if size < minResponse || int64(size) > int64(maxFrame) || i+4+int(size) > len(b) {
			continue
		}
		kv, ok := reqs[int32(binary.BigEndian.Uint32(b[i+4:]))]
		if ok && exactResponse(b[i+4:i+4+int(size)], kv.key, kv.version) {
			return true
		}
	}
	return false
}

// exactResponse reports whether frame (after the size prefix) is a
// response to key at version whose body decodes exactly.
func exactResponse(frame []byte, key, version int16) bool {
	if !decode.KnownVersion(key, version) {
		return false
	}
	hl, err := decode.ResponseHeaderLen(frame, key, version)
	if err != nil {
		return false
	}
	_, err = decode.DecodeResponseExact(key, version, frame[hl:])
	return err == nil
}

// portServer returns which end (index into ends) is a server by its port,
// or -1 if neither or both are.
func (s *stream) portServer() int { return onlyOne(s.serverPort(0), s.serverPort(1)) }

// onlyOne returns 0 if x alone holds, 1 if y alone does, else -1.
func onlyOne(x, y bool) int {
	switch {
	case x && !y:
		return 0
	case y && !x:
		return 1
	}
	return -1
}

// serverPort reports whether end i listens on a Kafka server port: one in
// --ports, or an address and port seen accepting a connection earlier.
func (s *stream) serverPort(i int) bool {
	return s.a.cfg.Ports.Has(s.ends[i].Port()) || s.a.listening(s.ends[i])
}

// orient decides, if the evidence allows, which end is the client of a
// connection whose handshake was not captured; lower is the end with the
// lower port (-1 if equal). final says the holding ends now: decide on
// whatever there is. It returns the client end, how it was decided, and ok
// false to keep holding (or, if final, not Kafka).
func orient(ev evidence, portServer, lower int, final bool) (client int, by ClientSide, ok bool) {
	if c := onlyOne(ev.paired[0], ev.paired[1]); c >= 0 {
		return c, ClientByPairing, true
	}
	if portServer >= 0 {
		c := 1 - portServer
		if ev.reqs[c] > 0 || final {
			return c, ClientByPort, true
		}
		return -1, "", false
	}
	if !final {
		return -1, "", false
	}
	switch {
	case ev.reqs[0] >= 2 && ev.reqs[0] > ev.reqs[1]:
		return 0, ClientByContent, true
	case ev.reqs[1] >= 2 && ev.reqs[1] > ev.reqs[0]:
		return 1, ClientByContent, true
	case ev.reqs[0]+ev.reqs[1] > 0 && lower >= 0:
		return 1 - lower, ClientByPortNumber, true
	case ev.reqs[0] > ev.reqs[1]:
		return 0, ClientByContent, true
	case ev.reqs[1] > ev.reqs[0]:
		return 1, ClientByContent, true
	}
	return -1, "", false
}

// lowerPort returns the end with the lower port, or -1 if they are equal.
func (s *stream) lowerPort() int {
	p0, p1 := s.ends[0].Port(), s.ends[1].Port()
	return onlyOne(p0 < p1, p1 < p0)
}

// assess weighs what a held connection has and makes it, if it can; final
// forces a decision (the connection ends, or holding it must).
func (s *stream) assess(final bool) {
	h := s.h
	a := s.a
	now := a.at.Time
	if !final && (now.Sub(h.since) >= holdWindow || h.size() >= holdMax || a.held > a.holdBudget()) {
		final = true
	}
	ev := h.probe(a.cfg.MaxFrame)
	port := s.portServer()
	client, by, ok := orient(ev, port, s.lowerPort(), final)
	if !ok {
		if final || port < 0 && len(h.buf[0]) > 0 && len(h.buf[1]) > 0 && !ev.plausible[0] && !ev.plausible[1] {
			// Both directions spoke and neither could start a
			// request: not Kafka (an unknown port, or nothing
			// decided by the end).
			s.notKafka()
		}
		return
	}
	s.clientEnd = client
	how := ByContent
	if s.portServer() >= 0 || a.cfg.Ports.Has(s.ends[0].Port()) || a.cfg.Ports.Has(s.ends[1].Port()) {
		how = ByPort
	}
	s.start(how, by)
}

// holdBudget is what all held connections may hold together.
func (a *Analyzer) holdBudget() int64 {
	return int64(max(a.cfg.BufferBudget/4, holdBudgetMin))
}

// sweepHolders decides the connections held for longer than holdWindow
// (of capture time now): called on the flush clock, so that a connection
// that goes quiet is not held until it ends.
func (a *Analyzer) sweepHolders(now time.Time) {
	a.decideHolders(func(s *stream) bool { return now.Sub(s.h.since) >= holdWindow })
}

// decideHolders decides the held connections that due says must be, in
// the order of their first packets, and forgets those decided.
func (a *Analyzer) decideHolders(due func(*stream) bool) {
	slices.SortFunc(a.holders, func(x, y *stream) int { return cmp.Compare(x.firstSeq, y.firstSeq) })
	keep := a.holders[:0]
	for _, s := range a.holders {
		switch {
		case s.h == nil || s.decided:
		case due(s):
			a.order = s.firstSeq
			s.assessSafely()
		default:
			keep = append(keep, s)
		}
	}
	clear(a.holders[len(keep):])
	a.holders = keep
}
