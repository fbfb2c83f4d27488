package flows

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
)

// framer splits one direction of a Kafka connection into size-prefixed
// frames and decodes them. It keeps the bytes of an incomplete frame and,
// after a hole or a framing error, scans for the next frame boundary.
type framer struct {
	s *stream
	// (Fields are ordered to keep the struct, two per stream, small.)
	resp bool // frames responses (server to client)
	// synced: buf starts at a frame boundary. initial: the capture began
	// mid-stream and no boundary has been found yet. tentative: the
	// boundary was guessed by a scan and the first frame must decode
	// exactly. mid: the direction was joined mid-way and has not framed
	// yet, so what is skipped is the end of a frame under way.
	synced     bool
	initial    bool
	tentative  bool
	mid        bool
	headAt     bool
	tls        bool
	everFramed bool
	// skipWhy is the reason (skipReasons) for the bytes of skipTo.
	skipWhy uint8
	// idle: buf holds no data (a buffer kept between frames), as last
	// accounted in the budget.
	idle bool
	buf  []byte
	// skipTo is how many more bytes belong to a frame cut by a gap or
	// dropped for the budget.
	skipTo int64
	// dropped is a response dropped for the budget, delivered when its
	// last byte passes (deliverDropped).
	dropped *Exchange
	// held is the capacity of buf counted in the analyzer's budget; hidx
	// places the framer in the budget's heap (index+1, 0 if absent).
	held uint32
	hidx int32
	// First packet and time of the frame at the start of buf.
	startFile int
	startPkt  uint64
	startTime time.Time
	// stash keeps responses whose request was not captured and whose
	// API is not known yet, until a request shows the connection's API
	// (see keep).
	stash []stashed
	// memo is the bodies last decoded, for frames that repeat, seen the
	// keys (modulo 64) decoded so far (memo.go).
	memo *memo
	seen uint64
}

// stashed is an unmatched response kept with a copy of its frame.
type stashed struct {
	m     *Message
	frame []byte
}

const (
	// maxStash and maxStashFrame bound the responses kept per
	// connection for their API, and their size.
	maxStash      = 4
	maxStashFrame = 16 << 10
)

const (
	minRequest  = 8 // key, version, correlation id
	minResponse = 4 // correlation id
	// scanLimit bounds how much a direction may buffer while looking for
	// a frame boundary; the rest is skipped and counted.
	scanLimit = 1 << 20
)

func (f *framer) conn() *Conn { return f.s.conn }

// skipReasons are the reasons the rest of a frame may be skipped for
// (framer.skipWhy indexes them).
var skipReasons = [...]string{SkipGap, SkipSnaplen, SkipBudget}

func skipWhy(reason string) uint8 {
	if i := slices.Index(skipReasons[:], reason); i >= 0 {
		return uint8(i)
	}
	panic("flows: no skip reason " + reason)
}

