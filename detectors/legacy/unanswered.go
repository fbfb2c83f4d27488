package legacy

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// unanswered-requests: requests that got no response. Every request is
// given an allowance, the time a healthy broker may take to answer it:
// grace-s, plus MaxWaitMillis for a Fetch (a long poll is answered when
// data arrives or the wait expires), plus the rebalance timeout for a
// JoinGroup (held until every member has joined) and for a SyncGroup
// (held until the leader sends the assignment).
//
// A request is unanswered (warning) when
//   - a later request on its connection was answered ("overtaken": Kafka
//     answers a connection's requests in order, so it never will be), or
//   - it waited past its allowance and the capture ended ("expired") or
//     the connection closed ("closed", what a client does when its
//     request.timeout.ms expires).
//
// A request whose allowance had not run out when the capture ended or its
// connection closed is in flight, not unanswered: the long poll pending at
// the end of every consumer capture is not mentioned at all, other
// requests are listed at info. So are requests on connections whose server
// side the capture never saw (not one packet: a one-sided or sampled
// capture, e.g. ndpi's kafka.pcapng) or that lost segments in the capture:
// there the response may exist and not have been captured.

func unansweredSpec() Spec {
	return Spec{
		ID:       "unanswered-requests",
		Severity: Warning,
		Summary: "Requests that got no response: overtaken by the answer to a later request on the same " +
			"connection, or still waiting, past their allowance (grace-s, plus MaxWaitMillis for a Fetch long " +
			"poll, plus the rebalance timeout for JoinGroup and SyncGroup), when the capture ended or the " +
			"connection closed. Per broker: count, APIs, connections, the oldest request. Requests still " +
			"within their allowance at the end are in flight (info; a pending long poll is not reported).",
		Params: []Param{
			{Name: "grace-s", Default: 1, Meaning: "seconds any request may wait for its response before it counts as unanswered, on top of a Fetch's MaxWaitMillis or a group's rebalance timeout"},
		},
		New: func(p Params) Detector { return newUnanswered(p) },
	}
}

const (
	// unansMaxTail bounds the requests kept per connection while their
	// fate is open; older ones beyond it count as unanswered.
	unansMaxTail = 1024
	// unansDefaultMaxWait is assumed for a Fetch whose body was lost.
	unansDefaultMaxWait = 500 * time.Millisecond
)

// Why a request is counted.
const (
	unansOvertaken = iota // a later request on the connection was answered
	unansExpired          // waited past its allowance until the capture ended
	unansClosed           // waited past its allowance until the connection closed
	unansInFlight         // allowance not run out at the end or at the close
	unansOneSided         // the capture has no packet from the server
	unansGaps             // the connection lost segments in the capture
	unansLongPoll         // a Fetch or group request within its wait: normal
	unansReasons
)

var unansReasonNames = [unansReasons]string{"overtaken", "expired", "closed", "in_flight", "one_sided", "capture_gaps", "long_poll"}

type unanswered struct {
	grace time.Duration
	conns map[*flows.Conn]*unansConn
	// warn groups unanswered requests by server; info gathers those
	// that are in flight or whose responses the capture may have missed.
	warn map[netip.AddrPort]*unansGroup
	info unansGroup
}

func newUnanswered(p Params) *unanswered {
	return &unanswered{
		grace: p.Seconds("grace-s"),
		conns: make(map[*flows.Conn]*unansConn),
		warn:  make(map[netip.AddrPort]*unansGroup),
	}
}

// unansConn is what is known of one connection.
type unansConn struct {
	// tail holds the unanswered requests since the last answered one.
	tail      []unansReq
	rebalance time.Duration // last JoinGroup's rebalance timeout
	maxWait   time.Duration // last Fetch's MaxWaitMillis
}

