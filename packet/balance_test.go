package packet

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// sharded is what a Sharder did with a capture: the shard of every packet,
// datagram and loss by connection, and the bytes each shard got.
type sharded struct {
	bytes  []int64
	shards map[Key][]int // in packet order
	times  map[Key][]time.Time
	losses int
}

// shardCapture routes the packets of script through a Sharder over n
// shards, made with cfg and then changed by tune.
func shardCapture(t *testing.T, n int, cfg Bounds, tune func(*Sharder), script func(w *gen.Writer)) (*Sharder, *sharded) {
	t.Helper()
	f := scriptFile(t, script)
	s := NewSharder(n, cfg)
	if tune != nil {
		tune(s)
	}
	r := &sharded{bytes: make([]int64, n), shards: map[Key][]int{}, times: map[Key][]time.Time{}}
	var h Headers
	h.Init()
	note := func(shard int, src, dst netip.AddrPort, at time.Time) {
		k, _ := MakeKey(src, dst)
		r.shards[k] = append(r.shards[k], shard)
		r.times[k] = append(r.times[k], at)
	}
	emit := func(shard int, w *Work) {
		switch w.Kind {
		case WorkLoss:
			r.losses++
			if w.Loss.TCP {
				note(shard, w.Loss.Src, w.Loss.Dst, time.Time{})
			}
		default:
			if kind, src, dst, _ := h.Parse(w.Packet); kind == TCP {
				r.bytes[shard] += int64(len(w.Packet.Data))
				note(shard, src, dst, w.Packet.Time)
			}
		}
	}
	var p capture.Packet
	for f.Next(&p) == nil {
		s.Route(&p, emit)
	}
	s.End(emit)
	return s, r
}

// oneShard fails unless every packet of connection k went to one shard,
// and returns it.
func (r *sharded) oneShard(t *testing.T, what string, k Key) int {
	t.Helper()
	got := r.shards[k]
	if len(got) == 0 {
		t.Fatalf("%s: no packets", what)
	}
	for i, w := range got {
		if w != got[0] {
			t.Fatalf("%s split: packet %d (%v) on shard %d, the first on %d", what, i, r.times[k][i], w, got[0])
		}
	}
	return got[0]
}

// hashedOn returns n client ports from 40000 up whose connections to
// server the 4-tuple's hash puts on shard 0 of 2.
func hashedOn(client netip.Addr, server netip.AddrPort, n int) []netip.AddrPort {
	var out []netip.AddrPort
	for port := uint16(40000); len(out) < n; port++ {
		c := netip.AddrPortFrom(client, port)
		if k, _ := MakeKey(c, server); shardHash(k, 2) == 0 {
			out = append(out, c)
		}
	}
	return out
}

// TestSharderBalancesBusyConnections: six busy connections whose 4-tuples
// all hash onto one of two shards, opening as a client's do (three
// producers at once after a few light connections, three consumers a
// moment later), each carry the same bytes: the Sharder puts three on each
// shard, every connection whole on one, where the hash put all six on
// one and left the other shard idle.
func TestSharderBalancesBusyConnections(t *testing.T) {
	server := netip.MustParseAddrPort("10.0.0.2:9092")
	clients := hashedOn(netip.MustParseAddr("10.0.0.1"), server, 10)
	busy, light := clients[:6], clients[6:]
	payload := bytes.Repeat([]byte{7}, 16<<10)
	_, r := shardCapture(t, 2, defaultBounds(), nil, func(w *gen.Writer) {
		var conns []*gen.Conn
		at := bt0
		for _, c := range light {
			lc := w.Conn(c, server, at, gen.ConnOptions{})
			lc.Send(gen.ClientToServer, at.Add(time.Millisecond), []byte("metadata"))
			lc.Send(gen.ServerToClient, at.Add(2*time.Millisecond), bytes.Repeat([]byte{1}, 900))
			at = at.Add(3 * time.Millisecond)
		}
		open := func(cs []netip.AddrPort) {
			for _, c := range cs {
				conns = append(conns, w.Conn(c, server, at, gen.ConnOptions{}))
				at = at.Add(gen.Step * 4)
			}
		}
		open(busy[:3])
		for range 20 {
			at = at.Add(10 * time.Millisecond)
			for _, c := range conns {
				c.Send(gen.ClientToServer, at, payload)
			}
		}
		open(busy[3:])
		for range 200 {
			at = at.Add(10 * time.Millisecond)
			for i, c := range conns {
				if i >= 3 {
					c.Send(gen.ServerToClient, at, payload)
				} else {
					c.Send(gen.ClientToServer, at, payload)
				}
			}
		}
	})
	perShard := make([]int, 2)
	for i, c := range busy {
		k, _ := MakeKey(c, server)
		perShard[r.oneShard(t, "busy connection "+c.String(), k)]++
		if i < 3 && shardHash(k, 2) != 0 {
			t.Fatalf("%s does not hash onto shard 0", c)
		}
	}
	share := float64(r.bytes[0]) / float64(r.bytes[0]+r.bytes[1])
	if perShard[0] != 3 || perShard[1] != 3 || share < 0.45 || share > 0.55 {
		t.Errorf("busy connections per shard %v, shard 0 has %.2f of the bytes; want 3 and 3, about half", perShard, share)
	}
}

