package packet

import (
	"time"

	"github.com/google/gopacket/layers"
)

// The Sharder gives a TCP connection its shard at the connection's first
// packet, the one then least loaded, and keeps it for the connection's
// life: both directions, every later connection on its 4-tuple, the IP
// datagrams reassembled for it and their losses. Hashing the 4-tuple
// instead splits few busy connections unevenly (six on two shards went
// 2:4), and a round of the sharded engine is as slow as its slowest shard.
//
// A shard's load is what was routed to it recently: the bytes of its
// packets plus pktCost a packet (the per-packet work: reassembly, headers),
// decayed by 1/8 every loadEpoch of capture time (a half-life of about half
// a second). A new connection's own volume is unknown, and the busy
// connections of a client often open together (producers to every broker,
// then consumers): so a connection opened less than youngFor ago counts as
// at least as busy as the busiest connection now (its load, if less):
// connections opening together alternate, whatever the loads, and those
// opened after the busy ones showed their load go where it is lowest.
// Everything depends only on the packets, in order: the same capture is
// sharded alike every run.
//
// With TLS key logs, connections are sharded by their pair of hosts
// instead (hostHash), so that a resumed TLS 1.2 session runs on the
// worker of the session it resumes.
//
// The table is bounded (maxOwned connections). An entry is dropped only
// when nothing an analyzer holds can tie a later packet of its 4-tuple to
// the connection: it ended (a RST, or a FIN from each end), no connection
// attempt is pending on it (a SYN not answered: flows' trackSYN), and no packet
// came for two idle timeouts and two reorder windows (by then the idle
// flush has dropped its stream; an ended connection is not kept for
// resumption). A later packet of that 4-tuple can only start a new
// connection. When the table is full of connections that may still be
// live, new connections are hashed (shardHash) from then on, and never
// entered: a connection hashed once stays hashed (HashedPackets counts
// the packets so routed).
const (
	maxOwned  = 1 << 16
	pktCost   = 1024
	loadEpoch = 100 * time.Millisecond
	youngFor  = 20 * time.Millisecond
	// maxYoung bounds the young connections remembered per shard (a burst
	// of more counts the latest).
	maxYoung = 64
	// evictTries bounds the ended connections looked at for one new one.
	evictTries = 8
)

// owned is a connection's entry: its shard and what the reader saw of its
// end.
type owned struct {
	key  Key
	last int64 // capture time of its last packet, Unix ns
	// load is the connection's own, decayed to epoch ep.
	load  uint64
	ep    int64
	shard uint16
	state uint8
	// gen tells the slot's connections apart in the ended queue.
	gen uint32
}

// owned.state bits: a SYN not answered yet (and whether its receiver,
// the server, is the key's b end), a FIN from the a and the b end, a RST,
// and whether the slot is in the ended queue.
const (
	ownSYN uint8 = 1 << iota
	ownSYNToB
	ownFINA
	ownFINB
	ownRST
	ownQueued
)

func (o *owned) ended() bool {
	return o.state&ownRST != 0 || o.state&(ownFINA|ownFINB) == ownFINA|ownFINB
}

// endedRef is an entry of the ended queue: a slot and its generation then.
type endedRef struct {
	slot int32
	gen  uint32
}

// owners is the Sharder's table of connections.
type owners struct {
	n   int
	max int
	// byHosts shards by the pair of hosts, not by load (TLS key logs:
	// see hostHash).
	byHosts bool
	idx     map[Key]int32
	// hot holds some connections' slots (plus one; 0 is none), each at
	// its key's place (Key.Slot), as flows.Analyzer.hot holds streams:
	// looking a packet's connection up in idx (hashing and comparing a
	// 36-byte key) was most of the reader's sharding on the storm
	// capture, work that one worker does not do at all.
	hot   []int32
	slots []owned
	free  []int32
	ended []endedRef
	head  int
	// horizon is the quiet after which an ended connection's entry may
	// go (0: never).
	horizon int64
	// frozen: the table was once full of live connections; new ones are
	// hashed from then on.
	frozen bool
	hashed int64
	// load is each shard's decayed load; peak the largest of one
	// connection (decayed alike); epoch the loadEpoch they are at; young
	// each shard's connections opened less than youngFor ago.
	load    []uint64
	peak    uint64
	epoch   int64
	started bool
	young   [][]youngConn
}

