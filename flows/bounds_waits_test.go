package flows

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// These tests look inside the Analyzer (package flows) to check that the
// totals across connections hold after every packet, not only that the
// report comes out right.

var (
	bt0     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bBroker = netip.MustParseAddrPort("10.0.0.2:9092")
)

func bClient(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), uint16(40000+i))
}

// events records what the analyzer delivers (copies: flows reuses the
// messages once delivered).
type events struct {
	requests  []*Message
	exchanges []*Exchange
}

func (e *events) OnRequest(m *Message)   { e.requests = append(e.requests, DetachMessage(m)) }
func (e *events) OnExchange(x *Exchange) { e.exchanges = append(e.exchanges, Detach(x)) }

// scriptFile is the capture script writes, open for reading.
func scriptFile(t *testing.T, script func(w *gen.Writer)) *capture.File {
	t.Helper()
	b, err := gen.Script(script)
	if err != nil {
		t.Fatal(err)
	}
	f, err := capture.NewFile("test", 0, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// run writes a capture with script and analyses it packet by packet,
// calling check after each packet.
func run(t *testing.T, cfg Config, script func(w *gen.Writer), check func(a *Analyzer)) (*Analyzer, *events) {
	t.Helper()
	f := scriptFile(t, script)
	ev := &events{}
	a := New(cfg, ev)
	var p capture.Packet
	for f.Next(&p) == nil {
		a.Packet(&p)
		check(a)
	}
	a.Close()
	check(a)
	return a, ev
}

func apiVersionsResp() *kmsg.ApiVersionsResponse {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = 3
	return r
}

func produceResp() *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	r.Version = 9
	return r
}

func apiVersionsReq() *kmsg.ApiVersionsRequest {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = 3
	r.ClientSoftwareName, r.ClientSoftwareVersion = "test", "1"
	return r
}

// TestPendingTotalAcrossConnections: 4 connections pipeline 50 requests
// each, never answered, interleaved, with at most 60 waiting in total and
// no per-connection bound. The total must hold after every packet; the
// oldest anywhere are dropped first, counted unanswered (and Evicted) as
// they are dropped, with one problem per connection; the rest are counted
// unanswered at the end; a fifth connection whose requests are answered
// is not disturbed.
func TestPendingTotalAcrossConnections(t *testing.T) {
	const conns, each, total = 4, 50, 60
	cfg := DefaultConfig()
	cfg.MaxPending = 0
	cfg.MaxPendingTotal = total
	a, ev := run(t, cfg, func(w *gen.Writer) {
		cs := make([]*gen.Conn, conns+1)
		for i := range cs {
			cs[i] = w.Conn(bClient(i), bBroker, bt0, gen.ConnOptions{})
		}
		at := bt0
		for k := range each {
			for i, c := range cs {
				at = at.Add(time.Millisecond)
				c.Request(at, int32(k), kmsg.StringPtr("id"), apiVersionsReq())
				if i == conns {
					c.Response(at, int32(k), apiVersionsResp())
				}
			}
		}
	}, func(a *Analyzer) {
		t.Helper()
		n := 0
		for _, c := range a.conns {
			n += c.waiting()
		}
		if n != a.waits.total || n > total {
			t.Fatalf("%d requests waiting, counted %d, bound %d", n, a.waits.total, total)
		}
		if q := len(a.waits.q) - a.waits.head; q > 2*total+4110 {
			t.Fatalf("%d entries queued for %d waiting", q, n)
		}
	})
	var unanswered, evicted, answered int
	var order []*Message
	for _, x := range ev.exchanges {
		switch {
		case x.Unanswered:
			unanswered++
			order = append(order, x.Req)
		case x.Resp != nil:
			answered++
		}
	}
	for _, c := range a.Conns() {
		evicted += c.Evicted
		if c.Client == bClient(conns) {
			if c.Responses != each || c.Unanswered != 0 {
				t.Errorf("answered connection: %d responses, %d unanswered", c.Responses, c.Unanswered)
			}
			continue
		}
		if c.Unanswered != each {
			t.Errorf("conn %d: %d unanswered, want %d", c.ID, c.Unanswered, each)
		}
		if len(c.Problems) != 1 || !strings.Contains(c.Problems[0].What, "over 60 requests waiting across connections") {
			t.Errorf("conn %d: problems %+v", c.ID, c.Problems)
		}
	}
	// The answered connection's request in flight counts too: when the
	// last comes, 59 others may wait.
	dropped := conns*each - (total - 1)
	if unanswered != conns*each || answered != each || evicted != dropped {
		t.Errorf("%d unanswered, %d answered, %d evicted; want %d, %d, %d", unanswered, answered, evicted, conns*each, each, dropped)
	}
	// Dropped oldest first: the evicted come out in packet order.
	for i := 1; i < dropped; i++ {
		if order[i].Packet < order[i-1].Packet {
			t.Fatalf("request at packet %d dropped before the older one at packet %d", order[i].Packet, order[i-1].Packet)
		}
	}
}

// TestWaitsStaleEntries: one request that is never answered must not let
// the queue of the total bound grow with every request answered after it.
func TestWaitsStaleEntries(t *testing.T) {
	cfg := DefaultConfig()
	a, _ := run(t, cfg, func(w *gen.Writer) {
		stuck := w.Conn(bClient(0), bBroker, bt0, gen.ConnOptions{})
		stuck.Request(bt0.Add(time.Millisecond), 1, kmsg.StringPtr("id"), apiVersionsReq())
		c := w.Conn(bClient(1), bBroker, bt0, gen.ConnOptions{})
		for k := range 20_000 {
			at := bt0.Add(time.Duration(k+2) * time.Millisecond)
			c.Request(at, int32(k), kmsg.StringPtr("id"), apiVersionsReq())
			c.Response(at, int32(k), apiVersionsResp())
		}
	}, func(a *Analyzer) {
		// At most 2 wait at any time.
		if q := len(a.waits.q) - a.waits.head; q > 4110 {
			t.Fatalf("%d entries queued for %d waiting", q, a.waits.total)
		}
	})
	if a.waits.total != 0 {
		t.Errorf("%d waiting after Close", a.waits.total)
	}
}