// TestSharderKeepsConnectionsWhole: every packet of a connection goes to
// one shard, and so do the later connections on its 4-tuple while an
// analyzer may hold anything of the earlier (the reuse that life.go
// supersedes), the datagrams reassembled from its fragments and the
// fragments lost, as the shards' analyzers need for the report of one.
func TestSharderKeepsConnectionsWhole(t *testing.T) {
	server := netip.MustParseAddrPort("10.0.0.2:9092")
	cs := hashedOn(netip.MustParseAddr("10.0.0.1"), server, 4)
	_, r := shardCapture(t, 2, defaultBounds(), nil, func(w *gen.Writer) {
		// Two connections make the loads differ, so that a choice made
		// again would go elsewhere.
		a := w.Conn(cs[0], server, bt0, gen.ConnOptions{})
		a.Send(gen.ClientToServer, bt0.Add(time.Millisecond), make([]byte, 5000))
		b := w.Conn(cs[1], server, bt0.Add(2*time.Millisecond), gen.ConnOptions{})
		b.Send(gen.ClientToServer, bt0.Add(3*time.Millisecond), make([]byte, 100))
		// a: RST, then at once a new connection on its 4-tuple.
		a.Reset(gen.ClientToServer, bt0.Add(4*time.Millisecond))
		a = w.Conn(cs[0], server, bt0.Add(5*time.Millisecond), gen.ConnOptions{ISN: [2]uint32{7000, 9000}})
		a.Send(gen.ClientToServer, bt0.Add(6*time.Millisecond), make([]byte, 300))
		a.Close(bt0.Add(7 * time.Millisecond))
		// c: fragmented, interleaved, one datagram missing a fragment.
		c := w.Conn(cs[2], server, bt0.Add(8*time.Millisecond), gen.ConnOptions{FragmentSize: 512, InterleaveFragments: true,
			FragmentFaults: map[int]gen.FragmentFault{1: gen.FragMissing}})
		for i := range 4 {
			c.Send(gen.ClientToServer, bt0.Add(time.Duration(9+i)*time.Millisecond), make([]byte, 3000))
		}
		b.Send(gen.ServerToClient, bt0.Add(20*time.Millisecond), make([]byte, 8000))
	})
	for i, c := range cs[:3] {
		k, _ := MakeKey(c, server)
		r.oneShard(t, "connection "+string(rune('a'+i)), k)
	}
	if r.losses == 0 {
		t.Fatal("no fragment loss reported: the capture does not test it")
	}
}