type unansReq struct {
	key      int16
	t        time.Time
	allow    time.Duration
	longPoll bool // the allowance includes a server-side wait
	ev       Evidence
	desc     string        // "Produce v9 corr 12 (packet 40)"
	waited   time.Duration // until overtaken, the capture's end or the close
	conn     *flows.Conn
	clientID string
}

type unansGroup struct {
	server      netip.AddrPort
	n           int64
	reasons     [unansReasons]int64
	byAPI       map[string]int64
	clientIDs   map[string]bool
	conns       opsConns
	first, last time.Time
	oldest      unansReq
	oldestWhy   int
	reqs        []unansReq // for evidence in time order, bounded
}

const unansMaxEvidenceReqs = 4096

func (g *unansGroup) add(r unansReq, reason int) {
	if g.byAPI == nil {
		g.byAPI = make(map[string]int64)
		g.clientIDs = make(map[string]bool)
	}
	g.n++
	g.reasons[reason]++
	g.byAPI[decode.Name(r.key)]++
	g.clientIDs[r.clientID] = true
	g.conns.add(r.conn)
	if g.n == 1 || r.t.Before(g.first) {
		g.first = r.t
		g.oldest, g.oldestWhy = r, reason
	}
	if r.t.After(g.last) {
		g.last = r.t
	}
	if len(g.reqs) < unansMaxEvidenceReqs {
		g.reqs = append(g.reqs, r)
	}
}

// evidence returns the requests' packets: the oldest first, then a spread.
func (g *unansGroup) evidence() []Evidence {
	sort.SliceStable(g.reqs, func(i, j int) bool { return g.reqs[i].t.Before(g.reqs[j].t) })
	var s sampler[Evidence]
	s.add(g.oldest.ev)
	for _, r := range g.reqs {
		if r.ev != g.oldest.ev {
			s.add(r.ev)
		}
	}
	return s.list()
}

func (d *unanswered) conn(c *flows.Conn) *unansConn {
	uc := d.conns[c]
	if uc == nil {
		uc = &unansConn{}
		d.conns[c] = uc
	}
	return uc
}

// OnExchange implements flows.ExchangeHandler.
func (d *unanswered) OnExchange(x *flows.Exchange) {
	if x.Req == nil || x.NoResponse {
		return
	}
	c := x.Conn
	switch r := x.Req.Req.(type) {
	case *kmsg.JoinGroupRequest:
		uc := d.conn(c)
		uc.rebalance = time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
		if r.Version == 0 || r.RebalanceTimeoutMillis <= 0 {
			uc.rebalance = time.Duration(r.SessionTimeoutMillis) * time.Millisecond
		}
	case *kmsg.FetchRequest:
		// Kept for a later Fetch whose body is lost in the capture.
		d.conn(c).maxWait = time.Duration(r.MaxWaitMillis) * time.Millisecond
	}
	if x.OneSided {
		// No packet from the server in the capture: whether it was
		// answered cannot be told. It waited until the end (settled in
		// Findings).
		r := d.request(x)
		r.waited = -1
		d.info.add(r, unansOneSided)
		return
	}
	if !x.Unanswered {
		// Kafka answers in order: whatever waits before this request
		// on the connection will not be answered.
		if uc := d.conns[c]; uc != nil && len(uc.tail) > 0 {
			for _, r := range uc.tail {
				r.waited = x.Resp.Time.Sub(r.t)
				if x.ConnGaps > 0 {
					// The response may be in the bytes lost.
					d.info.add(r, unansGaps)
				} else {
					d.warnGroup(r).add(r, unansOvertaken)
				}
			}
			uc.tail = uc.tail[:0]
		}
		return
	}
	r := d.request(x)
	uc := d.conn(c)
	if len(uc.tail) >= unansMaxTail {
		// A connection with this many unanswered requests is broken
		// whatever becomes of the rest.
		d.warnGroup(uc.tail[0]).add(uc.tail[0], unansOvertaken)
		copy(uc.tail, uc.tail[1:])
		uc.tail = uc.tail[:len(uc.tail)-1]
	}
	uc.tail = append(uc.tail, r)
}

