package unansweredrequests

import (
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	dt "github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

// consumers delivers, to ex, a Fetch answered on each of n connections
// numbered from 1 (each makes the rule keep the connection's MaxWaitMillis),
// the first of them with a Produce before it that is never answered.
func consumers(n int, ex func(p *detectors.Pass, x *flows.Exchange)) {
	server := netip.MustParseAddrPort("10.1.0.10:9092")
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	for i := 1; i <= n; i++ {
		c := flows.MakeConn(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, byte(i >> 16), byte(i >> 8)}), uint16(i)), server)
		c.ID, c.Packets = i, [2]int64{1, 1}
		at := dt.At(time.Duration(i) * time.Millisecond)
		p := &detectors.Pass{Start: dt.T0, End: at}
		if i == 1 {
			q := flowstest.MakeRequest(c, at, 1, "producer-1", dt.Produce(9))
			ex(p, &flows.Exchange{Conn: c, Req: q, Unanswered: true})
		}
		q := flowstest.MakeRequest(c, at, 2, "consumer-1", dt.Fetch(500))
		ex(p, &flows.Exchange{Conn: c, Req: q, Resp: flowstest.MakeResponse(q, at, resp)})
	}
}

// TestConnStateBounded: the rule keeps the state of at most maxConns
// connections however many it sees (before the bound it kept every
// connection with a Fetch or JoinGroup until the end, pinning records
// flows had long dropped); the ones forgotten are counted, and an
// unanswered request of a forgotten connection is settled, not lost.
func TestConnStateBounded(t *testing.T) {
	r := New(Params{Grace: time.Second}).(*rule)
	n := 0
	consumers(4*maxConns, func(p *detectors.Pass, fx *flows.Exchange) {
		x := detectors.Exchange{Conn: &fx.Conn.ConnInfo, Req: fx.Req, Resp: fx.Resp, Unanswered: fx.Unanswered}
		r.Exchange(p, &x)
		n = max(n, len(r.conns), len(r.order))
	})
	if n != maxConns {
		t.Errorf("the rule kept the state of up to %d connections, want its bound %d", n, maxConns)
	}
	if got := r.Cut()["connections_forgotten"]; got != 3*maxConns {
		t.Errorf("connections_forgotten = %d, want %d", got, 3*maxConns)
	}
	if r.warn[netip.MustParseAddrPort("10.1.0.10:9092")] == nil && r.info.N == 0 {
		t.Error("the unanswered Produce of the first connection, forgotten, was not counted")
	}
}

// TestConnStateBoundNamed: a run past the bound says so under
// bounds_reached, as "unanswered-requests.connections_forgotten".
func TestConnStateBoundNamed(t *testing.T) {
	set, err := detectors.NewSet([]*detectors.Analyzer{Analyzer}, nil)
	if err != nil {
		t.Fatal(err)
	}
	consumers(maxConns+10, func(_ *detectors.Pass, x *flows.Exchange) { set.OnExchange(x) })
	if got := set.Cut()["unanswered-requests.connections_forgotten"]; got != 10 {
		t.Errorf("bounds_reached names unanswered-requests.connections_forgotten %d, want 10 (%v)", got, set.Cut())
	}
	fs := set.Findings(detectors.Pass{Start: dt.T0, End: dt.At(time.Hour)})
	if len(fs) == 0 {
		t.Error("no finding of the unanswered Produce on the forgotten connection")
	}
}
