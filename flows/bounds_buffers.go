package flows

import (
	"container/heap"
	"errors"
	"fmt"

	"github.com/kfsniff/kfsniff/decode"
)

// The partial frames buffered by the framers of all connections of one
// Analyzer are bounded together (Config.BufferBudget): each may buffer a
// frame up to --max-frame, and many connections doing so must not add up
// to unbounded memory (ROBUSTNESS.md, giant-frames.pcap). Over the budget
// the largest partial frame is dropped: the one costing most, and most
// likely the hostile one, so that ordinary frames on other connections
// still decode (dropping the frame that pushes over the budget instead
// would let a few giant frames starve every other connection).

// ErrDropped marks a response whose frame was dropped for the buffer
// budget: it is paired with its request, but not decoded.
var ErrDropped = errors.New("partial frame dropped: partial frames buffered across connections passed the budget")

// buffers is the capacity held by framer buffers across connections, with
// the framers holding some in a heap: idle buffers first (they hold no
// data, so releasing them loses nothing), then by capacity, largest first.
type buffers struct {
	used int64
	h    bufHeap
}

type bufHeap []*framer

func (h bufHeap) Len() int { return len(h) }
func (h bufHeap) Less(i, j int) bool {
	if h[i].idle != h[j].idle {
		return h[i].idle
	}
	return h[i].held > h[j].held
}
func (h bufHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = int32(i+1), int32(j+1)
}
func (h *bufHeap) Push(x any) {
	f := x.(*framer)
	*h = append(*h, f)
	f.hidx = int32(len(*h))
}
func (h *bufHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	f.hidx = 0
	return f
}

// account brings the budget up to date with the capacity of f's buffer
// and whether it holds data.
func (f *framer) account() {
	n := uint32(cap(f.buf)) // a frame's size prefix is 32 bits
	idle := len(f.buf) == 0
	if n == f.held && (n == 0 || idle == f.idle) {
		return
	}
	b := &f.s.a.bufs
	b.used += int64(n) - int64(f.held)
	f.held, f.idle = n, idle
	switch {
	case n == 0:
		heap.Remove(&b.h, int(f.hidx-1))
	case f.hidx == 0:
		heap.Push(&b.h, f)
	default:
		heap.Fix(&b.h, int(f.hidx-1))
	}
}

// keepBuffer bounds the buffer a framer keeps while it holds the start
// of a frame much smaller than the buffer (after a big frame); idleKeep
// the buffer it keeps between frames, to avoid a trip to the pool for
// every frame split across segments. Bigger buffers go back to the
// analyzer's pool once their frame is done, so that buffers are held by
// the frames being assembled, not by every connection that once had a big
// frame; kept ones count against the budget, which releases idle ones
// first.
const (
	keepBuffer = 2 << 20
	idleKeep   = 4 << 10
)

// A frame split across segments is assembled once, in a buffer of its
// whole size taken when its first bytes arrive (its size prefix says how
// big; see hold), not in a buffer that doubles and copies what it holds
// each time. The size prefix is the sender's word, so it gets that buffer
// only if it fits in the budget beside the partial frames of the other
// connections without dropping any of them (idle buffers may go): a lying
// prefix takes at most what the budget has free, and reuses the pool's
// buffers; otherwise the buffer grows as the bytes arrive, by doubling,
// and a frame that does not fit is dropped as before.

// frameTotal returns the size of the frame (size prefix included) at the
// start of b, if b starts at a boundary (synced) and has its size prefix,
// within --max-frame.
func (f *framer) frameTotal(b []byte) (int, bool) {
	size, ok := decode.FrameSize(b)
	if !ok || !f.synced || size < 0 || int64(size) > int64(f.s.a.cfg.MaxFrame) {
		return 0, false
	}
	return int(size) + decode.SizeLen, true
}

// hold keeps rest, the bytes of data after its last frame (the start of
// a frame, or bytes a boundary may start in), in f.buf, which is empty:
// in a buffer of the frame's size if that fits (see above), else in the
// one f has.
func (f *framer) hold(rest []byte) {
	if total, ok := f.frameTotal(rest); ok && total > len(rest) && total > cap(f.buf) {
		a := f.s.a
		old := f.buf
		f.buf = nil
		f.account() // f holds nothing while room is looked for
		if a.roomFor(total) {
			f.buf = a.getBuffer(total)
			a.putBuffer(old)
		} else {
			f.buf = old
		}
	}
	f.buf = append(f.buf[:0], rest...)
}

