package flows

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/packet"
)

// synState tracks a connection attempt until it is answered: a SYN-ACK
// makes it an ordinary connection, a RST from the server a refused one.
type synState struct {
	client, server netip.AddrPort
	file           int
	packet         uint64
	time           time.Time
	attempts       int
	seq            uint64
}

// synQueue remembers attempts in arrival order so the oldest can be evicted
// in constant time; entries whose attempt has since ended are skipped.
type synQueue struct {
	keys []packet.Key
	seqs []uint64
	head int
	next uint64
}

// maxSYNs bounds the attempts tracked at once; the oldest are reported as
// unanswered when it is reached (connection churn).
const maxSYNs = 65536

func (a *Analyzer) trackSYN(p *capture.Packet, key packet.Key, flipped bool, src, dst netip.AddrPort) {
	t := a.tcp
	switch {
	case t.SYN && !t.ACK:
		if s := a.syns[key]; s != nil {
			s.attempts++
			return
		}
		if len(a.syns) >= a.maxSYNs {
			a.evictSYN()
		}
		q := &a.synq
		q.next++
		a.syns[key] = &synState{client: src, server: dst, file: p.File, packet: p.N, time: p.Time, attempts: 1, seq: q.next}
		if q.head > 4096 && q.head > len(q.keys)/2 {
			n := copy(q.keys, q.keys[q.head:])
			copy(q.seqs, q.seqs[q.head:])
			q.keys, q.seqs, q.head = q.keys[:n], q.seqs[:n], 0
		}
		if n := len(q.keys) - q.head; n >= 4096 && n > 2*len(a.syns) {
			// Most entries are of attempts answered since (a SYN-ACK
			// ends one without passing the head): without this the
			// queue grew by an entry per connection for as long as the
			// capture ran (TestSYNQueueBounded).
			a.compactSYNs()
		}
		q.keys = append(q.keys, key)
		q.seqs = append(q.seqs, q.next)
	case t.SYN && t.ACK:
		delete(a.syns, key)
		if a.learn {
			a.listeners.Learn(src, a.seq)
		}
	case t.RST:
		s := a.syns[key]
		if s == nil || src != s.server {
			return
		}
		delete(a.syns, key)
		a.emitConn(&ConnEvent{Kind: ConnRefused, Client: s.client, Server: s.server, File: p.File, Packet: p.N, Time: p.Time, Attempts: s.attempts})
	case len(t.Payload) > 0:
		// Data without a SYN-ACK seen: the answer was not captured.
		delete(a.syns, key)
	}
}

// compactSYNs drops from the queue the entries of attempts that ended,
// keeping the others in order.
func (a *Analyzer) compactSYNs() {
	q := &a.synq
	n := 0
	for i := q.head; i < len(q.keys); i++ {
		if s := a.syns[q.keys[i]]; s != nil && s.seq == q.seqs[i] {
			q.keys[n], q.seqs[n] = q.keys[i], q.seqs[i]
			n++
		}
	}
	q.keys, q.seqs, q.head = q.keys[:n], q.seqs[:n], 0
}

func (a *Analyzer) evictSYN() {
	q := &a.synq
	for q.head < len(q.keys) {
		k, seq := q.keys[q.head], q.seqs[q.head]
		q.head++
		if s := a.syns[k]; s != nil && s.seq == seq {
			delete(a.syns, k)
			a.emitConn(s.unanswered())
			return
		}
	}
}

// unanswered is the event of an attempt never answered.
func (s *synState) unanswered() *ConnEvent {
	return &ConnEvent{Kind: ConnUnanswered, Client: s.client, Server: s.server, File: s.file, Packet: s.packet, Time: s.time, Attempts: s.attempts}
}

// closeSYNs reports attempts never answered, in packet order.
func (a *Analyzer) closeSYNs() {
	left := slices.SortedFunc(maps.Values(a.syns), func(x, y *synState) int {
		return cmp.Or(x.time.Compare(y.time), cmp.Compare(x.packet, y.packet))
	})
	for _, s := range left {
		a.emitConn(s.unanswered())
	}
	clear(a.syns)
	a.synq = synQueue{}
}