// gap drops the partial frame around a hole of n bytes, cut of which
// were cut by the snaplen from the packet before the hole (the rest were
// lost). If the lost frame is a request whose header was captured, the
// request is still remembered (not counted as a request frame) so that
// its response can be decoded.
func (f *framer) gap(n, cut int, at Place) {
	c := f.conn()
	a := f.s.a
	c.Gaps++
	c.Lost[f.role()] += int64(n - cut)
	c.Cut[f.role()] += int64(cut)
	c.LastGap = at
	if c.Gaps == 1 {
		c.FirstGap = c.LastGap
	}
	reason := SkipGap
	what := fmt.Sprintf("%d bytes lost in %s direction", n, f.dirName())
	if cut > 0 {
		// The bytes around the hole are skipped for the first cause.
		reason = SkipSnaplen
		what = fmt.Sprintf("%d bytes cut by the snaplen (capture with -s 0 for whole packets) in %s direction", cut, f.dirName())
		if cut < n {
			what += fmt.Sprintf(", %d more lost", n-cut)
		}
	}
	c.skip(reason, cut+len(f.buf))
	c.skip(SkipGap, n-cut)
	if f.skipTo > 0 {
		// Inside a frame already being skipped (and reported): if the
		// hole ends within it, stay in step with its end.
		if int64(n) <= f.skipTo {
			f.skipTo -= int64(n)
			if f.skipTo == 0 {
				f.deliverDropped(at)
			}
			return
		}
		f.skipTo = 0
		f.deliverDropped(at)
	}
	if len(f.buf) > 0 {
		what += "; partial frame dropped"
		if !f.resp && f.synced && !f.tentative {
			if m := f.partialRequest(f.buf); m != nil {
				what += fmt.Sprintf(" (%s v%d corr %d)", decode.Name(m.Key), m.Version, m.Correlation)
				a.wait(c, m, at)
			}
		}
	}
	// If the lost frame's size prefix was captured, its end is known:
	// skip to it and stay in step, checking that the next frame decodes.
	if size, ok := decode.FrameSize(f.buf); ok && f.synced && size >= 0 && int64(size) <= int64(a.cfg.MaxFrame) {
		if rest := int64(size) + 4 - int64(len(f.buf)) - int64(n); rest >= 0 {
			f.skipTo, f.skipWhy = rest, skipWhy(reason)
			f.buf = f.buf[:0]
			f.tentative = true
			c.problem(at.File, at.Packet, what)
			f.trim()
			return
		}
	}
	c.problem(at.File, at.Packet, what)
	f.buf = f.buf[:0]
	f.synced, f.tentative = false, false
	f.trim()
}

// partialRequest returns a request message for the header at the start of
// b, a frame cut by a gap, or nil if the header is not all there.
func (f *framer) partialRequest(b []byte) *Message {
	size, ok := decode.FrameSize(b)
	if !ok || int(size)+4 <= len(b) {
		return nil
	}
	h, err := decode.ParseRequestHeader(b[4:])
	if err != nil || !decode.KnownVersion(h.Key, h.Version) {
		return nil
	}
	m := &Message{
		Conn: &f.conn().ConnInfo, conn: f.conn(), File: f.startFile, Packet: f.startPkt, FirstPacket: f.startPkt,
		Time: f.startTime, FirstTime: f.startTime, Size: int(size) + 4,
		Key: h.Key, Version: h.Version, Correlation: h.Correlation,
		Client: cluster.ClientAt(f.conn().Client.Addr(), f.conn().clientID(h.ClientID, h.ClientIDNull)), Partial: true,
	}
	m.Err = fmt.Errorf("%s v%d request corr %d: %w", decode.Name(h.Key), h.Version, h.Correlation, ErrPartial)
	return m
}

func (f *framer) role() Dir {
	if f.resp {
		return ToClient
	}
	return ToServer
}

func (f *framer) dirName() string {
	if f.resp {
		return "server->client"
	}
	return "client->server"
}

// end is called when the connection closes or the capture ends: a partial
// frame left is lost (cut by the snaplen if the last packet was), and the
// buffer is released.
func (f *framer) end() {
	// The bytes cut from the last packet are not delivered as a hole
	// when nothing follows them.
	cut := f.s.cutLast(f.role())
	f.conn().skip(SkipSnaplen, cut)
	if len(f.buf) > 0 {
		reason := SkipEnd
		if cut > 0 {
			reason = SkipSnaplen
		}
		if !f.synced {
			reason = f.scanReason()
		}
		f.conn().skip(reason, len(f.buf))
	}
	f.s.a.putBuffer(f.buf)
	f.buf = nil
	f.account()
	f.deliverDropped(f.s.a.at)
	f.unstash()
	f.forget()
}

// frameSource is what the framer's calls for one delivery of bytes are
// handed, as arguments rather than through the analyzer's fields: the
// packet the bytes came in (at), which of the frames lying whole in them
// own may hand on as views (view), and, for a deferred analyzer, the
// framer's buffer when it holds exactly the frame being handed on (lend),
// which own may give to the message instead of a copy (setting lent).
type frameSource struct {
	at   Place
	view viewKind
	lend []byte
	lent bool
}