// grow makes room in f.buf for extra more bytes. A frame whose size is
// known (synced, within --max-frame) gets a buffer of its whole size if
// that fits without dropping other partial frames; otherwise the buffer
// grows by doubling, never beyond the size of the frame it holds unless
// the bytes received are more, so capacity stays within twice the bytes
// actually received. It returns false if, to stay within the budget, f's
// own partial frame was dropped instead (f.buf is then empty).
func (f *framer) grow(extra int) bool {
	need := len(f.buf) + extra
	if need <= cap(f.buf) {
		return true
	}
	a := f.s.a
	n := 2 * cap(f.buf)
	if total, ok := f.frameTotal(f.buf); ok {
		if total >= need && a.roomFor(total-cap(f.buf)) {
			n = total
		} else {
			n = min(n, total)
		}
	}
	n = max(n, need)
	if !a.makeRoom(f, n-cap(f.buf)) {
		f.dropForBudget()
		return false
	}
	b := append(a.getBuffer(n), f.buf...)
	a.putBuffer(f.buf)
	f.buf = b
	f.account()
	return true
}

// trim releases a buffer much bigger than what it holds needs (after a
// big frame), brings the budget up to date and keeps it.
func (f *framer) trim() {
	if n := cap(f.buf); len(f.buf) == 0 && n > idleKeep {
		f.s.a.putBuffer(f.buf)
		f.buf = nil
	} else if n > keepBuffer {
		want := len(f.buf)
		if total, ok := f.frameTotal(f.buf); ok {
			want = max(want, total)
		}
		if want < n/4 {
			old := f.buf
			f.buf = nil
			if len(old) > 0 {
				f.buf = append(f.s.a.getBuffer(want), old...)
			}
			f.s.a.putBuffer(old)
		}
	}
	f.account()
	f.s.a.makeRoom(nil, 0)
}

// roomFor reports whether extra more bytes fit in the budget, releasing
// idle buffers if needed but dropping no partial frame.
func (a *Analyzer) roomFor(extra int) bool {
	budget := int64(a.cfg.BufferBudget)
	if budget <= 0 {
		// No budget: a size prefix alone gets no more than this.
		return extra <= noBudgetTrust
	}
	b := &a.bufs
	for b.used+int64(extra) > budget && len(b.h) > 0 && b.h[0].idle {
		b.h[0].dropForBudget()
	}
	return b.used+int64(extra) <= budget
}

// noBudgetTrust is the largest buffer a size prefix gets before its bytes
// arrive when there is no budget (--buffer-budget 0).
const noBudgetTrust = 16 << 20

// The analyzer's pool keeps buffers of big frames for the next ones:
// framers' buffers once their frame is done, and, for a deferred
// analyzer, the buffers its messages took (own, Message.owned) once they
// were delivered. It holds at most poolBuffers buffers, poolBytes in all
// and no more than an eighth of the budget, besides the budget; smaller
// buffers than poolMin are not kept. A buffer not taken again within
// poolAge requests for one goes (take): the few giant frames of a capture
// (bulk's Fetch responses of 0.4-1 MiB, 3 in 19,500) held their buffers
// for the rest of the run, 2 MiB of the live heap per worker, which the
// collector's pacing doubled in the peak RSS; frames of one size over and
// over (the large shape's) keep theirs. A request is a frame over a
// segment, rare on bulk (200-420 a worker in a run), so 64 of them, and
// 8 MiB, still let each worker keep 1.9-2.7 MB of buffers no frame took
// for a large part of the run: 16 and 2 MiB (bulk's peak RSS with two
// workers 1.5-2 MiB lower, the large shape's CPU and RSS the same;
// TestFramePoolBounded).
const (
	poolMin     = idleKeep
	poolBuffers = 64
	poolBytes   = 2 << 20
	poolAge     = 16
)

type framePool struct {
	free  [][]byte
	at    []uint64 // tick when each of free was given back
	bytes int
	tick  uint64 // getBuffer calls
}

// getBuffer returns an empty buffer of capacity n or a little more: the
// smallest pooled one that fits and wastes less than n, else a new one.
func (a *Analyzer) getBuffer(n int) []byte {
	a.takeSpare()
	p := &a.fpool
	p.tick++
	best := -1
	for i := 0; i < len(p.free); i++ {
		if p.tick-p.at[i] > poolAge {
			p.take(i) // left to the collector
			i--
			continue
		}
		if c := cap(p.free[i]); c >= n && c < 2*n && (best < 0 || c < cap(p.free[best])) {
			best = i
		}
	}
	if best < 0 {
		return make([]byte, 0, n)
	}
	return p.take(best)[:0]
}

// take removes the i-th buffer from the pool and returns it.
func (p *framePool) take(i int) []byte {
	b := p.free[i]
	last := len(p.free) - 1
	p.free[i], p.free[last] = p.free[last], nil
	p.at[i] = p.at[last]
	p.free, p.at = p.free[:last], p.at[:last]
	p.bytes -= cap(b)
	return b
}

