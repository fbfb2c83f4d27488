package flows

import "github.com/kfsniff/kfsniff/cluster"

// Event is one thing for the handlers: a request, an exchange or a
// connection event (exactly one of Req, X, Conn is set).
//
// Normally an Analyzer delivers its events to its handlers as they
// happen. With Config.Deferred it hands them to Config.Sink, and a
// Delivery delivers them later, possibly on another goroutine, in an order
// the caller chooses: this is how the pipeline runs one analyzer per shard
// of connections and feeds one set of handlers in packet order.
type Event struct {
	Req  *Message
	X    *Exchange
	Conn *ConnEvent
	// Phase is 0 for events caused by a packet or a flush, and for those
	// of Close: 1 for the end of every stream (connections still held
	// decided, data flushed, responses kept for their API), 2 for
	// requests never answered, 3 for connection attempts never answered
	// (see CloseLess).
	Phase uint8
	// Order is the place (Analyzer.PacketAt) of the first packet of the
	// stream that made the event: events of several streams made at
	// once (a flush, the end) are handed over in this order.
	Order uint64
}

// CloseLess orders two events of Close from different analyzers the way
// one analyzer orders them: by phase, then the ends of streams by their
// first packets (Order), unanswered requests by their packets and
// unanswered attempts by time and packet. Events it calls equal keep the
// order of their analyzers.
func CloseLess(a, b *Event) bool {
	if a.Phase != b.Phase {
		return a.Phase < b.Phase
	}
	switch a.Phase {
	case 1:
		return a.Order < b.Order
	case 2:
		return requestBefore(a.X.Req, b.X.Req)
	case 3:
		x, y := a.Conn, b.Conn
		if !x.Time.Equal(y.Time) {
			return x.Time.Before(y.Time)
		}
		return x.Packet < y.Packet
	}
	return false
}

// requestBefore orders requests left unanswered at the end.
func requestBefore(x, y *Message) bool {
	if x.File != y.File {
		return x.Time.Before(y.Time)
	}
	return x.Packet < y.Packet
}

// Delivery hands events to handlers, first learning node identities and
// topic names from them, and afterwards dropping the message's references
// into its frame (which is only valid during the handler calls), keeping
// what handlers asked to keep of a request until its exchange (Keeper).
type Delivery struct {
	nodes *cluster.Nodes
	reqH  []RequestHandler
	exH   []ExchangeHandler
	connH []ConnHandler
	// number connections as they open (deferred analyzers leave
	// Conn.ID zero).
	number bool
	lastID int
	// Broken is called, if set, when a handler panics on an event of a
	// connection; the event's remaining handlers are skipped. Without it
	// the panic propagates.
	Broken func(c *Conn, file int, packet uint64, p any)
	// Opened counts connections opened (ConnOpened events delivered).
	Opened int
	// keep is what handlers asked to keep of requests (Keeper).
	keep keeping
	// lag is the lag of consumers and followers, for the handlers that
	// follow it (LagUser); nil if none does.
	lag *LagTable
}

// NewDelivery returns a Delivery to handlers, for events sunk by
// deferred analyzers: it numbers connections in the order their opening
// is delivered and keeps one table of node identities for all of them.
func NewDelivery(handlers ...Handler) *Delivery {
	d := newDelivery(handlers)
	d.number = true
	return d
}

func newDelivery(handlers []Handler) *Delivery {
	d := &Delivery{nodes: cluster.NewNodes()}
	for _, h := range handlers {
		if r, ok := h.(RequestHandler); ok {
			d.reqH = append(d.reqH, r)
		}
		if x, ok := h.(ExchangeHandler); ok {
			d.exH = append(d.exH, x)
		}
		if c, ok := h.(ConnHandler); ok {
			d.connH = append(d.connH, c)
		}
		if k, ok := h.(Keeper); ok {
			d.keep.add(k.Keep())
		}
	}
	lag := new(LagTable)
	for _, h := range handlers {
		if u, ok := h.(LagUser); ok && u.UseLag(lag) {
			d.lag = lag
		}
	}
	return d
}