// feed takes bytes in stream order, which came in the packet at; data is
// only valid during the call.
func (f *framer) feed(data []byte, at Place) {
	if f.tls {
		f.conn().skip(SkipTLS, len(data))
		return
	}
	if f.skipTo > 0 {
		n := min(f.skipTo, int64(len(data)))
		f.skipTo -= n
		f.conn().skip(skipReasons[f.skipWhy], int(n))
		data = data[n:]
		if f.skipTo == 0 {
			f.deliverDropped(at)
		}
		if len(data) == 0 {
			return
		}
	}
	a := f.s.a
	owned := len(f.buf) > 0
	// view: the frames that lie whole in data may be handed on as views
	// of it even by a deferred analyzer (own).
	view := viewNone
	if a.payload != nil {
		view = a.stableView(f, data)
	}
	if owned && f.synced && !f.tentative {
		if total, ok := f.frameTotal(f.buf); ok {
			// The frame buffered is at a known boundary and its size is
			// known: it takes only the bytes it lacks, and what follows
			// it in data is framed where it lies.
			f.complete(data, total, view, at)
			return
		}
	}
	// headAt: the bytes buffered begin where a delivery began.
	headAt := owned && f.headAt
	// segStart is where this delivery (normally one TCP segment) begins
	// in data: responses usually start at a segment boundary.
	segStart := 0
	if owned {
		segStart = len(f.buf)
		if !f.grow(len(data)) {
			// The frame buffered was dropped for the budget: skip
			// the rest of it and go on.
			f.feed(data, at)
			return
		}
		f.buf = append(f.buf, data...)
		data = f.buf
	} else {
		f.startFile, f.startPkt, f.startTime = at.File, at.Packet, at.Time
	}
	src := frameSource{at: at}
	if !owned {
		src.view = view
	}
	off := f.frames(data, segStart, headAt, &src)
	rest := f.scanned(data[off:])
	f.headAt = off == segStart || off == 0 && headAt
	if owned {
		n := copy(f.buf, rest)
		f.buf = f.buf[:n]
	} else {
		f.hold(rest)
	}
	f.trim()
}

// complete goes on with the frame of total bytes buffered, synced at a
// confirmed boundary, with data: the bytes it still lacks are added to
// its buffer (sized for the whole frame, see hold and grow), and once it
// is whole it is handed on from there, and the rest of data is framed as
// a delivery of its own that began where the frame's bytes did (view:
// as feed's).
func (f *framer) complete(data []byte, total int, view viewKind, at Place) {
	need := total - len(f.buf)
	if len(data) < need {
		if !f.grow(len(data)) {
			f.feed(data, at)
			return
		}
		f.buf = append(f.buf, data...)
		f.trim()
		return
	}
	if !f.grow(need) {
		f.feed(data, at)
		return
	}
	segStart := len(f.buf)
	f.buf = append(f.buf, data[:need]...)
	src := frameSource{at: at}
	if f.s.a.deferred() {
		// A deferred analyzer may hand the buffer itself on with the
		// message instead of copying the frame out of it (own).
		src.lend = f.buf
	}
	frame := f.buf[decode.SizeLen:total:total]
	var handled bool
	if f.resp {
		handled = f.response(frame, &src)
	} else {
		handled = f.request(frame, &src)
	}
	if !handled {
		// Only a frame at a guessed boundary is refused, and this one
		// was not guessed; if one is, scan on from its second byte over
		// it and the rest of data, as the buffering path does.
		f.synced, f.tentative = false, false
		f.conn().skip(f.scanReason(), 1)
		f.buf = append(f.buf[:total], data[need:]...)
		off := 1 + f.frames(f.buf[1:], segStart-1, false, &frameSource{at: at})
		f.headAt = off == segStart
		if rest := len(f.buf) - off; rest > scanLimit && !f.synced {
			f.conn().skip(f.scanReason(), rest-scanLimit)
			off += rest - scanLimit
		}
		f.buf = f.buf[:copy(f.buf, f.buf[off:])]
		f.trim()
		return
	}
	if src.lent {
		f.buf = nil
	} else {
		f.buf = f.buf[:0]
	}
	f.everFramed, f.mid = true, false
	f.startFile, f.startPkt, f.startTime = at.File, at.Packet, at.Time
	data = data[need:]
	off := f.frames(data, -need, false, &frameSource{at: at, view: view})
	rest := f.scanned(data[off:])
	f.headAt = false // rest does not begin where data did
	f.hold(rest)
	f.trim()
}

