package collect

import (
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

// BenchmarkCollector times the collector's hot path per exchange: a
// request and its response (Produce and Fetch over 64 connections to 8
// brokers, 20,000 a second of capture time), warm. The timeline's share is
// the difference with the commit before it (BENCHMARKS.md).
func BenchmarkCollector(b *testing.B) {
	const conns = 64
	c := NewCollector()
	dl := flows.NewDelivery(c)
	type pair struct{ q, a *flows.Message }
	var pairs []pair
	var cs []*flows.Conn
	for i := range conns {
		cn := flows.MakeConn(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, 0, byte(i)}), 40000),
			netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i % 8)}), 9092))
		dl.Deliver(&flows.Event{Conn: &flows.ConnEvent{Kind: flows.ConnOpened, Conn: cn, Client: cn.Client, Server: cn.Server, Time: t0}})
		cs = append(cs, cn)
		var req kmsg.Request
		var resp kmsg.Response
		if i%2 == 0 {
			p := kmsg.NewPtrProduceRequest()
			p.Version, p.Acks = 9, -1
			req = p
			r := kmsg.NewPtrProduceResponse()
			r.Version = 9
			resp = r
		} else {
			f := kmsg.NewPtrFetchRequest()
			f.Version = 13
			req = f
			r := kmsg.NewPtrFetchResponse()
			r.Version = 13
			resp = r
		}
		q := flowstest.MakeRequest(cn, t0, int32(i), "bench", req)
		pairs = append(pairs, pair{q, flowstest.MakeResponse(q, t0, resp)})
	}
	x := &flows.Exchange{}
	at := t0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := pairs[i%conns]
		at = at.Add(50 * time.Microsecond)
		p.q.Time, p.a.Time = at, at.Add(2*time.Millisecond)
		c.OnRequest(p.q)
		*x = flows.Exchange{Conn: cs[i%conns], Req: p.q, Resp: p.a}
		c.OnExchange(x)
		i++
	}
}
