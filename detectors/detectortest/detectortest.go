// Package detectortest tests rules as specifications: it feeds a rule
// flows events built in memory (no pcap), collects its findings and checks
// them one way (Check), the way golang.org/x/tools/go/analysis's
// analysistest runs a pass over small inputs with the expected
// diagnostics beside them.
package detectortest

import (
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

// T0 is the time the builders start at.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Harness runs analyzers over events built in memory, delivered as the
// pipeline delivers them (flows.Delivery: node identities and topic names
// learned from the traffic before the rules see it).
type Harness struct {
	t     testing.TB
	set   *detectors.Set
	dl    *flows.Delivery
	conns []*flows.Conn
	corr  map[*flows.Conn]int32
	start time.Time
	end   time.Time
	pkt   uint64
	// listeners are the endpoints seen accepting connections (Accepting).
	listeners *flows.Listeners
}

// New makes a harness running the analyzers with their parameters changed
// by settings (rule name -> parameter -> value, as -o gives them).
func New(t testing.TB, settings map[string]map[string]string, analyzers ...*detectors.Analyzer) *Harness {
	t.Helper()
	set, err := detectors.NewSet(analyzers, settings)
	if err != nil {
		t.Fatal(err)
	}
	return &Harness{t: t, set: set, dl: flows.NewDelivery(set), corr: map[*flows.Conn]int32{}}
}

// SetLimits changes the limits on the findings listed (a run's are
// detectors.DefaultLimits), for a test of a rule's own bound beyond them.
func (h *Harness) SetLimits(l detectors.Limits) { h.set.SetLimits(l) }

// Nodes are the node identities learned from the events so far.
func (h *Harness) Nodes() *cluster.Nodes { return h.dl.Nodes() }

// Conn opens a connection from client to server (both "ip:port"), with
// its ConnOpened event, at the time of the last event so far.
func (h *Harness) Conn(client, server string) *flows.Conn {
	h.t.Helper()
	c := flows.MakeConn(netip.MustParseAddrPort(client), netip.MustParseAddrPort(server))
	c.FirstSeen = h.now()
	h.conns = append(h.conns, c)
	h.dl.Deliver(&flows.Event{Conn: &flows.ConnEvent{Kind: flows.ConnOpened, Conn: c, Client: c.Client, Server: c.Server, Time: h.now()}})
	return c
}

func (h *Harness) now() time.Time {
	if h.end.IsZero() {
		return T0
	}
	return h.end
}

// place numbers the next packet and keeps the capture's time span.
func (h *Harness) place(m *flows.Message) {
	if m == nil {
		return
	}
	if m.Packet == 0 {
		h.pkt++
		m.Packet, m.FirstPacket = h.pkt, h.pkt
	} else {
		h.pkt = max(h.pkt, m.Packet)
	}
	if m.FirstTime.IsZero() {
		m.FirstTime = m.Time
	}
	if h.start.IsZero() || m.Time.Before(h.start) {
		h.start = m.Time
	}
	if m.Time.After(h.end) {
		h.end = m.Time
	}
}

// Request delivers a request frame, as flows does when it is decoded, and
// counts it on its connection as the analyzer does (Conn.Requests, APIs,
// Roles: what rules read of Pass.Conns).
func (h *Harness) Request(m *flows.Message) {
	h.place(m)
	for _, c := range h.conns {
		if &c.ConnInfo == m.Conn {
			c.Requests++
			c.APIs.Add(m.Key)
			c.Roles[m.Role]++
		}
	}
	h.dl.Deliver(&flows.Event{Req: m})
}

// Exchange delivers an exchange, as flows does when the response pairs (or
// never will).
func (h *Harness) Exchange(x *flows.Exchange) {
	h.place(x.Resp)
	if x.Conn == nil {
		h.t.Fatal("detectortest: an exchange needs its connection (Harness.Conn)")
	}
	h.dl.Deliver(&flows.Event{X: x})
}

// RoundTrip delivers a request and then its exchange with resp.
func (h *Harness) RoundTrip(c *flows.Conn, req, resp *flows.Message) {
	h.Request(req)
	h.Exchange(&flows.Exchange{Conn: c, Req: req, Resp: resp})
}

// ConnEvent delivers a connection event.
func (h *Harness) ConnEvent(e *flows.ConnEvent) {
	if e.Time.After(h.end) {
		h.end = e.Time
	}
	h.dl.Deliver(&flows.Event{Conn: e})
}

// Findings ends the run and returns the findings, as the pipeline would.
func (h *Harness) Findings() []detectors.Finding {
	return h.set.Findings(h.pass())
}

// Snapshot returns the findings as they stand, as live capture asks.
func (h *Harness) Snapshot() []detectors.Finding {
	return h.set.Snapshot(h.pass())
}

func (h *Harness) pass() detectors.Pass {
	return detectors.Pass{Nodes: h.dl.Nodes(), Conns: h.conns, Listeners: h.listeners, Start: h.start, End: h.end}
}

// Call delivers a request from c at at, answered after lat (resp nil: the
// request only, to be answered or not later), and returns both messages.
// Correlation ids count from 1 per connection.
func (h *Harness) Call(c *flows.Conn, at time.Time, lat time.Duration, clientID string, req kmsg.Request, resp kmsg.Response) (*flows.Message, *flows.Message) {
	h.corr[c]++
	q := flowstest.MakeRequest(c, at, h.corr[c], clientID, req)
	h.Request(q)
	if resp == nil {
		return q, nil
	}
	r := flowstest.MakeResponse(q, at.Add(lat), resp)
	h.Exchange(&flows.Exchange{Conn: c, Req: q, Resp: r})
	return q, r
}

// Unanswered delivers the end of a request never answered.
func (h *Harness) Unanswered(c *flows.Conn, q *flows.Message) {
	h.Exchange(&flows.Exchange{Conn: c, Req: q, Unanswered: true})
}

// At is T0 plus d.
func At(d time.Duration) time.Time { return T0.Add(d) }