// request describes an unanswered request with its allowance.
func (d *unanswered) request(x *flows.Exchange) unansReq {
	m := x.Req
	r := unansReq{key: m.Key, t: m.Time, allow: d.grace, conn: x.Conn, clientID: m.ClientID}
	uc := d.conns[x.Conn]
	switch kmsg.Key(m.Key) {
	case kmsg.Fetch:
		wait := unansDefaultMaxWait
		if uc != nil && uc.maxWait > 0 {
			wait = uc.maxWait
		}
		if f, ok := m.Req.(*kmsg.FetchRequest); ok {
			wait = time.Duration(f.MaxWaitMillis) * time.Millisecond
		}
		r.allow += max(wait, 0)
		r.longPoll = true
	case kmsg.ShareFetch:
		if f, ok := m.Req.(*kmsg.ShareFetchRequest); ok {
			r.allow += max(time.Duration(f.MaxWaitMillis)*time.Millisecond, 0)
		}
		r.longPoll = true
	case kmsg.JoinGroup, kmsg.SyncGroup:
		// A JoinGroup has just set it from its own rebalance timeout.
		if uc != nil {
			r.allow += max(uc.rebalance, 0)
		}
		r.longPoll = true
	}
	r.ev = evidence(m, fmt.Sprintf("%s v%d request corr %d, no response", m.Name(), m.Version, m.Correlation))
	r.desc = fmt.Sprintf("%s v%d corr %d (packet %d)", m.Name(), m.Version, m.Correlation, m.Packet)
	return r
}

func (d *unanswered) warnGroup(r unansReq) *unansGroup {
	s := r.conn.Server
	g := d.warn[s]
	if g == nil {
		g = &unansGroup{server: s}
		d.warn[s] = g
	}
	return g
}

// Findings implements Detector.
func (d *unanswered) Findings(env *Env) []Finding {
	// Requests of one-sided connections waited until the end.
	settle := func(r *unansReq) {
		if r.waited < 0 {
			end := env.End
			if c := r.conn; c.Closed || c.Reset {
				end = c.LastSeen
			}
			r.waited = end.Sub(r.t)
		}
	}
	settle(&d.info.oldest)
	for i := range d.info.reqs {
		settle(&d.info.reqs[i])
	}
	// Settle the requests still open at the end, connection by
	// connection in order.
	conns := make([]*flows.Conn, 0, len(d.conns))
	for c, uc := range d.conns {
		if len(uc.tail) > 0 {
			conns = append(conns, c)
		}
	}
	sort.Slice(conns, func(i, j int) bool { return conns[i].ID < conns[j].ID })
	for _, c := range conns {
		end, reason := env.End, unansExpired
		if c.Closed || c.Reset {
			end, reason = c.LastSeen, unansClosed
		}
		for _, r := range d.conns[c].tail {
			r.waited = end.Sub(r.t)
			switch {
			case c.Packets[flows.ToClient] == 0:
				d.info.add(r, unansOneSided)
			case c.Gaps > 0:
				d.info.add(r, unansGaps)
			case r.waited < r.allow && r.longPoll:
				d.info.add(r, unansLongPoll)
			case r.waited < r.allow:
				d.info.add(r, unansInFlight)
			default:
				d.warnGroup(r).add(r, reason)
			}
		}
		d.conns[c].tail = nil
	}
	servers := make([]*unansGroup, 0, len(d.warn))
	for _, g := range d.warn {
		servers = append(servers, g)
	}
	sort.Slice(servers, func(i, j int) bool { return servers[i].server.String() < servers[j].server.String() })
	var out []Finding
	for _, g := range servers {
		out = append(out, d.warning(env, g))
	}
	if f, ok := d.infoFinding(env); ok {
		out = append(out, f)
	}
	return out
}