// frames takes the frames in data (segStart: where the delivery begins in
// it; headAt: data begins where a delivery began) and returns how many
// bytes it took or skipped; the rest is the start of a frame, or bytes a
// boundary may start in.
func (f *framer) frames(data []byte, segStart int, headAt bool, src *frameSource) int {
	a := f.s.a
	off := 0
	for off < len(data) {
		if !f.synced {
			n, ok := f.resync(data[off:], segStart-off, src.at)
			off += n
			if !ok {
				break
			}
		}
		rest := data[off:]
		size, ok := decode.FrameSize(rest)
		if !ok {
			break
		}
		min := minRequest
		if f.resp {
			min = minResponse
		}
		if size < int32(min) || int64(size) > int64(a.cfg.MaxFrame) {
			f.badSize(rest, size, src.at)
			if f.tls {
				off = len(data)
				break
			}
			off++
			continue
		}
		total := int(size) + decode.SizeLen
		if len(rest) < total {
			break
		}
		frame := rest[decode.SizeLen:total]
		var handled bool
		switch {
		case f.tentative && !f.confirm(frame, rest[total:], off == segStart || off == 0 && headAt):
			// A guessed boundary is confirmed before its frame is
			// taken (confirmRequest, confirmResponse).
		case f.resp:
			handled = f.response(frame, src)
		default:
			handled = f.request(frame, src)
		}
		f.tentative = false
		if !handled {
			// A guessed boundary whose frame does not decode: scan on.
			f.synced, f.tentative = false, false
			f.conn().skip(f.scanReason(), 1)
			off++
			continue
		}
		f.everFramed, f.mid = true, false
		off += total
		f.startFile, f.startPkt, f.startTime = src.at.File, src.at.Packet, src.at.Time
	}
	return off
}

// badSize records a size prefix outside [min, --max-frame] and starts a scan.
func (f *framer) badSize(rest []byte, size int32, at Place) {
	c := f.conn()
	file, pkt := at.File, at.Packet
	if f.initial || !f.everFramed {
		if isTLS(rest) {
			f.tlsMet(c)
			c.skip(SkipTLS, len(rest))
			c.problem(file, pkt, f.tlsProblem())
			f.synced = false
			return
		}
	}
	c.FramingErrors++
	lo := minRequest
	if f.resp {
		lo = minResponse
	}
	c.problem(file, pkt, fmt.Sprintf("%s frame size %d outside %d..%d; resynchronising", f.dirName(), size, lo, f.s.a.cfg.MaxFrame))
	reason := SkipTooLarge
	if !f.everFramed {
		reason = SkipNotKafka
	}
	c.skip(reason, 1)
	f.synced, f.tentative = false, false
}

// tlsMet marks the direction and its connection as carrying TLS records
// it cannot decode; with a key log, a connection met so without its
// ClientHello is counted (TLSStats.MidStream) once.
func (f *framer) tlsMet(c *Conn) {
	if !c.TLS && f.s.a.cfg.TLSKeys != nil && f.s.tls == nil {
		f.s.a.stats.TLS.MidStream++
	}
	f.tls, c.TLS = true, true
}