// TestSharderEvictsOnlyEndedConnections: with room for two connections,
// a connection that ended (FIN from both ends) and went quiet for longer
// than two idle timeouts gives its place to a new one; a connection still
// open, or one whose SYN is not answered (even after a RST from the
// client), is never dropped: with only those left, new connections are
// hashed, and stay hashed when places free up later.
func TestSharderEvictsOnlyEndedConnections(t *testing.T) {
	cfg := defaultBounds()
	cfg.IdleTimeout, cfg.ReorderWindow = time.Second, 100*time.Millisecond // quiet for 2.2 s
	server := netip.MustParseAddrPort("10.0.0.2:9092")
	var cs []netip.AddrPort
	for port := uint16(41000); len(cs) < 4; port++ {
		// Clients the hash puts on shard 1, the choice of the first of
		// them on shard 0: a choice made again shows.
		c := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), port)
		if k, _ := MakeKey(c, server); shardHash(k, 2) == 1 {
			cs = append(cs, c)
		}
	}
	pending := netip.MustParseAddrPort("10.0.0.9:5555")
	var hashedBefore int64
	s, r := shardCapture(t, 2, cfg, func(s *Sharder) { s.own.max = 2 }, func(w *gen.Writer) {
		ended := w.Conn(cs[0], server, bt0, gen.ConnOptions{})
		ended.Send(gen.ClientToServer, bt0.Add(time.Millisecond), make([]byte, 4000))
		ended.Close(bt0.Add(2 * time.Millisecond))
		open := w.Conn(cs[1], server, bt0.Add(3*time.Millisecond), gen.ConnOptions{})
		open.Send(gen.ClientToServer, bt0.Add(4*time.Millisecond), make([]byte, 100))
		// 5 s later: ended's place is free.
		t5 := bt0.Add(5 * time.Second)
		later := w.Conn(cs[2], server, t5, gen.ConnOptions{})
		later.Send(gen.ClientToServer, t5.Add(time.Millisecond), make([]byte, 100))
		// open and later are live: the next is hashed.
		hashed := w.Conn(cs[3], server, t5.Add(10*time.Millisecond), gen.ConnOptions{})
		hashed.Send(gen.ClientToServer, t5.Add(11*time.Millisecond), make([]byte, 100))
		open.Close(t5.Add(20 * time.Millisecond))
		later.Close(t5.Add(21 * time.Millisecond))
		// 20 s later both ended long ago; hashed goes on where it was.
		t25 := t5.Add(20 * time.Second)
		hashed.Send(gen.ClientToServer, t25, make([]byte, 100))
		hashed.Close(t25.Add(time.Millisecond))
	})
	hashedBefore = s.HashedPackets()
	for i, c := range cs {
		k, _ := MakeKey(c, server)
		r.oneShard(t, "connection "+c.String(), k)
		if i == 0 && r.shards[k][0] != 0 {
			t.Fatalf("the first connection went to shard %d, not the least loaded", r.shards[k][0])
		}
	}
	k3, _ := MakeKey(cs[3], server)
	if hashedBefore == 0 || r.shards[k3][0] != 1 {
		t.Errorf("%d packets hashed, the fourth connection on shard %d; want it hashed (shard 1)", hashedBefore, r.shards[k3][0])
	}

	// A SYN unanswered, a RST from the client: the attempt is still
	// pending (flows' trackSYN), its entry stays, and its SYN sent again 30 s
	// later goes where the first went, though its place was wanted.
	s, r = shardCapture(t, 2, cfg, func(s *Sharder) { s.own.max = 1 }, func(w *gen.Writer) {
		w.SynUnanswered(pending, server, bt0, 0)
		rst := w.Conn(pending, server, bt0.Add(time.Millisecond), gen.ConnOptions{NoHandshake: true})
		rst.Reset(gen.ClientToServer, bt0.Add(time.Millisecond))
		other := w.Conn(cs[0], server, bt0.Add(10*time.Second), gen.ConnOptions{})
		other.Send(gen.ClientToServer, bt0.Add(10*time.Second+time.Millisecond), make([]byte, 100))
		w.SynUnanswered(pending, server, bt0.Add(30*time.Second), 0)
	})
	kp, _ := MakeKey(pending, server)
	r.oneShard(t, "the pending attempt", kp)
	if s.HashedPackets() == 0 {
		t.Error("no packet hashed: the pending attempt's entry was dropped")
	}
}