// Snapshot implements snapshotter: Findings settles the open requests
// into the groups, so it runs here on copies of the groups and of the
// per-connection state.
func (d *unanswered) Snapshot(env *Env) []Finding {
	c := *d
	c.conns = make(map[*flows.Conn]*unansConn, len(d.conns))
	for k, uc := range d.conns {
		cu := *uc // Findings only reads the tail, then drops it from the copy
		c.conns[k] = &cu
	}
	c.warn = make(map[netip.AddrPort]*unansGroup, len(d.warn))
	for k, g := range d.warn {
		c.warn[k] = g.clone()
	}
	c.info = *d.info.clone()
	return c.Findings(env)
}

// clone copies a group deeply enough that adding to either, or sorting
// its requests, leaves the other as it was.
func (g *unansGroup) clone() *unansGroup {
	c := *g
	c.byAPI = maps.Clone(g.byAPI)
	c.clientIDs = maps.Clone(g.clientIDs)
	c.conns.list = slices.Clone(g.conns.list)
	c.conns.seen = maps.Clone(g.conns.seen)
	c.reqs = slices.Clone(g.reqs)
	return &c
}

func (d *unanswered) warning(env *Env, g *unansGroup) Finding {
	server := g.server.String()
	if env.Nodes != nil {
		server = env.Nodes.Label(g.server, true)
	}
	apis := opsSortedAPIs(g.byAPI)
	ids := text.SortedKeys(g.clientIDs)
	o := g.oldest
	summary := fmt.Sprintf("%d request(s) to %s never answered (%s) on %d connection(s); oldest %s at %s",
		g.n, server, opsAPICounts(g.byAPI, apis), len(g.conns.list)+g.conns.more, decode.Name(o.key), text.Clock(o.t))
	var why []string
	if n := g.reasons[unansOvertaken]; n > 0 {
		why = append(why, fmt.Sprintf("%d overtaken: a later request on the same connection was answered, and "+
			"Kafka answers a connection's requests in order, so they never will be (the broker dropped them, or "+
			"the capture missed their responses)", n))
	}
	if n := g.reasons[unansExpired]; n > 0 {
		why = append(why, fmt.Sprintf("%d still unanswered when the capture ended, longer than a broker may take "+
			"(%s, more for a Fetch's MaxWaitMillis or a group's rebalance timeout)", n, text.Duration(d.grace)))
	}
	if n := g.reasons[unansClosed]; n > 0 {
		why = append(why, fmt.Sprintf("%d still unanswered, past that allowance, when their connection closed "+
			"(what a client does when its request.timeout.ms expires)", n))
	}
	until := map[int]string{unansOvertaken: "until a later one was answered", unansExpired: "until the capture ended",
		unansClosed: "until its connection closed"}[g.oldestWhy]
	expl := fmt.Sprintf("%s got %d request(s) it did not answer, from client id(s) %s: %s. The oldest, %s, was sent "+
		"at %s and waited %s %s.", server, g.n, strings.Join(text.Quote(ids), ", "),
		strings.Join(why, "; "), o.desc, text.Clock(o.t), text.Duration(o.waited), until)
	next := fmt.Sprintf("kfsniff -r <capture> --frames --conn %d shows the oldest request and what the connection "+
		"carried after it. On the broker, check the request queue and handler threads (RequestQueueTimeMs, "+
		"RequestHandlerAvgIdlePercent, NetworkProcessorAvgIdlePercent) and its log at %s; on the client, "+
		"request.timeout.ms and disconnect messages.", o.conn.ID, text.Clock(o.t))
	counts := map[string]int64{"requests": g.n, "connections": int64(len(g.conns.list) + g.conns.more)}
	for i := unansOvertaken; i <= unansClosed; i++ {
		counts[unansReasonNames[i]] = g.reasons[i]
	}
	return Finding{
		Severity: Warning,
		Summary:  summary,
		First:    g.first,
		Last:     g.last,
		Conns:    g.conns.ids(),
		Nodes:    g.conns.nodes(env.Nodes),
		Counts:   counts,
		Fields: map[string]any{
			"server":        g.server.String(),
			"apis":          apis,
			"by_api":        g.byAPI,
			"client_ids":    ids,
			"clients":       g.conns.clients(),
			"oldest_api":    decode.Name(o.key),
			"oldest_packet": o.ev.Packet,
		},
		Evidence:    g.evidence(),
		Explanation: expl,
		Next:        next,
	}
}

