package flows

import (
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// connEvents records connection events.
type connEvents struct{ conns []ConnEvent }

func (e *connEvents) OnConnEvent(c *ConnEvent) { e.conns = append(e.conns, *c) }

// analyse writes a capture with script and analyses it with h.
func analyse(t *testing.T, script func(w *gen.Writer), h Handler) *Analyzer {
	t.Helper()
	f := scriptFile(t, script)
	a := New(DefaultConfig(), h)
	var p capture.Packet
	for f.Next(&p) == nil {
		a.Packet(&p)
	}
	a.Close()
	return a
}

// TestKeepAliveStartsNoDirection: mid-connection, the broker's first
// packet is a one-byte keep-alive (the sequence number before its next
// byte, carrying a garbage byte) and the client's first is a keep-alive
// without data: neither is taken for the start of its direction, so the
// request and its response, which follow, are framed from their first
// byte, with no hole before them and no byte skipped.
func TestKeepAliveStartsNoDirection(t *testing.T) {
	a, ev := run(t, DefaultConfig(), func(w *gen.Writer) {
		c := w.Conn(bClient(3), bBroker, bt0, gen.ConnOptions{NoHandshake: true, SkipBytes: [2]int{700, 9000}})
		c.KeepAlive(gen.ServerToClient, bt0, 1)
		c.KeepAlive(gen.ClientToServer, bt0.Add(time.Millisecond), 0)
		c.Request(bt0.Add(2*time.Second), 7, nil, apiVersionsReq())
		c.Response(bt0.Add(2*time.Second), 7, apiVersionsResp())
	}, func(*Analyzer) {})
	cs := a.Conns()
	if len(cs) != 1 {
		t.Fatalf("%d connections", len(cs))
	}
	c := cs[0]
	if c.Gaps != 0 || c.Requests != 1 || c.Responses != 1 || len(ev.exchanges) != 1 || len(c.Skipped) != 0 {
		t.Errorf("%d gaps, %d requests, %d responses, skipped %v, problems %v", c.Gaps, c.Requests, c.Responses, c.Skipped, c.Problems)
	}
}

// TestReuseEndsTheOldConnection: a RST, then at once a SYN on the same
// 4-tuple with an initial sequence number inside the old connection's: the
// old connection is reported closed (reset) at the new SYN, not at the end
// of the capture, and the new one is a connection of its own.
func TestReuseEndsTheOldConnection(t *testing.T) {
	var synAt uint64
	ev := &connEvents{}
	a := analyse(t, func(w *gen.Writer) {
		c := w.Conn(bClient(4), bBroker, bt0, gen.ConnOptions{ISN: [2]uint32{5000, 9000}})
		c.Request(bt0.Add(time.Millisecond), 1, nil, apiVersionsReq())
		c.Response(bt0.Add(2*time.Millisecond), 1, apiVersionsResp())
		c.Reset(gen.ClientToServer, bt0.Add(3*time.Millisecond))
		synAt = uint64(w.Packets() + 1)
		c = w.Conn(bClient(4), bBroker, bt0.Add(3*time.Millisecond+gen.Step), gen.ConnOptions{ISN: [2]uint32{5010, 9020}})
		c.Request(bt0.Add(4*time.Millisecond), 1, nil, apiVersionsReq())
		c.Response(bt0.Add(5*time.Millisecond), 1, apiVersionsResp())
		c.Close(bt0.Add(6 * time.Millisecond))
	}, ev)
	cs := a.Conns()
	if len(cs) != 2 || cs[0].ID == cs[1].ID {
		t.Fatalf("%d connections", len(cs))
	}
	if !cs[0].Reset || cs[0].Requests != 1 || cs[0].Responses != 1 || !cs[1].Closed || cs[1].Requests != 1 || cs[1].Responses != 1 {
		t.Errorf("first: reset %v, %d/%d; second: closed %v, %d/%d", cs[0].Reset, cs[0].Requests, cs[0].Responses, cs[1].Closed, cs[1].Requests, cs[1].Responses)
	}
	var closedAt []uint64
	for _, e := range ev.conns {
		if e.Kind == ConnClosed {
			closedAt = append(closedAt, e.Packet)
		}
	}
	if len(closedAt) != 2 || closedAt[0] != synAt {
		t.Errorf("closed at packets %v; the first should close at the new SYN, packet %d", closedAt, synAt)
	}
	if len(a.superseded) != 0 || len(a.streams) != 0 {
		t.Errorf("%d superseded, %d streams left", len(a.superseded), len(a.streams))
	}
}

// TestFinishEndsTheOldStream: ending a superseded connection hands
// reassembly RSTs keyed as captured segments are (by their port bytes), so
// they close the old connection's reassembly state instead of opening a
// stream of no ports: after a 4-tuple is used twice, reassembly has made
// exactly two streams, and holds none once the capture is closed.
func TestFinishEndsTheOldStream(t *testing.T) {
	a := analyse(t, func(w *gen.Writer) {
		c := w.Conn(bClient(4), bBroker, bt0, gen.ConnOptions{ISN: [2]uint32{5000, 9000}})
		c.Request(bt0.Add(time.Millisecond), 1, nil, apiVersionsReq())
		c.Response(bt0.Add(2*time.Millisecond), 1, apiVersionsResp())
		c = w.Conn(bClient(4), bBroker, bt0.Add(3*time.Millisecond), gen.ConnOptions{ISN: [2]uint32{90000, 190000}})
		c.Request(bt0.Add(4*time.Millisecond), 1, nil, apiVersionsReq())
		c.Response(bt0.Add(5*time.Millisecond), 1, apiVersionsResp())
	}, &connEvents{})
	if len(a.Conns()) != 2 {
		t.Fatalf("%d connections", len(a.Conns()))
	}
	if len(a.born) != 2 {
		t.Errorf("reassembly made %d streams for two connections on one 4-tuple", len(a.born))
	}
}
