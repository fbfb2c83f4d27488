package flows

import (
	"fmt"

	"github.com/kfsniff/kfsniff/decode"
)

// The requests waiting for a response are bounded across all connections
// of one Analyzer (Config.MaxPendingTotal), not only per connection
// (Config.MaxPending): many connections each under the per-connection
// bound must not add up to unbounded memory (ROBUSTNESS.md,
// unanswered-conns.pcap).

// waits counts the requests waiting across connections and remembers in
// which order they were pushed, to drop the oldest anywhere. A request
// leaving its connection's queue (answered, dropped) is not removed here:
// its entry goes stale, and is skipped when met (Conn.pendBase tells).
type waits struct {
	total int // requests waiting, partial ones included
	q     []waitRef
	head  int
}

// waitRef is the seq-th request pushed on c.
type waitRef struct {
	c   *Conn
	seq int64
}

func (r waitRef) live() bool { return r.seq >= r.c.pendBase }

// add records the request just pushed on c.
func (w *waits) add(c *Conn) {
	for w.head < len(w.q) && !w.q[w.head].live() {
		w.q[w.head] = waitRef{}
		w.head++
	}
	if w.head == len(w.q) {
		w.q, w.head = w.q[:0], 0
	}
	if stale := len(w.q) - w.head - w.total; stale > w.total+4096 {
		// Answered requests behind an old one that still waits: keep
		// only the live entries, so that q stays within a small
		// multiple of what waits.
		n := 0
		for _, r := range w.q[w.head:] {
			if r.live() {
				w.q[n] = r
				n++
			}
		}
		clear(w.q[n:])
		w.q, w.head = w.q[:n], 0
	} else if w.head > 0 && w.head >= len(w.q)/2 {
		n := copy(w.q, w.q[w.head:])
		clear(w.q[n:])
		w.q, w.head = w.q[:n], 0
	}
	w.q = append(w.q, waitRef{c, c.lastSeq()})
}

// oldest returns the connection whose first waiting request is the
// oldest waiting anywhere, or nil.
func (w *waits) oldest() *Conn {
	for w.head < len(w.q) {
		r := w.q[w.head]
		w.q[w.head] = waitRef{}
		w.head++
		if r.live() {
			// Requests leave a connection oldest first, and entries
			// are in push order: a live entry is its connection's
			// first waiting request.
			return r.c
		}
	}
	return nil
}

// Problems recorded once per connection (Conn.noted).
const (
	noteMaxPending = 1 << iota
	noteMaxPendingTotal
)

// wait makes m wait for its response on c, dropping the oldest waiting
// request of c beyond Config.MaxPending and the oldest anywhere beyond
// Config.MaxPendingTotal; at is the packet m came in.
func (a *Analyzer) wait(c *Conn, m *Message, at Place) {
	if c.Packets[ToClient] == 0 && c.waiting() >= oneSidedWaiting {
		// Not one packet from the server: a one-sided capture. Keep
		// only the last requests waiting, in case the other direction
		// appears; the older ones' fate cannot be known.
		a.notCaptured(c, c.popHead())
	}
	if old := c.push(m, a.cfg.MaxPending); old != nil {
		a.dropWaiting(c, old, noteMaxPending, at)
	}
	if c.waits == nil {
		return // not made by an Analyzer (tests)
	}
	a.waits.add(c)
	for max := a.cfg.MaxPendingTotal; max > 0 && a.waits.total > max; {
		v := a.waits.oldest()
		if v == nil {
			break
		}
		a.dropWaiting(v, v.popHead(), noteMaxPendingTotal, at)
	}
}

// dropWaiting counts a waiting request dropped for a bound as unanswered
// (a partial one is not counted: see Message.Partial), and says so once
// per connection and bound, at the packet at.
func (a *Analyzer) dropWaiting(c *Conn, m *Message, why uint8, at Place) {
	if m == nil || m.Partial {
		return
	}
	if c.Packets[ToClient] == 0 {
		a.notCaptured(c, m)
		return
	}
	c.Evicted++
	c.Unanswered++
	// (m is read before its exchange is handed over: once delivered, it
	// may be reused, msgpool.go.)
	defer a.emit(&Exchange{Conn: c, Req: m, Unanswered: true})
	if c.noted&why != 0 {
		return
	}
	c.noted |= why
	bound := fmt.Sprintf("%d requests waiting on this connection (the bound per connection)", a.cfg.MaxPending)
	if why == noteMaxPendingTotal {
		bound = fmt.Sprintf("%d requests waiting across connections (the total bound)", a.cfg.MaxPendingTotal)
		if n := a.w.Shards; n > 1 {
			bound = fmt.Sprintf("%d requests waiting across this worker's connections (its share of the total bound, %d, split among %d workers)", a.cfg.MaxPendingTotal, a.cfg.MaxPendingTotal*n, n)
		}
	}
	c.problem(at.File, at.Packet, fmt.Sprintf("over %s: the oldest are dropped and counted unanswered, first %s v%d corr %d of packet %d",
		bound, decode.Name(m.Key), m.Version, m.Correlation, m.Packet))
}

// oneSidedWaiting is how many requests wait on a connection with no
// packet from the server before the oldest are given up as not captured.
const oneSidedWaiting = 64

// notCaptured hands over a request whose response direction has no packet
// in the capture (Exchange.OneSided), unless it is partial.
func (a *Analyzer) notCaptured(c *Conn, m *Message) {
	if m == nil || m.Partial {
		return
	}
	c.NotCaptured++
	a.emit(&Exchange{Conn: c, Req: m, OneSided: true})
}

// unanswered counts a request that can no longer be answered (a later one
// was), unless it is partial.
func (a *Analyzer) unanswered(c *Conn, m *Message) {
	if m.Partial {
		return
	}
	c.Unanswered++
	a.emit(&Exchange{Conn: c, Req: m, Unanswered: true})
}
