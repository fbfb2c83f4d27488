package flows

import (
	"math"
	"net/netip"
	"sync"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/packet"
)

// Listeners are the addresses and ports seen accepting a connection (the
// sender of a SYN-ACK) in a capture, each with the place of the packet
// where it was first seen. A connection joined mid-way whose one end is
// among them is taken to have that end as its server (ClientByPort).
//
// Analyzers working on shards of one capture, each at its own pace, must
// agree on what was known when: so a question is "was it seen before the
// packet at place seq", and the pipeline's reading goroutine, which sees
// every packet in order ahead of the analyzers, does the learning
// (Observe). An Analyzer without Config.Listeners learns from its own
// packets. Safe for concurrent use.
type Listeners struct {
	mu sync.RWMutex
	m  map[netip.AddrPort]uint64
}

// maxListeners bounds the endpoints remembered; later ones are not learned.
const maxListeners = 1 << 16

// NewListeners returns an empty set.
func NewListeners() *Listeners { return &Listeners{m: make(map[netip.AddrPort]uint64)} }

// Learn records that ap accepted a connection at the packet at place seq.
func (l *Listeners) Learn(ap netip.AddrPort, seq uint64) {
	l.mu.RLock()
	_, known := l.m[ap]
	l.mu.RUnlock()
	if known {
		return
	}
	l.mu.Lock()
	if _, known := l.m[ap]; !known && len(l.m) < maxListeners {
		l.m[ap] = seq
	}
	l.mu.Unlock()
}

// Before reports whether ap was seen accepting a connection at a packet
// before the one at place seq.
func (l *Listeners) Before(ap netip.AddrPort, seq uint64) bool {
	l.mu.RLock()
	at, ok := l.m[ap]
	l.mu.RUnlock()
	return ok && at < seq
}

// Accepted reports whether ap was seen accepting a connection so far; false
// for a nil set.
func (l *Listeners) Accepted(ap netip.AddrPort) bool {
	return l != nil && l.Before(ap, math.MaxUint64)
}

// Observe learns from packet p, at place seq, if it is a SYN-ACK of plain
// IPv4 or IPv6 TCP.
func (l *Listeners) Observe(p *capture.Packet, seq uint64) {
	if server, ok := synAckFrom(p); ok {
		l.Learn(server, seq)
	}
}

// synAckFrom returns the sender of a SYN-ACK, read without decoding the
// packet (packet.QuickTCP).
func synAckFrom(p *capture.Packet) (netip.AddrPort, bool) {
	src, _, flags, ok := packet.QuickTCP(p)
	const syn, ack = 0x02, 0x10
	return src, ok && flags&(syn|ack) == syn|ack
}

// Listeners are the endpoints this analyzer knows to have accepted
// connections (Config.Listeners when set).
func (a *Analyzer) Listeners() *Listeners { return a.listeners }

// listening reports whether ap was seen accepting a connection before the
// packet being processed.
func (a *Analyzer) listening(ap netip.AddrPort) bool {
	return a.listeners.Before(ap, a.seq)
}