// TestSharderHotSlotsAreTheTables: the Sharder finds a packet's connection
// in its hot slots before its map; every slot it finds there must be the
// map's entry for the key. 300 connections on 4-tuples reused twice, in a
// table of 64 entries that drops ended ones: after every packet each hot
// slot names the entry the map has for its key, and every connection
// still goes whole to one shard.
func TestSharderHotSlotsAreTheTables(t *testing.T) {
	const tuples = 300
	cfg := defaultBounds()
	cfg.IdleTimeout, cfg.ReorderWindow = 50*time.Millisecond, 10*time.Millisecond
	f := scriptFile(t, func(w *gen.Writer) {
		at := bt0
		next := func() time.Time { at = at.Add(time.Millisecond); return at }
		for round := range 3 {
			for i := range tuples {
				isn := uint32(1000 + round*100000 + i)
				c := w.Conn(bClient(i), bBroker, next(), gen.ConnOptions{ISN: [2]uint32{isn, isn * 3}})
				c.Send(gen.ClientToServer, next(), make([]byte, 100+i))
				c.Close(next())
				at = at.Add(200 * time.Millisecond) // older than the horizon: its entry may go
			}
		}
		// Connections open at once whose keys share one hot slot.
		var cs []*gen.Conn
		for _, c := range sameHotSlot(8) {
			cs = append(cs, w.Conn(c, bBroker, next(), gen.ConnOptions{}))
		}
		for range 3 {
			for _, c := range cs {
				c.Send(gen.ClientToServer, next(), make([]byte, 300))
			}
		}
	})
	s := NewSharder(2, cfg)
	s.own.max = 64
	var h Headers
	h.Init()
	shards := map[Key]int{}
	first := map[Key]time.Time{}
	found := 0
	emit := func(shard int, w *Work) {
		kind, src, dst, _ := h.Parse(w.Packet)
		if kind != TCP {
			return
		}
		k, _ := MakeKey(src, dst)
		if i, ok := s.own.idx[k]; !ok || int(s.own.slots[i].shard) != shard {
			t.Fatalf("packet of %v on shard %d; the table has it at %d (%v)", src, shard, i, ok)
		}
		if sh, ok := shards[k]; ok && sh != shard && w.Packet.Time.Sub(first[k]) < 100*time.Millisecond {
			t.Fatalf("connection %v split over shards %d and %d", src, sh, shard)
		}
		if _, ok := shards[k]; !ok || w.Packet.Time.Sub(first[k]) >= 100*time.Millisecond {
			shards[k], first[k] = shard, w.Packet.Time
		}
	}
	var p capture.Packet
	n := 0
	for f.Next(&p) == nil {
		s.Route(&p, emit)
		n++
		o := s.own
		for place, hs := range o.hot {
			if hs == 0 {
				continue
			}
			found++
			k := o.slots[hs-1].key
			if k.Slot() != place {
				t.Fatalf("packet %d: hot slot %d holds entry %d, whose key belongs at %d", n, place, hs-1, k.Slot())
			}
			if i, ok := o.idx[k]; !ok || i != hs-1 {
				t.Fatalf("packet %d: hot slot %d holds entry %d of %v; the map has %d (%v)", n, place, hs-1, k, i, ok)
			}
		}
	}
	if s.HashedPackets() != 0 {
		t.Errorf("%d packets hashed: entries of ended connections were not reused", s.HashedPackets())
	}
	if found == 0 || len(s.own.slots) > 64 {
		t.Errorf("%d hot slots seen, %d entries: the test did not exercise the table", found, len(s.own.slots))
	}
}

// sameHotSlot returns n clients whose connections to bBroker have keys of
// one hot slot.
func sameHotSlot(n int) []netip.AddrPort {
	var out []netip.AddrPort
	want := -1
	for port := uint16(20000); len(out) < n; port++ {
		c := netip.AddrPortFrom(netip.MustParseAddr("10.0.7.1"), port)
		k, _ := MakeKey(c, bBroker)
		if want < 0 {
			want = k.Slot()
		}
		if k.Slot() == want {
			out = append(out, c)
		}
	}
	return out
}
