package flows

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/internal/kmsgtest"
)

// checkBuffers checks the budget's books: used is the capacity of the
// buffers in the heap, the heap is ordered, and used is within budget.
func checkBuffers(t *testing.T, budget int) func(a *Analyzer) {
	return func(a *Analyzer) {
		t.Helper()
		b := &a.bufs
		var sum int64
		for i, f := range b.h {
			if int(f.hidx) != i+1 || int(f.held) != cap(f.buf) || f.held == 0 {
				t.Fatalf("heap entry %d: index %d, held %d, capacity %d", i, f.hidx, f.held, cap(f.buf))
			}
			if i > 0 && b.h.Less(i, (i-1)/2) {
				t.Fatalf("heap out of order at %d", i)
			}
			if f.idle != (len(f.buf) == 0) {
				t.Fatalf("heap entry %d: idle %v with %d bytes", i, f.idle, len(f.buf))
			}
			sum += int64(f.held)
		}
		if sum != b.used {
			t.Fatalf("budget counts %d bytes, buffers hold %d", b.used, sum)
		}
		if b.used > int64(budget) {
			t.Fatalf("buffers hold %d bytes, over the budget of %d", b.used, budget)
		}
	}
}

// bigProduce is a Produce v9 request frame whose records make it size
// bytes long.
func bigProduce(corr int32, size int) []byte {
	p := kmsg.NewPtrProduceRequest()
	p.Version, p.Acks, p.TimeoutMillis = 9, -1, 1000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "orders"
	tp.Partitions = append(tp.Partitions, kmsg.NewProduceRequestTopicPartition())
	p.Topics = append(p.Topics, tp)
	n := 0
	for {
		// The records' length prefix is a varint: adjust until exact.
		p.Topics[0].Partitions[0].Records = bytes.Repeat([]byte{'x'}, n)
		frame := kmsgtest.AppendRequestFrame(nil, corr, kmsg.StringPtr("id"), p)
		if len(frame) == size {
			return frame
		}
		n += size - len(frame)
	}
}