// youngConn is a connection just opened: its slot, generation and time.
type youngConn struct {
	slot int32
	gen  uint32
	born int64
}

func newOwners(n int, b *Bounds) *owners {
	o := &owners{n: n, max: maxOwned, idx: make(map[Key]int32), hot: make([]int32, HotSlots), load: make([]uint64, n), young: make([][]youngConn, n),
		byHosts: b.ByHosts}
	if b.IdleTimeout > 0 {
		o.horizon = int64(2*b.IdleTimeout + 2*max(0, b.ReorderWindow))
	}
	return o
}

// tick decays the loads to capture time now.
func (o *owners) tick(now int64) {
	e := now / int64(loadEpoch)
	if !o.started {
		o.epoch, o.started = e, true
		return
	}
	if e <= o.epoch {
		return
	}
	k := e - o.epoch
	o.epoch = e
	for w := range o.load {
		o.load[w] = decay(o.load[w], k)
	}
	o.peak = decay(o.peak, k)
}

// decay returns load after k epochs.
func decay(load uint64, k int64) uint64 {
	for range min(k, 400) { // (7/8)^400 of any load is 0
		if load < 8 {
			return 0
		}
		load -= load >> 3
	}
	return load
}

// add counts n on the connection in slot i, of shard w.
func (o *owners) add(i int32, w int, n uint64) {
	e := &o.slots[i]
	e.load = decay(e.load, o.epoch-e.ep) + n
	e.ep = o.epoch
	o.load[w] += n
	o.peak = max(o.peak, e.load)
}

// choose returns the shard for a connection opening at now: the least
// loaded, its young connections counted as at least as busy as the
// busiest (peak); the first of equals.
func (o *owners) choose(now int64) int {
	best, bestLoad := 0, uint64(0)
	for w := range o.load {
		l := o.load[w]
		q := o.young[w]
		for len(q) > 0 && now-q[0].born >= int64(youngFor) {
			q = q[1:]
		}
		o.young[w] = q
		for _, y := range q {
			e := &o.slots[y.slot]
			if e.gen != y.gen {
				continue
			}
			if own := decay(e.load, o.epoch-e.ep); own < o.peak {
				l += o.peak - own
			}
		}
		if w == 0 || l < bestLoad {
			best, bestLoad = w, l
		}
	}
	return best
}

// lookup returns the shard of the connection k, entering it (at its first
// packet) if it is not known; slot is its entry, -1 if it has none
// (hashed).
func (o *owners) lookup(k Key, now int64) (shard int, slot int32) {
	h := &o.hot[k.Slot()]
	if i := *h - 1; i >= 0 && o.slots[i].key == k {
		return int(o.slots[i].shard), i
	}
	if i, ok := o.idx[k]; ok {
		*h = i + 1
		return int(o.slots[i].shard), i
	}
	if o.frozen {
		o.hashed++
		return o.hash(k), -1
	}
	i := o.slot(now)
	if i < 0 {
		o.frozen = true
		o.hashed++
		return o.hash(k), -1
	}
	best := o.choose(now)
	if o.byHosts {
		best = hostHash(k, o.n)
	}
	e := &o.slots[i]
	*e = owned{key: k, shard: uint16(best), gen: e.gen + 1, last: now, ep: o.epoch}
	o.idx[k] = i
	*h = i + 1
	q := o.young[best]
	if len(q) >= maxYoung {
		q = q[1:]
	}
	o.young[best] = append(q, youngConn{slot: i, gen: e.gen, born: now})
	return best, i
}