// Nodes returns the node identities learned from the events delivered.
func (d *Delivery) Nodes() *cluster.Nodes { return d.nodes }

// Deliver hands one event to the handlers.
func (d *Delivery) Deliver(ev *Event) {
	switch {
	case ev.Req != nil:
		m := ev.Req
		if d.Broken != nil {
			defer d.recover(m.conn, m.File, m.Packet)
		}
		d.nodes.LearnRequest(m.Conn.Client.Addr().Unmap(), m.Conn.Server, m.Client.ID, m.Fetcher, m.Req)
		d.nameTopics(m)
		if d.keep.on() {
			d.keep.request(m)
		}
		if d.lag != nil {
			d.lag.Request(m)
		}
		for _, h := range d.reqH {
			h.OnRequest(m)
		}
		release(m, m.Req)
	case ev.X != nil:
		x := ev.X
		m := x.Resp
		if d.Broken != nil {
			r := x.Req
			if r == nil {
				r = m
			}
			defer d.recover(x.Conn, r.File, r.Packet)
		}
		if m != nil {
			if m.Resp != nil {
				d.nodes.LearnResponse(m.Resp)
			}
			d.nameTopics(m)
		}
		q := x.Req
		if q != nil && q.kept != nil && len(q.kept.frame) > 0 {
			q.Frame = q.kept.frame
		}
		if d.lag != nil {
			d.lag.Fetch(q, m)
		}
		for _, h := range d.exH {
			h.OnExchange(x)
		}
		if d.lag != nil {
			d.lag.out = d.lag.out[:0]
		}
		if m != nil {
			release(m, m.Resp)
		}
		if q != nil && q.kept != nil {
			d.keep.release(q)
		}
		recycle(x)
	case ev.Conn != nil:
		e := ev.Conn
		if e.Kind == ConnOpened && e.Conn != nil {
			d.Opened++
			if d.number {
				d.lastID++
				e.Conn.ID = d.lastID
				e.Conn.nodes = d.nodes
			}
		}
		if d.Broken != nil && e.Conn != nil {
			defer d.recover(e.Conn, e.File, e.Packet)
		}
		for _, h := range d.connH {
			h.OnConnEvent(e)
		}
	}
}

// Connection returns the connection the event is about (nil for
// connection attempts that never carried data): for the pipeline, which
// abandons a connection whose handler panicked; handlers see only its
// identity.
func (ev *Event) Connection() *Conn {
	switch {
	case ev.Req != nil:
		return ev.Req.conn
	case ev.X != nil:
		return ev.X.Conn
	case ev.Conn != nil:
		return ev.Conn.Conn
	}
	return nil
}

func (d *Delivery) recover(c *Conn, file int, packet uint64) {
	if p := recover(); p != nil {
		d.Broken(c, file, packet, p)
	}
}

// nameTopics names the batches of versions that carry topic ids by what
// Metadata said so far.
func (d *Delivery) nameTopics(m *Message) {
	var (
		id     [16]byte // the last id looked up, and its name
		name   string
		looked bool
	)
	for i := range m.Batches {
		b := &m.Batches[i]
		if b.Topic == "" {
			if !looked || b.TopicID != id {
				id, looked = b.TopicID, true
				name, _ = d.nodes.TopicName(id)
			}
			b.Topic = name
		}
	}
}

// release drops the message's references into its frame so that it can
// be kept (a request waiting for its response) without pinning the frame.
func release(m *Message, body any) {
	m.Frame = nil
	if m.pre != nil {
		m.pre.recycle()
		m.pre = nil
	}
	if m.owned != nil {
		select {
		case m.spare <- m.owned:
		default:
		}
		m.owned = nil
	}
	if body != nil && !m.shared {
		decodeRelease(body)
	}
	for i := range m.Batches {
		m.Batches[i].Raw = nil
	}
}