// TestBufferBudgetAcrossConnections sends, on 6 connections at once and
// interleaved, a 400,000-byte Produce each (then a small request and its
// response), with a budget of 1 MiB: the 6 partial frames do not fit
// together. The budget must hold after every packet; the largest frames
// are dropped, their bytes counted as "budget" with a problem at their
// first packet; each connection stays in step and decodes what follows;
// every byte is in a frame or skipped.
func TestBufferBudgetAcrossConnections(t *testing.T) {
	const conns, size, budget = 6, 400_000, 1 << 20
	cfg := DefaultConfig()
	cfg.BufferBudget = budget
	frames := make([][]byte, conns)
	// start[i] is the packet carrying the first byte of connection i+1's
	// big frame, where a problem about it belongs.
	start := make([]uint64, conns)
	a, ev := run(t, cfg, func(w *gen.Writer) {
		cs := make([]*gen.Conn, conns)
		for i := range cs {
			cs[i] = w.Conn(bClient(i), bBroker, bt0, gen.ConnOptions{})
			frames[i] = bigProduce(1, size)
		}
		at := bt0
		for off := 0; off < size; off += 10_000 {
			for i, c := range cs {
				at = at.Add(time.Millisecond)
				if off == 0 {
					start[i] = uint64(w.Packets() + 1)
				}
				c.Send(gen.ClientToServer, at, frames[i][off:min(off+10_000, size)])
			}
		}
		for _, c := range cs {
			at = at.Add(time.Millisecond)
			c.Response(at, 1, produceResp())
			c.Request(at.Add(time.Millisecond), 2, kmsg.StringPtr("id"), apiVersionsReq())
			c.Response(at.Add(2*time.Millisecond), 2, apiVersionsResp())
			c.Close(at.Add(3 * time.Millisecond))
		}
	}, checkBuffers(t, budget))
	if a.bufs.used != 0 || len(a.bufs.h) != 0 {
		t.Errorf("after Close the buffers hold %d bytes in %d framers, want none", a.bufs.used, len(a.bufs.h))
	}
	dropped, decoded := 0, 0
	for _, c := range a.Conns() {
		var framed int64
		for _, m := range ev.requests {
			if m.Conn == &c.ConnInfo {
				framed += int64(m.Size)
			}
		}
		var skipped int64
		for _, n := range c.Skipped {
			skipped += n
		}
		if framed+skipped != c.Bytes[ToServer] {
			t.Errorf("conn %d: %d bytes to the server, %d framed + %d skipped %v", c.ID, c.Bytes[ToServer], framed, skipped, c.Skipped)
		}
		if c.Skipped[SkipBudget] > 0 {
			dropped++
			if c.Skipped[SkipBudget] != size || len(c.Skipped) != 1 {
				t.Errorf("conn %d: skipped %v, want the whole %d-byte frame as budget", c.ID, c.Skipped, size)
			}
			if len(c.Problems) != 1 || c.Problems[0].Packet != start[c.ID-1] || // where the frame began
				!strings.Contains(c.Problems[0].What, "Produce v9 request corr 1 (400000 bytes) dropped after") ||
				!strings.Contains(c.Problems[0].What, "passed the budget of 1048576 bytes") {
				t.Errorf("conn %d (first packet %d): problems %+v", c.ID, c.FirstPacket, c.Problems)
			}
			// Its response still pairs with the request's header, and
			// the connection decodes on.
			if c.Requests != 1 || c.Responses != 2 || c.Unanswered != 0 || c.Unmatched != 0 {
				t.Errorf("conn %d: %d requests, %d responses, %d unanswered, %d unmatched; want 1, 2, 0, 0", c.ID, c.Requests, c.Responses, c.Unanswered, c.Unmatched)
			}
		} else {
			decoded++
			if len(c.Skipped) != 0 || c.Requests != 2 || c.Responses != 2 {
				t.Errorf("conn %d: skipped %v, %d requests, %d responses; want nothing skipped, 2 and 2", c.ID, c.Skipped, c.Requests, c.Responses)
			}
		}
	}
	// 2 frames of 400,000 bytes fit in 1 MiB (a third's doubling
	// does not); the other 4 are dropped.
	if dropped != 4 || decoded != 2 {
		t.Errorf("%d frames dropped, %d decoded; want 4 and 2", dropped, decoded)
	}
}