// slot returns a free entry, making one of an ended connection's if the
// table is full; -1 if none can go.
func (o *owners) slot(now int64) int32 {
	if n := len(o.free); n > 0 {
		i := o.free[n-1]
		o.free = o.free[:n-1]
		return i
	}
	if len(o.slots) < o.max {
		o.slots = append(o.slots, owned{})
		return int32(len(o.slots) - 1)
	}
	for range evictTries {
		if o.head >= len(o.ended) || o.horizon == 0 {
			return -1
		}
		r := o.ended[o.head]
		o.head++
		if o.head > 1024 && o.head > len(o.ended)/2 {
			o.ended = append(o.ended[:0], o.ended[o.head:]...)
			o.head = 0
		}
		e := &o.slots[r.slot]
		if e.gen != r.gen {
			continue // another connection's now
		}
		if !e.ended() {
			e.state &^= ownQueued // a new connection on it: queued again when it ends
			continue
		}
		if e.state&ownSYN != 0 || now-e.last < o.horizon {
			o.ended = append(o.ended, r) // not yet: looked at again later
			continue
		}
		delete(o.idx, e.key)
		if h := &o.hot[e.key.Slot()]; *h == r.slot+1 {
			*h = 0
		}
		return r.slot
	}
	return -1
}

// saw notes what TCP segment t, from the a end of the connection in slot i
// unless fromB, tells of the connection's end (see flows' trackSYN for SYNs).
func (o *owners) saw(i int32, t *layers.TCP, fromB bool) {
	e := &o.slots[i]
	switch {
	case t.SYN && !t.ACK:
		if e.state&ownSYN == 0 {
			e.state |= ownSYN
			if !fromB {
				e.state |= ownSYNToB
			} else {
				e.state &^= ownSYNToB
			}
		}
		// A new connection may start on the 4-tuple: not ended.
		e.state &^= ownFINA | ownFINB | ownRST
	case t.SYN && t.ACK:
		e.state &^= ownSYN
	case t.RST:
		if e.state&ownSYN != 0 && fromB == (e.state&ownSYNToB != 0) {
			e.state &^= ownSYN // refused by the server
		}
	case len(t.Payload) > 0:
		e.state &^= ownSYN
	}
	if t.RST {
		e.state |= ownRST
	}
	if t.FIN {
		if fromB {
			e.state |= ownFINB
		} else {
			e.state |= ownFINA
		}
	}
	if e.ended() && e.state&ownQueued == 0 && o.horizon > 0 {
		e.state |= ownQueued
		o.ended = append(o.ended, endedRef{slot: i, gen: e.gen})
	}
}

// hash is the shard of a connection not in the table.
func (o *owners) hash(k Key) int {
	if o.byHosts {
		return hostHash(k, o.n)
	}
	return shardHash(k, o.n)
}

// hostHash shards by the pair of hosts, whatever the ports: with TLS key
// logs, every connection between a client and a broker goes to one
// shard, so that a TLS 1.2 session resumed on a later connection (its
// master secret is learned from the connection that made the session,
// clients log no line for a resumed one) finds it whichever connection
// ran first. Spread by load, the two ran on two workers at once and the
// resumed one was decrypted or not by their race: 3 to 17 requests on
// one capture from run to run with two workers.
func hostHash(k Key, n int) int { return int(hostsFNV(k) % uint64(n)) }

// shardHash is the shard of connection k by its 4-tuple alone.
func shardHash(k Key, n int) int {
	h := hostsFNV(k)
	h = (h ^ uint64(k.pa)) * 1099511628211
	h = (h ^ uint64(k.pb)) * 1099511628211
	return int(h % uint64(n))
}

// hostsFNV is the FNV-1a hash of k's hosts: deterministic, so that runs
// shard alike.
func hostsFNV(k Key) uint64 {
	h := uint64(14695981039346656037)
	for i := range k.a {
		h = (h ^ uint64(k.a[i])) * 1099511628211
		h = (h ^ uint64(k.b[i])) * 1099511628211
	}
	return h
}
