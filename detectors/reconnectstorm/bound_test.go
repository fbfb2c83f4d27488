package reconnectstorm

import (
	"net/netip"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/flows"
)

// TestOpenBounded: connections that never close (reaped by the idle
// timeout) fill the open table to its bound and no further; the oldest is
// forgotten and counted, and a connection opened after them is still
// followed: its short life is counted. Before, the table stopped taking
// new connections once 65,536 never-closed ones filled it, and a storm
// after them went unjudged.
func TestOpenBounded(t *testing.T) {
	r := New(Params{MinConns: 10, Window: time.Second, ShortLived: time.Second}).(*rule)
	server := netip.MustParseAddrPort("10.1.0.10:9092")
	var p detectors.Pass
	open := func(i int, at time.Time) *flows.ConnInfo {
		c := &flows.ConnInfo{ID: i, Client: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, byte(i >> 16), byte(i >> 8)}), uint16(i)), Server: server}
		r.ConnEvent(&p, &detectors.ConnEvent{Kind: flows.ConnOpened, Conn: c, Client: c.Client, Server: server, Time: at})
		return c
	}
	n := 3 * maxOpen
	for i := 1; i <= n; i++ {
		open(i, dt.At(time.Duration(i)*time.Millisecond))
		if r.open.Len() > maxOpen {
			t.Fatalf("after %d connections the open table holds %d, bound %d", i, r.open.Len(), maxOpen)
		}
	}
	if got := r.Cut()["connections_forgotten"]; got != int64(n-maxOpen) {
		t.Errorf("connections_forgotten = %d, want %d", got, n-maxOpen)
	}
	at := dt.At(time.Hour)
	c := open(n+1, at)
	r.ConnEvent(&p, &detectors.ConnEvent{Kind: flows.ConnClosed, Conn: c, Client: c.Client, Server: server, Time: at.Add(10 * time.Millisecond)})
	if b := r.brokers[server]; b.closed != 1 || b.short != 1 {
		t.Errorf("the connection opened after the table filled: closed %d, short %d, want 1 and 1", b.closed, b.short)
	}
}