// TestBufferBudgetDropsResponses drops big Fetch responses for the budget:
// each is still paired with its request, delivered when its last byte
// passes with ErrDropped (counted as a response and a decode error, not
// as unanswered), and the connection decodes on.
func TestBufferBudgetDropsResponses(t *testing.T) {
	const conns, size, budget = 3, 300_000, 512 << 10
	cfg := DefaultConfig()
	cfg.BufferBudget = budget
	var last time.Time
	a, ev := run(t, cfg, func(w *gen.Writer) {
		cs := make([]*gen.Conn, conns)
		frames := make([][]byte, conns)
		at := bt0
		for i := range cs {
			cs[i] = w.Conn(bClient(i), bBroker, bt0, gen.ConnOptions{})
			f := kmsg.NewPtrFetchRequest()
			f.Version = 12
			cs[i].Request(at.Add(time.Millisecond), 7, kmsg.StringPtr("id"), f)
			r := kmsg.NewPtrFetchResponse()
			r.Version = 12
			tp := kmsg.NewFetchResponseTopic()
			tp.Topic = "orders"
			pp := kmsg.NewFetchResponseTopicPartition()
			pp.RecordBatches = bytes.Repeat([]byte{'x'}, size)
			tp.Partitions = append(tp.Partitions, pp)
			r.Topics = append(r.Topics, tp)
			frames[i] = kmsgtest.AppendResponseFrame(nil, 7, r)
		}
		for off := 0; off < len(frames[0]); off += 10_000 {
			for i, c := range cs {
				at = at.Add(time.Millisecond)
				c.Send(gen.ServerToClient, at, frames[i][off:min(off+10_000, len(frames[i]))])
			}
		}
		last = at
		for _, c := range cs {
			at = at.Add(time.Millisecond)
			c.Request(at, 8, kmsg.StringPtr("id"), apiVersionsReq())
			c.Response(at.Add(time.Millisecond), 8, apiVersionsResp())
			c.Close(at.Add(2 * time.Millisecond))
		}
	}, checkBuffers(t, budget))
	var dropped []*Exchange
	for _, x := range ev.exchanges {
		if x.Resp != nil && errors.Is(x.Resp.Err, ErrDropped) {
			dropped = append(dropped, x)
		}
		if x.Unanswered {
			t.Errorf("request %s corr %d counted unanswered", x.Req.Name(), x.Req.Correlation)
		}
	}
	if len(dropped) != 2 || a.bufs.used != 0 {
		t.Fatalf("%d responses dropped, %d bytes buffered after Close; want 2 of the 3 (one fits the budget), none", len(dropped), a.bufs.used)
	}
	for _, x := range dropped {
		c := x.Conn
		if x.Req.Key != 1 || x.Req.Correlation != 7 || x.Resp.Key != 1 || x.Resp.Version != 12 || x.Resp.Resp != nil {
			t.Errorf("dropped response paired with %s v%d corr %d: %+v", x.Req.Name(), x.Req.Version, x.Req.Correlation, x.Resp)
		}
		if !x.Resp.Time.After(last.Add(-time.Duration(conns) * time.Millisecond)) {
			t.Errorf("dropped response delivered at %v, before its last byte (%v)", x.Resp.Time, last)
		}
		if c.Requests != 2 || c.Responses != 2 || c.DecodeErrors != 1 || c.Unanswered != 0 {
			t.Errorf("conn %d: %d requests, %d responses, %d decode errors, %d unanswered; want 2, 2, 1, 0", c.ID, c.Requests, c.Responses, c.DecodeErrors, c.Unanswered)
		}
		if c.Skipped[SkipBudget] != int64(x.Resp.Size) || len(c.Skipped) != 1 {
			t.Errorf("conn %d: skipped %v, want the %d-byte response as budget", c.ID, c.Skipped, x.Resp.Size)
		}
	}
}

// TestBufferReleased: a connection that carried one big frame does not
// keep its buffer once the frame is done; a small one is kept.
func TestBufferReleased(t *testing.T) {
	var conn *Conn
	a, _ := run(t, DefaultConfig(), func(w *gen.Writer) {
		c := w.Conn(bClient(0), bBroker, bt0, gen.ConnOptions{})
		c.Send(gen.ClientToServer, bt0.Add(time.Millisecond), bigProduce(1, 3*keepBuffer))
		c.Response(bt0.Add(2*time.Millisecond), 1, produceResp())
		// Idle from here on, not closed.
	}, func(a *Analyzer) {
		if len(a.Conns()) == 1 && conn == nil {
			conn = a.Conns()[0]
		}
		if conn != nil && conn.Responses == 1 && a.bufs.used > keepBuffer {
			t.Fatalf("after the big frame, %d bytes stay buffered", a.bufs.used)
		}
	})
	if conn == nil || conn.Requests != 1 || conn.Responses != 1 || a.bufs.used != 0 {
		t.Errorf("conn %+v, %d bytes buffered after Close", conn, a.bufs.used)
	}
}

