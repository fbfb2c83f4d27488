package saslfailure

import (
	"net/netip"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

// TestConnsBounded: connections that authenticate and never close (reaped
// by the idle timeout) fill the table to its bound and no further; the
// oldest is forgotten and counted, and a connection that authenticates
// after them is still followed: its close at re-authentication time is
// counted. Before, the table stopped taking new connections once 65,536
// never-closed ones filled it, silently.
func TestConnsBounded(t *testing.T) {
	r := New(Params{MinReauthCloses: 1, ReauthSlack: time.Second}).(*rule)
	var p detectors.Pass
	server := netip.MustParseAddrPort("10.1.0.10:9092")
	host := netip.MustParseAddr("10.2.0.5")
	conn := func(i int) *flows.Conn {
		c := flows.MakeConn(netip.AddrPortFrom(host, uint16(i)), server)
		c.ID = i
		return c
	}
	auth := func(c *flows.Conn, at time.Time, lifetime int64) {
		req := flowstest.MakeRequest(c, at, 1, "app", dt.SaslAuthenticate("c=biws,r=nonce,p=proof"))
		r.Exchange(&p, &detectors.Exchange{Conn: &c.ConnInfo, Req: req, Resp: flowstest.MakeResponse(req, at.Add(time.Millisecond), dt.SaslAuthenticated(0, "", lifetime))})
	}
	n := 3 * maxConns
	for i := 1; i <= n; i++ {
		auth(conn(i), dt.At(time.Duration(i)*time.Millisecond), 0)
		if r.conns.Len() > maxConns {
			t.Fatalf("after %d connections the table holds %d, bound %d", i, r.conns.Len(), maxConns)
		}
	}
	if got := r.Cut()["connections_forgotten"]; got != int64(n-maxConns) {
		t.Errorf("connections_forgotten = %d, want %d", got, n-maxConns)
	}
	// After them, a connection whose 1 s session runs out: the broker
	// leaves a request unanswered and closes it.
	c := conn(n + 1)
	at := dt.At(time.Hour)
	auth(c, at, 1000)
	q := flowstest.MakeRequest(c, at.Add(2*time.Second), 2, "app", dt.Fetch(500))
	r.Exchange(&p, &detectors.Exchange{Conn: &c.ConnInfo, Req: q, Unanswered: true})
	r.ConnEvent(&p, &detectors.ConnEvent{Kind: flows.ConnClosed, Conn: &c.ConnInfo, Client: c.Client, Server: server, Time: at.Add(2*time.Second + time.Millisecond)})
	if len(r.clients) != 1 {
		t.Fatalf("%d clients", len(r.clients))
	}
	for _, cl := range r.clients {
		if cl.reauthClosed != 1 {
			t.Errorf("the connection after the table filled: %d closes at re-authentication time, want 1", cl.reauthClosed)
		}
	}
}
