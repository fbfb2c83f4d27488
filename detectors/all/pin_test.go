package all

import (
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

// TestRulesPinNoConnectionRecords: the rules' state keeps no connection
// record (flows.Conn, 768 bytes) alive beyond the few their findings name.
// flows bounds the records it holds (MaxConns) and drops the rest; a rule
// keeping a record by pointer would keep it for the whole run. Here 20,000
// consumer and producer connections open, each carrying a SASL handshake,
// a Fetch and a Produce, and never close (as connections reaped by the idle timeout do
// not), then are dropped by their owner; after a collection at most
// maxPinned of them (a few times the first 256 a finding names) may
// still be reachable from the Set. Before the
// rules kept their per-connection state by value (tally.ConnKey),
// reconnect-storm, unanswered-requests and sasl-failure held all 20,000.
func TestRulesPinNoConnectionRecords(t *testing.T) {
	const n, maxPinned = 20000, 4 * tally.DefaultMaxConns
	if pinned := pinnedRecords(t, n, 0); pinned > maxPinned {
		t.Errorf("%d of %d connection records still reachable from the rules' state, want at most %d", pinned, n, maxPinned)
	}
}

// TestFindingsPinNoConnectionRecords: the connections a finding names
// (tally.Conns, the first 256 per finding) are kept by key, not by
// record. Here every Produce and Fetch of the 20,000 connections is
// refused with NOT_LEADER_OR_FOLLOWER, so that error-storm,
// not-leader-loop and others name connections; at most a few records
// (rules' caches of the last connection seen) may stay reachable. When
// tally.Conns held *flows.ConnInfo, 263 did.
func TestFindingsPinNoConnectionRecords(t *testing.T) {
	const n, maxPinned = 20000, 32
	if pinned := pinnedRecords(t, n, 6); pinned > maxPinned {
		t.Errorf("%d of %d connection records still reachable from the rules' state, want at most %d", pinned, n, maxPinned)
	}
}

// pinnedRecords runs n connections through every rule, each answered
// with error code code, and returns how many of their records are still
// reachable from the rules once their owner dropped them.
func pinnedRecords(t *testing.T, n int, code int16) int64 {
	t.Helper()
	set, err := detectors.NewSet(Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var opened, freed atomic.Int64
	server := netip.MustParseAddrPort("10.1.0.10:9092")
	for i := 1; i <= n; i++ {
		c := flows.MakeConn(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, 0, 1}), uint16(20000+i)), server) // one client host
		c.ID, c.Handshake, c.Packets = i, true, [2]int64{2, 2}
		opened.Add(1)
		runtime.SetFinalizer(c, func(*flows.Conn) { freed.Add(1) })
		at := detectortest.At(time.Duration(i) * time.Millisecond)
		set.OnConnEvent(&flows.ConnEvent{Kind: flows.ConnOpened, Conn: c, Client: c.Client, Server: c.Server, Packet: uint64(4 * i), Time: at})
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "PLAIN"
		hsr := kmsg.NewPtrSASLHandshakeResponse()
		hsr.Version, hsr.SupportedMechanisms = 1, []string{"PLAIN"}
		q := flowstest.MakeRequest(c, at, 3, "consumer", hs)
		q.Packet = uint64(4*i + 3)
		set.OnRequest(q)
		set.OnExchange(&flows.Exchange{Conn: c, Req: q, Resp: flowstest.MakeResponse(q, at, hsr)})
		q = flowstest.MakeRequest(c, at, 1, "consumer", detectortest.Fetch(500))
		q.Packet = uint64(4*i + 1)
		set.OnRequest(q)
		set.OnExchange(&flows.Exchange{Conn: c, Req: q, Resp: flowstest.MakeResponse(q, at.Add(time.Millisecond), detectortest.Fetched(code, 0))})
		q = flowstest.MakeRequest(c, at, 2, "producer", detectortest.Produce(9))
		q.Packet = uint64(4*i + 2)
		set.OnRequest(q)
		set.OnExchange(&flows.Exchange{Conn: c, Req: q, Resp: flowstest.MakeResponse(q, at.Add(time.Millisecond), detectortest.Produced(9, code, 0))})
	}
	for range 5 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(set)
	return opened.Load() - freed.Load()
}