// tlsProblem says why a connection's TLS records are not decoded: no key
// log, none for it (its session passed through), or, with a key log, no
// ClientHello to find its keys by (joined mid-connection).
func (f *framer) tlsProblem() string {
	switch {
	case f.s.a.cfg.TLSKeys == nil:
		return "TLS records on a Kafka connection: not decodable without keys (--tls-keylog)"
	case f.s.tls == nil:
		return "TLS records on a Kafka connection without its ClientHello (joined mid-connection): its keys cannot be found in the key log"
	}
	return "TLS records on a Kafka connection: not decrypted (" + f.s.tls.s.Info.Why + ")"
}

// isTLS reports a TLS record header (handshake or alert, TLS 1.0-1.3).
func isTLS(b []byte) bool {
	return len(b) >= 3 && (b[0] == 0x16 || b[0] == 0x15 || b[0] == 0x17) && b[1] == 0x03 && b[2] <= 0x04
}

// resync looks for a frame boundary in b. It returns how many bytes to
// skip and whether a boundary was found at that offset.
func (f *framer) resync(b []byte, segStart int, at Place) (int, bool) {
	c := f.conn()
	if f.initial && isTLS(b) {
		f.tlsMet(c)
		c.skip(SkipTLS, len(b))
		c.problem(at.File, at.Packet, f.tlsProblem())
		return len(b), false
	}
	maxFrame := f.s.a.cfg.MaxFrame
	need := 14
	if f.resp {
		need = 8
	}
	i := 0
	for ; i+need <= len(b); i++ {
		if f.resp {
			if f.responseBoundary(b[i:], i == 0 && f.initial || i == segStart) {
				break
			}
		} else if decode.PlausibleRequest(b[i:], maxFrame) {
			break
		}
	}
	if i+need > len(b) {
		// Nothing yet; keep the last few bytes, a boundary may start there.
		keep := min(len(b), need-1)
		skip := len(b) - keep
		c.skip(f.scanReason(), skip)
		return skip, false
	}
	c.skip(f.scanReason(), i)
	f.synced, f.tentative = true, true
	f.initial = false
	return i, true
}

// scanned returns what of rest a direction not yet synced may hold while
// searching for a frame: past scanLimit the oldest bytes are skipped and
// counted.
func (f *framer) scanned(rest []byte) []byte {
	if len(rest) > scanLimit && !f.synced {
		drop := len(rest) - scanLimit
		f.conn().skip(f.scanReason(), drop)
		rest = rest[drop:]
	}
	return rest
}

// scanReason is the reason for bytes skipped while looking for a frame
// boundary: the end of a frame under way when the capture joined the
// direction, bytes that never framed in a direction seen from its start,
// or bytes after a hole or a framing error.
func (f *framer) scanReason() string {
	switch {
	case f.everFramed:
		return SkipResync
	case f.mid:
		return SkipMidstream
	}
	return SkipNotKafka
}

// responseBoundary reports whether b plausibly starts a response frame:
// its correlation id is that of a request waiting on this connection, or,
// at a segment boundary (segment true), the frame ends exactly where the
// data does or where another plausible frame begins. The second case finds
// responses to requests sent before the capture began.
func (f *framer) responseBoundary(b []byte, segment bool) bool {
	size := int32(binary.BigEndian.Uint32(b))
	if size < minResponse || int64(size) > int64(f.s.a.cfg.MaxFrame) {
		return false
	}
	c := f.conn()
	if c.hasPendingAt(b) {
		return true
	}
	if !segment {
		return false
	}
	end := int(size) + 4
	if end == len(b) {
		return true
	}
	if end+8 <= len(b) {
		next := int32(binary.BigEndian.Uint32(b[end:]))
		return next >= minResponse && int64(next) <= int64(f.s.a.cfg.MaxFrame)
	}
	return false
}

