package flows

import (
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/packet"
)

// fragScript writes one connection whose client sends segments of
// 1000 bytes, each in three IP fragments (400, 400, 220 bytes), written
// interleaved (every first fragment, then every second, ...) so that n
// datagrams are in progress at once, then answers each segment later.
func fragScript(n int, opt gen.ConnOptions) func(w *gen.Writer) {
	return func(w *gen.Writer) {
		opt.MSS, opt.FragmentSize, opt.InterleaveFragments = 1000, 400, true
		c := w.Conn(bClient(1), bBroker, bt0, opt)
		c.Send(gen.ClientToServer, bt0.Add(time.Millisecond), bigProduce(1, n*1000))
		c.Response(bt0.Add(2*time.Second), 1, produceResp())
	}
}

// fragBytes is the IP payload the fragments of n segments carry (each a
// 20-byte TCP header and 1000 bytes).
func fragBytes(n int) int64 { return int64(n * 1020) }

// TestDefragBounds: datagrams in progress and the bytes they hold stay
// within their bounds after every packet; what the bounds drop is counted
// (capture-wide and on the connection, whose first fragments were seen),
// every fragment's bytes either reassembled or counted lost; with room
// enough, everything is reassembled and the request decodes.
func TestDefragBounds(t *testing.T) {
	for _, tc := range []struct {
		name        string
		datagrams   int
		bytes       int
		reassembled int64
	}{
		{name: "room for all", datagrams: 4, bytes: 1 << 20, reassembled: 4},
		{name: "two datagrams", datagrams: 2, bytes: 1 << 20},
		{name: "5000 bytes", datagrams: 100, bytes: 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MaxFragDatagrams, cfg.MaxFragBytes = tc.datagrams, tc.bytes
			a, ev := run(t, cfg, fragScript(4, gen.ConnOptions{}), func(a *Analyzer) {
				if n, held := a.frag.Held(); n > tc.datagrams || held > tc.bytes {
					t.Fatalf("%d datagrams holding %d bytes in progress; bounds %d, %d", n, held, tc.datagrams, tc.bytes)
				}
			})
			st := a.Stats()
			if st.Fragments != 12 || st.Reassembled != tc.reassembled {
				t.Errorf("%d fragments, %d reassembled; want 12, %d", st.Fragments, st.Reassembled, tc.reassembled)
			}
			lost := st.FragLost[packet.FragBound] + st.FragLost[packet.FragMissing]
			if (tc.reassembled == 4) != (lost == 0) || tc.reassembled < 4 && st.FragLost[packet.FragBound] == 0 {
				t.Errorf("lost %v", st.FragLost)
			}
			if tc.reassembled == 0 && st.FragLostBytes != fragBytes(4) {
				t.Errorf("%d bytes of fragments counted lost, want all %d", st.FragLostBytes, fragBytes(4))
			}
			c := a.Conns()
			if tc.reassembled == 4 {
				if len(ev.requests) != 1 || ev.requests[0].Err != nil {
					t.Errorf("requests %v", ev.requests)
				}
				return
			}
			if len(c) != 1 {
				// The connection is known from the handshake and the
				// response even when every fragment is lost.
				t.Fatalf("%d connections", len(c))
			}
			// Each segment's first fragment (with the ports) was seen
			// and its datagram lost before another fragment joined it.
			if c[0].FragLost != 4 || c[0].FragLostBytes != 4*400 {
				t.Errorf("connection: %d datagrams, %d bytes lost; want 4 first fragments of 400 bytes", c[0].FragLost, c[0].FragLostBytes)
			}
		})
	}
}

// TestDefragTimeout: a datagram missing a fragment is given up once the
// timeout has passed in capture time, at the next packet, not only at the
// end; the problem names the packet of its first fragment.
func TestDefragTimeout(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FragTimeout = time.Second
	lostAt := uint64(0)
	pkts := 0
	a, _ := run(t, cfg, func(w *gen.Writer) {
		c := w.Conn(bClient(2), bBroker, bt0, gen.ConnOptions{MSS: 1000, FragmentSize: 400, FragmentFaults: map[int]gen.FragmentFault{0: gen.FragMissing}})
		c.Send(gen.ClientToServer, bt0.Add(time.Millisecond), bigProduce(1, 996))
		c.Response(bt0.Add(3*time.Second), 1, produceResp())
	}, func(a *Analyzer) {
		pkts++
		if lostAt == 0 && a.stats.FragLost[packet.FragMissing] > 0 {
			lostAt = uint64(pkts)
		}
	})
	if lostAt == 0 || lostAt > uint64(a.stats.Packets) {
		t.Fatalf("the datagram was given up at the end (packet %d of %d), not at the first packet after the timeout", lostAt, a.stats.Packets)
	}
	c := a.Conns()[0]
	var pr *Problem
	for i := range c.Problems {
		if strings.Contains(c.Problems[i].What, "not reassembled") {
			pr = &c.Problems[i]
		}
	}
	if pr == nil || c.FragLost != 1 {
		t.Fatalf("connection: %d datagrams lost, problems %v", c.FragLost, c.Problems)
	}
	// Packets 1-3 are the handshake; 4 is the first fragment.
	if pr.Packet != 4 {
		t.Errorf("problem at packet %d, want the first fragment's (4)", pr.Packet)
	}
}
