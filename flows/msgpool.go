package flows

import (
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

// Every frame becomes a Message, and every response an Exchange: on a
// retry storm the two were most of what flows allocated (a request with
// room for its batches is 640 bytes, a response with its exchange 384,
// both full of pointers), and allocating and collecting them about a
// fifth of one worker's CPU. So the messages an analyzer makes for
// requests and for responses paired with them come back to it once their
// exchange has been delivered (Delivery.Deliver, recycle), its last
// delivery: a request is delivered alone and again in its exchange, and
// flows keeps no reference to either message after handing the exchange
// over. Handlers see a message only during the call that delivers it
// (Message). The messages come back through channels, since a Delivery
// may run on another goroutine (Config.Deferred), and are cleared when
// taken, on the analyzer's goroutine. Other messages (requests cut by a
// hole, responses without their request, those a test or another package
// builds) have no home and are left to the collector, as are those whose
// delivery a handler's panic cut short.

// msgSpares bounds the messages of each kind given back and not yet
// reused, per analyzer: about the exchanges of the rounds a sharded run
// holds in flight.
const msgSpares = 512

// msgRoom bounds the batches' room a response keeps for the next one
// (a Fetch response's).
const msgRoom = 256

// msgPool is an analyzer's messages given back, and their bodies of the
// keys kmsg decodes into again with profit (decode.Reusable: Produce's,
// a bulk producer's every exchange, and Fetch's, a consumer's), by key
// (bodyKind), not those of the memo (Message.shared), which other
// messages share.
type msgPool struct {
	reqs       chan *reqBox
	resps      chan *respExchange
	reqBodies  [2]chan kmsg.Request
	respBodies [2]chan kmsg.Response
}

// bodyKind is the index in msgPool's bodies of a key of decode.Reusable.
func bodyKind(key int16) int {
	if key == int16(kmsg.Fetch) {
		return 1
	}
	return 0
}

func newMsgPool() msgPool {
	p := msgPool{
		reqs: make(chan *reqBox, msgSpares), resps: make(chan *respExchange, msgSpares),
	}
	for i := range p.reqBodies {
		p.reqBodies[i], p.respBodies[i] = make(chan kmsg.Request, msgSpares), make(chan kmsg.Response, msgSpares)
	}
	return p
}

// requestBody returns a body of key given back, to decode into, or nil.
func (p *msgPool) requestBody(key int16) kmsg.Request { return takeBody(&p.reqBodies, key) }

// responseBody is requestBody for responses.
func (p *msgPool) responseBody(key int16) kmsg.Response { return takeBody(&p.respBodies, key) }

// takeBody takes a body of key from its kind's spares, if any.
func takeBody[B any](spares *[2]chan B, key int16) B {
	var none B
	if !decode.Reusable(key) {
		return none
	}
	select {
	case b := <-spares[bodyKind(key)]:
		return b
	default:
		return none
	}
}

// reqBox is a request and room for its batches, allocated together: a
// Produce request carries a batch per partition, most often one or two.
// The message is its first field (recycle finds the box from it). A
// request of more batches (a producer sending to several partitions of a
// broker at once: four in bench's large shape, every request) had its
// room allocated for it and dropped with it; more keeps that room, up to
// msgRoom, for the box's next request.
type reqBox struct {
	m    Message
	b    [2]BatchRef
	more []BatchRef
}

// respExchange is a response and its exchange, allocated together; the
// message is its first field. room is the room for batches the last
// response that had some left (up to msgRoom), kept through the responses
// without batches: a producer's and a consumer's responses share the
// spares, and a Produce response used to drop the room a Fetch response
// had, for the next Fetch to allocate again.
type respExchange struct {
	m    Message
	x    Exchange
	room []BatchRef
}

// newRequest returns a request message, cleared, from the pool or new;
// with room for its batches in the same allocation if it carries one or
// two (n).
func (p *msgPool) newRequest(n int) *Message {
	var box *reqBox
	select {
	case box = <-p.reqs:
		clear(box.more) // the only part of its room the last one used
		box.m, box.b, box.more = Message{}, [2]BatchRef{}, box.more[:0]
	default:
		box = new(reqBox)
	}
	m := &box.m
	m.home = p
	switch {
	case n == 1 || n == 2:
		m.Batches = box.b[:0]
	case n > 2 && cap(box.more) >= n:
		m.Batches = box.more
	}
	return m
}

// newResponse returns a response and its exchange, cleared, from the pool
// or new, and the room for batches the response last given back had.
func (p *msgPool) newResponse() (ax *respExchange, room []BatchRef) {
	select {
	case ax = <-p.resps:
		room = ax.room
		clear(room) // the only part of its room the last one used
		*ax = respExchange{room: room[:0]}
	default:
		ax = new(respExchange)
	}
	ax.m.home = p
	return ax, room[:0]
}

// recycle gives the messages of x, delivered, back to the analyzers that
// made them (msgPool).
func recycle(x *Exchange) {
	if q := x.Req; q != nil && q.home != nil {
		home := q.home
		q.home = nil // given back once
		if q.Req != nil && q.bodyReusable() {
			give(home.reqBodies[bodyKind(q.Key)], q.Req)
		}
		if msgPoison != nil {
			msgPoison(q)
		} else {
			box := (*reqBox)(unsafe.Pointer(q))
			if c := cap(q.Batches); c > len(box.b) && c <= msgRoom {
				box.more = q.Batches // not the box's own two (cap 2)
			}
			give(home.reqs, box)
		}
	}
	if m := x.Resp; m != nil && m.home != nil {
		home := m.home
		m.home = nil
		if m.Resp != nil && m.bodyReusable() {
			give(home.respBodies[bodyKind(m.Key)], m.Resp)
		}
		if msgPoison != nil {
			msgPoison(m)
		} else {
			ax := (*respExchange)(unsafe.Pointer(m))
			if c := cap(m.Batches); c > msgRoom {
				m.Batches = nil
			} else if c > 0 {
				ax.room = m.Batches
			}
			give(home.resps, ax)
		}
	}
}

// bodyReusable reports whether m's body may be decoded into again once
// m is given back: not one the memo shares, of a key decode reuses, and
// not while a test spoils what is given back.
func (m *Message) bodyReusable() bool {
	return !m.shared && decode.Reusable(m.Key) && msgPoison == nil
}

// give puts v among spares, unless they are full (then v is left to the
// collector).
func give[T any](spares chan T, v T) {
	select {
	case spares <- v:
	default:
	}
}

// msgPoison, set by tests only, takes the messages given back instead of
// the pool: a test spoils them, so that any use after they were given
// back shows.
var msgPoison func(m *Message)