// confirm reports whether the frame at a guessed boundary (rest follows
// it; delivered: it begins where a delivery began) is taken: a request
// as confirmRequest says; a response to a waiting request if it decodes
// exactly as that request's API; a response to a request not captured as
// responseBoundary's chain check already said.
func (f *framer) confirm(frame, rest []byte, delivered bool) bool {
	maxFrame := f.s.a.cfg.MaxFrame
	if !f.resp {
		return confirmRequest(frame, rest, delivered, maxFrame)
	}
	corr, _ := decode.Correlation(frame)
	if w := f.conn().waitingWith(corr); w != nil && decode.KnownVersion(w.Key, w.Version) {
		return exactResponse(frame, w.Key, w.Version) && followedByFrame(rest, minResponse, maxFrame)
	}
	return true
}

// newRequest returns a request message with the position fields of one
// completed now: with room for its batches in the same allocation if it
// carries one or two (n), as a Produce request most often does (msgpool.go).
func (f *framer) newRequest(n int, at Place, owned []byte) *Message {
	m := f.s.a.msgs.newRequest(n)
	f.place(m, at, owned)
	return m
}

// place fills the position fields of m, a new (zero) message completed
// now. The fields are set one by one: a composite literal cleared and
// copied all of a Message's 328 bytes, with write barriers, again.
func (f *framer) place(m *Message, at Place, owned []byte) {
	m.owned = owned
	m.spare = f.s.a.spare
	c := f.conn()
	m.Conn, m.conn = &c.ConnInfo, c
	m.Response = f.resp
	m.File, m.Packet, m.Time = at.File, at.Packet, at.Time
	m.FirstPacket, m.FirstTime = f.startPkt, f.startTime
}

// request handles one request frame. It returns false only for a frame
// at a guessed boundary that does not decode.
func (f *framer) request(frame []byte, src *frameSource) bool {
	a := f.s.a
	frame, owned := a.own(frame, src)
	c := f.conn()
	h, err := decode.ParseRequestHeader(frame)
	headerErr := err
	var req kmsg.Request
	var shared bool
	known := decode.KnownVersion(h.Key, h.Version)
	if known && headerErr == nil {
		req, shared, err = f.decodeRequest(h, frame)
	}
	f.tentative = false
	n := 0
	if _, ok := req.(*kmsg.ProduceRequest); ok && err == nil {
		_, n = countBatches(req)
	}
	m := f.newRequest(n, src.at, owned)
	m.Size = len(frame) + 4
	m.Key, m.Version, m.Correlation = h.Key, h.Version, h.Correlation
	m.Client.ID = c.clientID(h.ClientID, h.ClientIDNull)
	m.Frame = frame
	m.shared = shared
	switch {
	case headerErr != nil && known:
		// Key, version and correlation id are there (frames are at
		// least 8 bytes): the request still counts and its response
		// still pairs.
		m.Err = fmt.Errorf("%s v%d request header corr %d: %w", decode.Name(h.Key), h.Version, h.Correlation, headerErr)
		c.DecodeErrors++
		c.problem(m.File, m.Packet, m.Err.Error())
	case !known:
		c.UnknownAPIs++
		a.stats.countUnknown(UnknownAPI{h.Key, h.Version}, 1)
		if decode.KnownKey(h.Key) {
			m.Err = fmt.Errorf("%s v%d corr %d: %w (max v%d)", decode.Name(h.Key), h.Version, h.Correlation, decode.ErrUnknownVersion, decode.MaxVersion(h.Key))
		} else {
			m.Err = fmt.Errorf("API key %d v%d corr %d: %w", h.Key, h.Version, h.Correlation, decode.ErrUnknownKey)
		}
		c.problem(m.File, m.Packet, m.Err.Error())
	case err != nil:
		m.Err = fmt.Errorf("decode %s v%d request corr %d: %w", decode.Name(h.Key), h.Version, h.Correlation, err)
		c.DecodeErrors++
		c.problem(m.File, m.Packet, m.Err.Error())
	default:
		m.Req = req
		ScanBatches(m, req)
		c.hint(keyVersion{h.Key, h.Version})
		f.s.fr[ToClient].unstash()
	}
	m.Identify()
	c.Roles[m.Role]++
	c.Requests++
	if decode.KnownKey(h.Key) {
		c.APIs.Add(h.Key)
	} else {
		c.APIs.Add(UnknownKey) // one entry for every key kmsg does not know
	}
	a.emitRequest(m)
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		c.NoResponse++
		a.emit(&Exchange{Conn: c, Req: m, NoResponse: true})
		return true
	}
	a.wait(c, m, src.at)
	return true
}