// TestBufferSizedFromPrefix: a frame arriving in pieces is assembled in
// one buffer of exactly its size, taken when its first piece arrives (its
// size prefix tells), and never copied to a bigger one as pieces come.
func TestBufferSizedFromPrefix(t *testing.T) {
	const size = 1_000_003
	frame := bigProduce(1, size)
	var fr *framer
	var first *byte
	pieces := 0
	a, ev := run(t, DefaultConfig(), func(w *gen.Writer) {
		c := w.Conn(bClient(0), bBroker, bt0, gen.ConnOptions{})
		c.Send(gen.ClientToServer, bt0.Add(time.Millisecond), frame)
	}, func(a *Analyzer) {
		for _, s := range a.streams {
			if s.conn != nil {
				fr = &s.fr[ToServer]
			}
		}
		if fr == nil || len(fr.buf) == 0 {
			return
		}
		pieces++
		if cap(fr.buf) != size {
			t.Fatalf("buffer of %d bytes holding %d of a %d-byte frame", cap(fr.buf), len(fr.buf), size)
		}
		if first == nil {
			first = &fr.buf[:1][0]
		} else if &fr.buf[:1][0] != first {
			t.Fatalf("frame moved to another buffer after %d bytes", len(fr.buf))
		}
	})
	if pieces < 10 || len(ev.requests) != 1 || ev.requests[0].Size != size || a.bufs.used != 0 {
		t.Errorf("%d pieces buffered, %d requests, %d bytes buffered after Close; want the %d-byte frame in pieces, decoded",
			pieces, len(ev.requests), a.bufs.used, size)
	}
}

// TestBufferLyingPrefix: a size prefix is the sender's word. One that
// claims more than the budget has free does not get a buffer of that size
// before its bytes arrive (its buffer stays within twice what arrived),
// and does not make the budget drop another connection's partial frame
// that holds real bytes.
func TestBufferLyingPrefix(t *testing.T) {
	const budget, real, claim = 1 << 20, 700_000, 900_000
	cfg := DefaultConfig()
	cfg.BufferBudget = budget
	honest := bigProduce(1, real)
	liar := bigProduce(1, claim)[:5000]
	var lf *framer
	a, ev := run(t, cfg, func(w *gen.Writer) {
		h := w.Conn(bClient(0), bBroker, bt0, gen.ConnOptions{})
		l := w.Conn(bClient(1), bBroker, bt0, gen.ConnOptions{})
		at := bt0.Add(time.Millisecond)
		h.Send(gen.ClientToServer, at, honest[:real-1000])
		l.Send(gen.ClientToServer, at.Add(time.Millisecond), liar[:100])
		l.Send(gen.ClientToServer, at.Add(2*time.Millisecond), liar[100:])
		h.Send(gen.ClientToServer, at.Add(3*time.Millisecond), honest[real-1000:])
		h.Response(at.Add(4*time.Millisecond), 1, produceResp())
	}, func(a *Analyzer) {
		checkBuffers(t, budget)(a)
		for _, s := range a.streams {
			if s.conn != nil && s.conn.Client == bClient(1) {
				lf = &s.fr[ToServer]
			}
		}
		if lf != nil && len(lf.buf) > 0 && cap(lf.buf) > 2*len(lf.buf)+4096 {
			t.Fatalf("a frame claiming %d bytes got a buffer of %d with %d bytes there", claim, cap(lf.buf), len(lf.buf))
		}
	})
	if lf == nil {
		t.Fatal("the second connection was not seen")
	}
	var h *Conn
	for _, c := range a.Conns() {
		if c.Client == bClient(0) {
			h = c
		}
	}
	if h == nil || h.Requests != 1 || h.Responses != 1 || len(h.Skipped) != 0 || len(ev.requests) != 1 || ev.requests[0].Size != real {
		t.Errorf("honest connection %+v, %d requests delivered: want its %d-byte frame decoded, nothing skipped", h, len(ev.requests), real)
	}
}