// infoFinding lists the requests that may yet have been answered, leaving
// out a group of nothing but pending long polls.
func (d *unanswered) infoFinding(env *Env) (Finding, bool) {
	g := &d.info
	if g.n == g.reasons[unansLongPoll] {
		return Finding{}, false
	}
	apis := opsSortedAPIs(g.byAPI)
	var parts []string
	if n := g.reasons[unansInFlight]; n > 0 {
		parts = append(parts, fmt.Sprintf("In flight: %d sent less than %s (or a Fetch's MaxWaitMillis, a group's "+
			"rebalance timeout, more) before the capture ended or their connection closed, too soon to call them "+
			"unanswered", n, text.Duration(d.grace)))
	}
	if n := g.reasons[unansLongPoll]; n > 0 {
		parts = append(parts, fmt.Sprintf("Long polls: %d Fetch, JoinGroup or SyncGroup requests within the time "+
			"the broker may hold them", n))
	}
	if n := g.reasons[unansOneSided]; n > 0 {
		parts = append(parts, fmt.Sprintf("One-sided: %d on connections of which the capture holds not one packet "+
			"from the server (a one-sided, filtered or sampled capture), so whether they were answered cannot be told", n))
	}
	if n := g.reasons[unansGaps]; n > 0 {
		parts = append(parts, fmt.Sprintf("Capture gaps: %d on connections that lost segments in the capture, "+
			"where their responses may have been lost", n))
	}
	o := g.oldest
	summary := fmt.Sprintf("%d request(s) without a response that may yet have been answered (%s)", g.n,
		opsAPICounts(g.byAPI, apis))
	expl := fmt.Sprintf("%d request(s) have no response in the capture, but that does not show that the broker "+
		"failed to answer. %s. The oldest, %s, was sent at %s, %s before the capture ended or its connection closed.",
		g.n, strings.Join(parts, ". "), o.desc, text.Clock(o.t), text.Duration(o.waited))
	counts := map[string]int64{"requests": g.n, "connections": int64(len(g.conns.list) + g.conns.more)}
	for i := unansInFlight; i < unansReasons; i++ {
		counts[unansReasonNames[i]] = g.reasons[i]
	}
	return Finding{
		Severity: Info,
		Summary:  summary,
		First:    g.first,
		Last:     g.last,
		Conns:    g.conns.ids(),
		Nodes:    g.conns.nodes(env.Nodes),
		Counts:   counts,
		Fields: map[string]any{
			"apis":          apis,
			"by_api":        g.byAPI,
			"servers":       g.conns.servers(),
			"oldest_api":    decode.Name(o.key),
			"oldest_packet": o.ev.Packet,
		},
		Evidence:    g.evidence(),
		Explanation: expl,
		Next: "Capture longer (past the requests' timeouts) and on both directions of the connections " +
			"(tcpdump -i <iface> 'tcp port 9092', no sampling) to see whether they are answered.",
	}, true
}

func opsSortedAPIs(by map[string]int64) []string {
	out := make([]string, 0, len(by))
	for k := range by {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// opsAPICounts renders "Produce 10, Metadata 2", most first.
func opsAPICounts(by map[string]int64, names []string) string {
	names = append([]string(nil), names...)
	sort.SliceStable(names, func(i, j int) bool { return by[names[i]] > by[names[j]] })
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, by[n])
	}
	return text.List(parts, 4)
}