// decodeRelease drops a decoded body's references into its frame.
var decodeRelease = decode.ReleaseRecords

// response handles one response frame.
func (f *framer) response(frame []byte, src *frameSource) bool {
	a := f.s.a
	frame, owned := a.own(frame, src)
	c := f.conn()
	corr, _ := decode.Correlation(frame)
	// Answered out of order means never answered: Kafka responds on a
	// connection in request order.
	req := c.match(corr, func(old *Message) { a.unanswered(c, old) })
	f.tentative = false
	var ax *respExchange
	var room []BatchRef
	if req != nil {
		// Paired: it comes back once its exchange is delivered.
		ax, room = a.msgs.newResponse()
	} else {
		ax = new(respExchange)
	}
	m := &ax.m
	f.place(m, src.at, owned)
	m.Size = len(frame) + 4
	m.Correlation = corr
	m.Frame = frame
	if req == nil {
		m.Key, m.Version = -1, -1
		c.Unmatched++
		if f.infer(m, frame) || !f.keep(m, frame) {
			f.unmatched(m)
		}
		return true
	}
	m.Answers(req)
	if c.ClientBy == ClientByPort || c.ClientBy == ClientByContent || c.ClientBy == ClientByPortNumber {
		// A request answered: the side taken on weaker evidence is
		// now proven.
		c.ClientBy = ClientByPairing
	}
	// A refused ApiVersions decodes in the v0 layout even at a version
	// kmsg does not know; its header is the correlation id alone.
	if decode.KnownVersion(req.Key, req.Version) || decode.UnsupportedVersionAnswer(req.Key, req.Version, frame[4:]) {
		resp, codes, shared, err := f.decodeResponse(req.Key, req.Version, frame)
		if err != nil {
			m.Err = fmt.Errorf("decode %s v%d response corr %d: %w", decode.Name(req.Key), req.Version, corr, err)
			c.DecodeErrors++
			c.problem(m.File, m.Packet, m.Err.Error())
		} else {
			m.Resp, m.shared = resp, shared
			m.Batches = room
			ScanBatches(m, resp)
			m.ErrorCodes = codes
			if len(m.ErrorCodes) > 0 {
				c.ErrorResponses++
			}
		}
	} else {
		m.Err = req.Err
	}
	c.Responses++
	ax.x = Exchange{Conn: c, Req: req, Resp: m}
	a.emit(&ax.x)
	return true
}

// keep stashes m, an unmatched response of unknown API, until a request
// on the connection may tell its API (the capture began after its
// request, or lost it; the connection's next requests are usually of the
// same API). It reports whether it did: not if the stash or the
// analyzer's holding budget is full, or the frame large.
func (f *framer) keep(m *Message, frame []byte) bool {
	a := f.s.a
	if len(f.stash) >= maxStash || len(frame) > maxStashFrame || a.held+int64(len(frame)) > a.holdBudget() {
		return false
	}
	cp := append([]byte(nil), frame...)
	m.Frame = cp
	f.stash = append(f.stash, stashed{m: m, frame: cp})
	a.held += int64(len(cp))
	return true
}

// unstash hands over the stashed responses in order, decoded if the
// connection's request APIs now tell theirs: called at a request, whose
// API is the best hint there will be, and at the end.
func (f *framer) unstash() {
	a := f.s.a
	for i, s := range f.stash {
		f.infer(s.m, s.frame)
		a.held -= int64(len(s.frame))
		f.unmatched(s.m)
		f.stash[i] = stashed{}
	}
	f.stash = f.stash[:0]
}