// TestBufferBudgetReleasesIdleFirst: buffers kept between frames (up to
// keepBuffer) count against the budget, but they hold no data: when a
// partial frame needs room, idle buffers are released before any partial
// frame is dropped, however large the partial frame.
func TestBufferBudgetReleasesIdleFirst(t *testing.T) {
	// Six idle buffers of about 1 MiB, and a 3 MiB frame that fits only
	// if some go: when it grows from 2 to 3 MiB it is the largest buffer.
	const idle = 6
	small, big := 1<<20-1000, 3<<20
	budget := idle<<20 + 5<<19
	cfg := DefaultConfig()
	cfg.BufferBudget = budget
	a, _ := run(t, cfg, func(w *gen.Writer) {
		at := bt0
		for i := range idle {
			c := w.Conn(bClient(i), bBroker, bt0, gen.ConnOptions{})
			frame := bigProduce(1, small)
			for off := 0; off < len(frame); off += 10_000 {
				at = at.Add(time.Millisecond)
				c.Send(gen.ClientToServer, at, frame[off:min(off+10_000, len(frame))])
			}
		}
		c := w.Conn(bClient(idle), bBroker, bt0, gen.ConnOptions{})
		frame := bigProduce(1, big)
		for off := 0; off < len(frame); off += 10_000 {
			at = at.Add(time.Millisecond)
			c.Send(gen.ClientToServer, at, frame[off:min(off+10_000, len(frame))])
		}
	}, checkBuffers(t, budget))
	for _, c := range a.Conns() {
		if c.Requests != 1 || len(c.Skipped) != 0 {
			t.Errorf("conn %d: %d requests, skipped %v, problems %v; want its frame decoded: only idle buffers needed releasing",
				c.ID, c.Requests, c.Skipped, c.Problems)
		}
	}
}

// TestFramePoolAges: a buffer the pool keeps for frames of its size is
// taken again and again, and one that no frame asks for again goes after
// poolAge requests (a capture's few giant frames held theirs for the rest
// of the run).
func TestFramePoolAges(t *testing.T) {
	a := New(DefaultConfig())
	a.putBuffer(make([]byte, 0, 1<<20))
	a.putBuffer(make([]byte, 0, 64<<10))
	for i := range 3 * poolAge {
		b := a.getBuffer(60 << 10)
		if cap(b) != 64<<10 {
			t.Fatalf("request %d for a frame of 60 KiB: buffer of %d bytes, not the pool's of 64 KiB", i, cap(b))
		}
		a.putBuffer(b)
	}
	if len(a.fpool.free) != 1 || a.fpool.bytes != 64<<10 {
		t.Errorf("pool after %d requests for 60 KiB: %d buffers, %d bytes; want the 64 KiB one alone", 3*poolAge, len(a.fpool.free), a.fpool.bytes)
	}
}

// TestFramePoolBounded: a burst of big frames given back leaves the pool
// no more than 2 MiB of idle buffers per analyzer (bulk's workers kept
// 1.9-2.7 MB each for a large part of the run, doubled by the collector's
// pacing in the peak RSS), keeping the biggest, and those go once no frame
// asks for them.
func TestFramePoolBounded(t *testing.T) {
	a := New(DefaultConfig())
	for i := range 12 {
		a.putBuffer(make([]byte, 0, 256<<10+i<<10))
	}
	if a.fpool.bytes > 2<<20 {
		t.Errorf("pool after 12 buffers of 256-267 KiB given back: %d bytes, want <= 2 MiB", a.fpool.bytes)
	}
	if b := a.getBuffer(260 << 10); cap(b) < 260<<10 || cap(b) > 267<<10 {
		t.Errorf("a frame of 260 KiB got a buffer of %d bytes, not a pooled one", cap(b))
	}
	for range 40 {
		a.putBuffer(a.getBuffer(8 << 10))
	}
	if a.fpool.bytes > 8<<10 {
		t.Errorf("pool after 40 requests for 8 KiB: %d bytes, want the 8 KiB buffer alone", a.fpool.bytes)
	}
}
