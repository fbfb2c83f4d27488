package flows

import (
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/packet"
)

// TestSYNQueueBounded: the queue of connection attempts (synQueue) holds
// about as many entries as attempts still unanswered, not one per
// connection ever opened. 200,000 connections, each SYN answered by its
// SYN-ACK, with one attempt in ten never answered: before the queue was
// compacted it held all 200,000 entries (about 10 MB an hour at 50
// connections a second, bench/soak.sh).
func TestSYNQueueBounded(t *testing.T) {
	a := New(DefaultConfig())
	server := netip.MustParseAddrPort("10.0.0.1:9092")
	p := &capture.Packet{}
	unanswered := 0
	for i := range 200000 {
		client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 16), byte(i >> 8)}), uint16(i))
		key, flipped := packet.MakeKey(client, server)
		a.tcp = &layers.TCP{SYN: true}
		a.trackSYN(p, key, flipped, client, server)
		if i%10 == 0 {
			unanswered++
			continue
		}
		a.tcp = &layers.TCP{SYN: true, ACK: true}
		a.trackSYN(p, key, !flipped, server, client)
	}
	if len(a.syns) != min(unanswered, a.maxSYNs) {
		t.Fatalf("%d attempts tracked, want %d", len(a.syns), min(unanswered, a.maxSYNs))
	}
	if n := len(a.synq.keys) - a.synq.head; n > 2*len(a.syns)+4096 {
		t.Errorf("the attempts' queue holds %d entries for %d attempts, want at most %d", n, len(a.syns), 2*len(a.syns)+4096)
	}
}