// unmatched hands over a response whose request was not captured.
func (f *framer) unmatched(m *Message) {
	c := f.conn()
	if !m.Inferred {
		c.skip(SkipUnmatched, m.Size)
	}
	f.s.a.emit(&Exchange{Conn: c, Resp: m})
}

// infer decodes m, a response whose request was not captured, as the
// first of the connection's request APIs (Conn.hint) that it decodes
// exactly as, and reports whether one did.
func (f *framer) infer(m *Message, frame []byte) bool {
	c := f.conn()
	for _, kv := range c.apis[:c.napis] {
		if !exactResponse(frame, kv.key, kv.version) {
			continue
		}
		hl, err := decode.ResponseHeaderLen(frame, kv.key, kv.version)
		if err != nil {
			continue
		}
		resp, err := decode.DecodeResponse(kv.key, kv.version, frame[hl:])
		if err != nil {
			continue
		}
		m.Key, m.Version, m.Inferred, m.Resp = kv.key, kv.version, true, resp
		ScanBatches(m, resp)
		m.ErrorCodes = errorCounts(resp, m.ErrorCodes)
		return true
	}
	return false
}

func errorCounts(resp kmsg.Response, out []ErrorCount) []ErrorCount {
	// A response names a few distinct codes, found by a linear search;
	// past linearCodes (a response can name tens of thousands of codes,
	// one per topic: a search per code was quadratic), by an index.
	var idx map[int16]int
	decode.ErrorCodes(resp, func(code int16) {
		if idx != nil {
			if i, ok := idx[code]; ok {
				out[i].Count++
				return
			}
			idx[code] = len(out)
			out = append(out, ErrorCount{Code: code, Count: 1})
			return
		}
		for i := range out {
			if out[i].Code == code {
				out[i].Count++
				return
			}
		}
		out = append(out, ErrorCount{Code: code, Count: 1})
		if len(out) > linearCodes {
			idx = make(map[int16]int, 2*len(out))
			for i := range out {
				idx[out[i].Code] = i
			}
		}
	})
	return out
}

// linearCodes is how many distinct error codes of a response are counted
// by a linear search before an index is built.
const linearCodes = 16

// countBatches returns how many record sets body has that are not empty,
// and how many batches they hold.
func countBatches(body any) (sets, n int) {
	decode.RecordSets(body, func(rs decode.RecordSet) {
		if len(rs.Records) > 0 {
			sets++
			n += decode.CountBatches(rs.Records)
		}
	})
	return sets, n
}

// ScanBatches sets m.Batches to the record batches of body, a Produce
// request or Fetch response (nil for another), as the framer does.
func ScanBatches(m *Message, body any) {
	// Room for every batch, counted by their lengths: a Fetch response
	// carries several per partition, and growing the slice batch by
	// batch copied them over and over.
	sets, n := countBatches(body)
	if sets == 0 {
		m.Batches = nil
		return
	}
	if len(m.Batches) == 0 && cap(m.Batches) >= n {
		m.Batches = m.Batches[:0] // the room allocated with the message
	} else {
		m.Batches = make([]BatchRef, 0, n)
	}
	decode.RecordSets(body, func(rs decode.RecordSet) {
		if len(rs.Records) == 0 {
			return
		}
		topic := rs.Topic // named by id: see Delivery.nameTopics
		it := decode.Batches(rs.Records)
		var b decode.Batch
		for it.Next(&b) {
			m.Batches = append(m.Batches, BatchRef{Topic: topic, TopicID: rs.TopicID, Partition: rs.Partition, Batch: b})
		}
		if it.Err != nil {
			m.BatchErrors++
		}
	})
	if len(m.Batches) == 0 {
		m.Batches = nil // as without batches
	}
}