// putBuffer gives b, no longer used, to the pool: kept if there is room,
// in place of a smaller one if it is bigger, else left to the collector.
func (a *Analyzer) putBuffer(b []byte) {
	c := cap(b)
	if c < poolMin {
		return
	}
	limit := poolBytes
	if budget := a.cfg.BufferBudget; budget > 0 {
		limit = min(limit, budget/8)
	}
	if c > limit {
		return
	}
	p := &a.fpool
	for len(p.free) > 0 && (len(p.free) >= poolBuffers || p.bytes+c > limit) {
		small := 0
		for i := range p.free {
			if cap(p.free[i]) < cap(p.free[small]) {
				small = i
			}
		}
		if cap(p.free[small]) >= c {
			return
		}
		p.take(small)
	}
	p.free = append(p.free, b[:0])
	p.at = append(p.at, p.tick)
	p.bytes += c
}

// takeSpare moves the buffers the delivery gave back (deferred) into the
// pool.
func (a *Analyzer) takeSpare() {
	for a.spare != nil {
		select {
		case b := <-a.spare:
			a.putBuffer(b)
		default:
			return
		}
	}
}

// makeRoom releases idle buffers, then drops partial frames, largest
// first, until the buffers fit the budget with extra more bytes for f
// (nil: none). It returns false if f's own frame, which would be the
// largest, is the one to drop (the caller drops it).
func (a *Analyzer) makeRoom(f *framer, extra int) bool {
	budget := int64(a.cfg.BufferBudget)
	if budget <= 0 {
		return true
	}
	b := &a.bufs
	for b.used+int64(extra) > budget && len(b.h) > 0 {
		v := b.h[0]
		if v == f {
			// f holds data (it is growing), so no buffer is idle:
			// the next largest is a child of the root.
			v = nil
			if len(b.h) > 1 {
				v = b.h[1]
			}
			if len(b.h) > 2 && b.h.Less(2, 1) {
				v = b.h[2]
			}
		}
		if f != nil && (v == nil || !v.idle && int(v.held) < int(f.held)+extra) {
			return false
		}
		v.dropForBudget()
	}
	return true
}

// dropForBudget drops f's partial frame for the budget: its bytes are
// skipped as "budget", and so is the rest of it as it arrives (its size
// is known), with a problem at the frame's first packet. What is known of
// the frame is kept: a request's header, so that its response decodes; a
// response is paired with its request (delivered with ErrDropped when its
// last byte passes). A buffer holding no partial frame is just released.
func (f *framer) dropForBudget() {
	c := f.conn()
	a := f.s.a
	n := len(f.buf)
	if n == 0 {
		a.putBuffer(f.buf)
		f.buf = nil
		f.account()
		return
	}
	c.skip(SkipBudget, n)
	what := fmt.Sprintf("%s partial frame dropped after %d bytes", f.dirName(), n)
	if total, ok := f.frameTotal(f.buf); ok && total > n {
		what = fmt.Sprintf("%s frame of %d bytes dropped after %d", f.dirName(), total, n)
		switch {
		case f.tentative:
		case !f.resp:
			if m := f.partialRequest(f.buf); m != nil {
				what = fmt.Sprintf("%s v%d request corr %d (%d bytes) dropped after %d", decode.Name(m.Key), m.Version, m.Correlation, total, n)
				a.wait(c, m, a.at) // at the packet that passed the budget
			}
		default:
			if corr, ok := decode.Correlation(f.buf[decode.SizeLen:]); ok && c.waitingWith(corr) != nil {
				req := c.match(corr, func(old *Message) { a.unanswered(c, old) })
				m := &Message{
					Conn: &c.ConnInfo, conn: c, Response: true, FirstPacket: f.startPkt, FirstTime: f.startTime, Size: total,
					Correlation: corr,
				}
				m.Answers(req)
				m.Err = fmt.Errorf("%s v%d response corr %d: %w", decode.Name(req.Key), req.Version, corr, ErrDropped)
				f.dropped = &Exchange{Conn: c, Req: req, Resp: m}
				what = fmt.Sprintf("%s v%d response corr %d (%d bytes) dropped after %d", decode.Name(req.Key), req.Version, corr, total, n)
			}
		}
		f.skipTo, f.skipWhy = int64(total-n), skipWhy(SkipBudget)
	} else {
		f.synced, f.tentative = false, false
	}
	c.problem(f.startFile, f.startPkt, fmt.Sprintf("%s: partial frames buffered across connections passed the budget of %d bytes%s", what, a.cfg.BufferBudget, a.shareOf(a.cfg.BufferBudget)))
	a.putBuffer(f.buf)
	f.buf = nil
	f.account()
}

// deliverDropped delivers the response dropped for the budget once its
// last byte has passed (or the rest of it cannot come): a response paired
// with its request, not decoded (a decode error).
func (f *framer) deliverDropped(at Place) {
	x := f.dropped
	if x == nil {
		return
	}
	f.dropped = nil
	m := x.Resp
	m.File, m.Packet, m.Time = at.File, at.Packet, at.Time
	c := f.conn()
	c.Responses++
	c.DecodeErrors++
	f.s.a.emit(x)
}
