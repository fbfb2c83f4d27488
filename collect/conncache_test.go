package collect

import (
	"net/netip"
	"runtime"
	"testing"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/memtest"
)

// TestConnCachesFixed: the inventory's cache of each connection's client
// and the timeline's of each connection's broker line cost the same
// however many connections have been numbered. A live capture numbers
// 50 new connections a second (the soak): 200,000 connections (about
// an hour of it), each sending one request, leave under 512 KiB. Before,
// both were indexed by the connection's number, up to 65,536 and 2^20
// (1.4 MB here, and the timeline's growing for six hours at that rate). A connection
// numbered far back is still found: its client and broker line are
// right.
func TestConnCachesFixed(t *testing.T) {
	heap := memtest.HeapLive
	inv := newInventory()
	var tl timeline
	tl.init()
	server := netip.MustParseAddrPort("10.0.0.1:9092")
	host := netip.MustParseAddr("10.0.0.5")
	conn := func(id int) *flows.ConnInfo {
		return &flows.ConnInfo{ID: id, Client: netip.AddrPortFrom(host, uint16(id)), Server: server}
	}
	first := conn(1)
	c1 := inv.client(&flows.Message{Conn: first, Client: cluster.Client{ID: "app"}})
	b1 := tl.broker(first)
	before := heap()
	const conns = 200000
	for id := 2; id <= conns; id++ {
		c := conn(id)
		inv.client(&flows.Message{Conn: c, Client: cluster.Client{ID: "app"}})
		tl.broker(c)
	}
	grew := int64(heap()) - int64(before)
	if grew > 512<<10 {
		t.Errorf("after %d connections the caches grew %d bytes, want under 512 KiB", conns, grew)
	}
	if got := inv.client(&flows.Message{Conn: first, Client: cluster.Client{ID: "app"}}); got != c1 {
		t.Errorf("connection 1's client is another")
	}
	if got := tl.broker(first); got != b1 || len(inv.clients) != 1 {
		t.Errorf("connection 1's broker line is another, or %d clients", len(inv.clients))
	}
	runtime.KeepAlive(inv)
	runtime.KeepAlive(&tl)
}
