// Package unansweredrequests reports requests that got no response. Every request
// is given an allowance, the time a healthy broker may take to answer it:
// Grace, plus MaxWaitMillis for a Fetch (a long poll is answered when data
// arrives or the wait expires), plus the rebalance timeout for a JoinGroup
// (held until every member has joined) and for a SyncGroup (held until the
// leader sends the assignment).
//
// A request is unanswered (warning) when
//   - a later request on its connection was answered ("overtaken": Kafka
//     answers a connection's requests in order, so it never will be), or
//   - it waited past its allowance and the capture ended ("expired") or
//     the connection closed ("closed", what a client does when its
//     request.timeout.ms expires).
//
// The finding of a server is graded by what clients felt (detectors.Grade):
// how long its longest unanswered request waited beyond what the broker may
// hold it (a Fetch's MaxWaitMillis, a group's rebalance timeout), until it
// was overtaken, its connection closed or the capture ended. Info under 3 s
// (a request dropped and retried at once); a warning from 3 s; an error
// from 30 s, or from 10 s for a request still waiting when the capture
// ended.
//
// A request whose allowance had not run out when the capture ended or its
// connection closed is in flight, not unanswered: the long poll pending at
// the end of every consumer capture is not mentioned at all, other
// requests are listed at info. So are requests on connections whose server
// side the capture never saw (not one packet: a one-sided or sampled
// capture) or that lost segments in the capture: there the response may
// exist and not have been captured.
package unansweredrequests

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
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "unanswered-requests",
	Recorded: []string{"fixtures/pcaps/clients/unanswered-kgo.pcap", "fixtures/pcaps/clients/unanswered-sarama.pcap"},
	Severity: detectors.Error,
	// Generic: a throttled finding for the same client and broker explains
	// its waits (Subject.Waits).
	Generic: true,
	Doc: "Requests that got no response: overtaken by the answer to a later request on the same " +
		"connection, or still waiting, past their allowance (grace, plus MaxWaitMillis for a Fetch long " +
		"poll, plus the rebalance timeout for JoinGroup and SyncGroup), when the capture ended or the " +
		"connection closed. Per broker: count, APIs, connections, the oldest request, graded by how long the " +
		"longest waited beyond what the broker may hold it: info under 3 s, warning from 3 s, error from 30 s or " +
		"from 10 s still waiting at the end. Requests still within their allowance at the end are in flight " +
		"(info; a pending long poll is not reported). Generic: a throttled finding for the same client ids at the same broker, at least as severe, explains its waits, and it drops to info.",
}, Params{Grace: time.Second}, New)

// Params are the rule's thresholds.
type Params struct {
	Grace time.Duration `param:"grace" unit:"s" alias:"grace-s" doc:"how long any request may wait for its response before it counts as unanswered, on top of a Fetch's MaxWaitMillis or a group's rebalance timeout"`
}

const (
	// maxTail bounds the requests kept per connection while their fate
	// is open; older ones beyond it count as unanswered.
	maxTail = 1024
	// maxGroupIDs bounds the client ids a group names.
	maxGroupIDs = 64
	// defaultMaxWait is assumed for a Fetch whose body was lost.
	defaultMaxWait = 500 * time.Millisecond
	// maxEvidenceReqs bounds the requests a group keeps for evidence.
	maxEvidenceReqs = 4096
	// maxConns bounds the connections whose state the rule keeps (their
	// last MaxWaitMillis and rebalance timeout, their unanswered tail).
	// Past it the oldest is forgotten, its tail settled then: a
	// connection's state is refreshed by its next Fetch or JoinGroup, so
	// forgetting it costs only the hold of a SyncGroup, or of a Fetch
	// whose body the capture lost, that follows before the next one. It
	// also stops the state pinning connections flows has already
	// dropped from its own table (flows.Config.MaxConns, 100,000 by
	// default), which it would for the whole run without a bound.
	maxConns = 1 << 16
)

// Why a request is counted.
const (
	overtaken = iota // a later request on the connection was answered
	expired          // waited past its allowance until the capture ended
	closed           // waited past its allowance until the connection closed
	inFlight         // allowance not run out at the end or at the close
	longPoll         // a Fetch or group request within its wait: normal
	oneSided         // the capture has no packet from the server
	gaps             // the connection lost segments in the capture
	reasons
)

var reasonNames = [reasons]string{"overtaken", "expired", "closed", "in_flight", "long_poll", "one_sided", "capture_gaps"}

// New makes the rule.
func New(p Params) detectors.Rule {
	return &rule{p: p, conns: make(map[tally.ConnKey]*conn), warn: make(map[netip.AddrPort]*Group)}
}

// Cut implements detectors.Bounded: requests whose client id was not
// named, past maxGroupIDs in their group.
func (r *rule) Cut() map[string]int64 {
	n := r.info.idsNotNamed
	for _, g := range r.warn {
		n += g.idsNotNamed
	}
	return map[string]int64{"client_ids_not_named": n, "connections_forgotten": r.forgotten}
}

type rule struct {
	p Params
	// conns is keyed by value, so that it pins no connection record.
	conns map[tally.ConnKey]*conn
	// order is conns' keys in the order they were added, a ring of at
	// most maxConns from head: the oldest is forgotten first.
	order     []tally.ConnKey
	head      int
	forgotten int64 // connections forgotten at maxConns
	// waited has a connection's bit set once a request of it went
	// unanswered (its conn's tail was not empty): an answer on a
	// connection without it has no tail to settle, found without the
	// lookup in conns that missed the cache at every exchange.
	waited tally.ConnBits
	// warn groups unanswered requests by server; info gathers those
	// that are in flight or whose responses the capture may have missed.
	warn map[netip.AddrPort]*Group
	info Group
}

// conn is what is known of one connection.
type conn struct {
	// tail holds the unanswered requests since the last answered one.
	tail []Request
	// evicted is the oldest request dropped from a full tail (counted
	// overtaken at once), its wait settled at the end: it waited until
	// the connection closed or the capture ended.
	evicted   Request
	rebalance time.Duration // last JoinGroup's rebalance timeout
	maxWait   time.Duration // last Fetch's MaxWaitMillis
}

// info is the connection of a conn with requests open.
func (uc *conn) info() *flows.ConnInfo {
	if uc.evicted.Conn != nil {
		return uc.evicted.Conn
	}
	return uc.tail[0].Conn
}

// Request is a request without a response.
type Request struct {
	Key      int16
	At       time.Time
	allow    time.Duration
	Hold     time.Duration // of the allowance, what the broker may hold it
	longPoll bool          // the allowance includes a server-side wait
	lossy    bool          // its connection had lost segments by then
	Evidence detectors.Evidence
	Desc     string        // "Produce v9 corr 12 (packet 40)"
	Waited   time.Duration // until overtaken, the capture's end or the close; -1 until known
	Conn     *flows.ConnInfo
	clientID string
}

// Group is requests counted together: to one server, or the info ones.
type Group struct {
	server      netip.AddrPort
	N           int64
	Reasons     [reasons]int64
	byAPI       map[string]int64
	clientIDs   map[string]bool // at most maxGroupIDs
	idsNotNamed int64           // requests of further client ids
	conns       tally.Conns
	first, last time.Time
	Oldest      Request
	OldestWhy   int
	reqs        []Request // for evidence in time order, bounded
	// longest is the request that waited longest beyond its hold, felt
	// that wait; sev is the worst of the requests' grades.
	Longest  Request
	Felt     time.Duration
	Severity detectors.Severity
	ongoing  bool // some request still waiting when the capture ended
}

func (g *Group) add(r Request, reason int) {
	if g.byAPI == nil {
		g.byAPI = make(map[string]int64)
		g.clientIDs = make(map[string]bool)
	}
	g.N++
	g.Reasons[reason]++
	if decode.KnownKey(r.Key) {
		g.byAPI[decode.Name(r.Key)]++
	} else {
		g.byAPI["unknown"]++ // one entry for the keys from the wire kmsg does not know
	}
	if len(g.clientIDs) < maxGroupIDs || g.clientIDs[r.clientID] {
		g.clientIDs[r.clientID] = true
	} else {
		g.idsNotNamed++
	}
	g.conns.Add(r.Conn)
	if g.N == 1 || r.At.Before(g.first) {
		g.first = r.At
		g.Oldest, g.OldestWhy = r, reason
	}
	if r.At.After(g.last) {
		g.last = r.At
	}
	if len(g.reqs) < maxEvidenceReqs {
		g.reqs = append(g.reqs, r)
	}
	g.grade(r, reason)
}

// grade takes in how long r waited, why it counts.
func (g *Group) grade(r Request, reason int) {
	felt := max(r.Waited-r.Hold, 0)
	if g.Longest.Conn == nil || felt > g.Felt {
		g.Longest, g.Felt = r, felt
	}
	g.Severity = max(g.Severity, detectors.Grade(felt, reason == expired))
	g.ongoing = g.ongoing || reason == expired
}

// evidence returns the requests' packets: the oldest first, then a spread.
func (g *Group) evidence() []detectors.Evidence {
	sort.SliceStable(g.reqs, func(i, j int) bool { return g.reqs[i].At.Before(g.reqs[j].At) })
	var s detectors.Sampler[detectors.Evidence]
	s.Add(g.Oldest.Evidence)
	for _, r := range g.reqs {
		if r.Evidence != g.Oldest.Evidence {
			s.Add(r.Evidence)
		}
	}
	return s.List()
}

// clone copies a group deeply enough that adding to either, or sorting
// its requests, leaves the other as it was.
func (g *Group) clone() *Group {
	c := *g
	c.byAPI = maps.Clone(g.byAPI)
	c.clientIDs = maps.Clone(g.clientIDs)
	c.conns = g.conns.Clone()
	c.reqs = slices.Clone(g.reqs)
	return &c
}

// conn returns c's state, made if new; at maxConns the oldest
// connection's is forgotten first (forget).
func (r *rule) conn(p *detectors.Pass, c *flows.ConnInfo) *conn {
	k := tally.KeyOf(c)
	uc := r.conns[k]
	if uc != nil {
		return uc
	}
	if len(r.order) < maxConns {
		r.order = append(r.order, k)
	} else {
		r.forget(p, r.order[r.head])
		r.order[r.head] = k
		r.head = (r.head + 1) % maxConns
	}
	uc = &conn{}
	r.conns[k] = uc
	return uc
}

// forget drops c's state, settling its unanswered requests as they stand:
// they waited until now, the connection neither closed nor seen to lose
// segments so far (Findings settles the others from its final counters).
func (r *rule) forget(p *detectors.Pass, k tally.ConnKey) {
	if uc := r.conns[k]; uc != nil {
		r.settle(uc, ending{at: p.End})
		delete(r.conns, k)
		r.forgotten++
	}
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(p *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.NoResponse || x.Again {
		return // Again: this exchange was counted with another partition
	}
	c := x.Conn
	switch kmsg.Key(x.Req.Key) {
	case kmsg.JoinGroup:
		if j, ok := x.Req.Req.(*kmsg.JoinGroupRequest); ok {
			uc := r.conn(p, c)
			uc.rebalance = time.Duration(j.RebalanceTimeoutMillis) * time.Millisecond
			if j.Version == 0 || j.RebalanceTimeoutMillis <= 0 {
				uc.rebalance = time.Duration(j.SessionTimeoutMillis) * time.Millisecond
			}
		}
	case kmsg.Fetch:
		// Kept for a later Fetch whose body is lost in the capture.
		if w, ok := decode.MaxWait(x.Req.Req); ok {
			r.conn(p, c).maxWait = w
		}
	}
	if x.OneSided {
		// No packet from the server in the capture: whether it was
		// answered cannot be told. It waited until the end (settled in
		// Findings).
		q := r.request(x)
		q.Waited = -1
		r.info.add(q, oneSided)
		return
	}
	if !x.Unanswered {
		// Kafka answers in order: whatever waits before this request
		// on the connection will not be answered.
		if c.ID > 0 && !r.waited.Has(c.ID) {
			return
		}
		if uc := r.conns[tally.KeyOf(c)]; uc != nil && len(uc.tail) > 0 {
			for _, q := range uc.tail {
				q.Waited = x.Resp.Time.Sub(q.At)
				if x.ConnGaps > 0 {
					// The response may be in the bytes lost.
					r.info.add(q, gaps)
				} else {
					r.warnGroup(q).add(q, overtaken)
				}
			}
			uc.tail = uc.tail[:0]
		}
		return
	}
	q := r.request(x)
	uc := r.conn(p, c)
	if len(uc.tail) >= maxTail {
		// A connection with this many unanswered requests is broken
		// whatever becomes of the rest.
		uc.tail[0].Waited = q.At.Sub(uc.tail[0].At) // so far
		r.warnGroup(uc.tail[0]).add(uc.tail[0], overtaken)
		if uc.evicted.Conn == nil {
			uc.evicted = uc.tail[0]
		}
		copy(uc.tail, uc.tail[1:])
		uc.tail = uc.tail[:len(uc.tail)-1]
	}
	uc.tail = append(uc.tail, q)
	r.waited.Set(c.ID)
}

// request describes an unanswered request with its allowance.
func (r *rule) request(x *detectors.Exchange) Request {
	m := x.Req
	q := Request{Key: m.Key, At: m.Time, allow: r.p.Grace, Conn: x.Conn, clientID: m.Client.ID, lossy: x.ConnGaps > 0}
	uc := r.conns[tally.KeyOf(x.Conn)]
	switch kmsg.Key(m.Key) {
	case kmsg.Fetch:
		wait := defaultMaxWait
		if uc != nil && uc.maxWait > 0 {
			wait = uc.maxWait
		}
		if w, ok := decode.MaxWait(m.Req); ok {
			wait = w
		}
		q.Hold = wait
		q.longPoll = true
	case kmsg.ShareFetch:
		q.Hold, _ = decode.MaxWait(m.Req)
		q.longPoll = true
	case kmsg.JoinGroup, kmsg.SyncGroup:
		// A JoinGroup has just set it from its own rebalance timeout.
		if uc != nil {
			q.Hold = max(uc.rebalance, 0)
		}
		q.longPoll = true
	}
	q.allow += q.Hold
	q.Evidence = detectors.EvidenceAt(m, fmt.Sprintf("%s v%d request corr %d, no response", m.Name(), m.Version, m.Correlation))
	q.Desc = fmt.Sprintf("%s v%d corr %d (packet %d)", m.Name(), m.Version, m.Correlation, m.Packet)
	return q
}

func (r *rule) warnGroup(q Request) *Group {
	s := q.Conn.Server
	g := r.warn[s]
	if g == nil {
		g = &Group{server: s}
		r.warn[s] = g
	}
	return g
}

// ending is how a connection ended, from its final counters (Pass.Conns).
type ending struct {
	at       time.Time // when it closed, or the capture's end
	closed   bool
	oneSided bool // not one packet from the server
	gaps     bool // lost segments in the capture
}

func endings(p *detectors.Pass) func(c *flows.ConnInfo) ending {
	live := make(map[*flows.ConnInfo]*flows.Conn, len(p.Conns))
	for _, c := range p.Conns {
		live[&c.ConnInfo] = c
	}
	return func(ci *flows.ConnInfo) ending {
		c := live[ci]
		if c == nil {
			// Not among the pipeline's connections (not expected): as
			// if still open, both ways seen.
			return ending{at: p.End}
		}
		at := p.End
		if c.Agent != "" && p.AgentEnd != nil {
			// Another host's capture, read back: it ended where its
			// agent's did, not with the last of every agent's records.
			if t, ok := p.AgentEnd(c.Agent); ok {
				at = t
			}
		}
		e := ending{at: at, oneSided: c.Packets[flows.ToClient] == 0, gaps: c.Gaps > 0}
		if c.Closed || c.Reset {
			e.at, e.closed = c.LastSeen, true
		}
		return e
	}
}

// settle counts the requests still open on a connection that ended as e
// (closed, or still open at e.at).
func (r *rule) settle(uc *conn, e ending) {
	reason := expired
	if e.closed {
		reason = closed
	}
	if q := uc.evicted; q.Conn != nil {
		// Counted when dropped; it waited on until now.
		q.Waited = e.at.Sub(q.At)
		r.warnGroup(q).grade(q, reason)
		uc.evicted = Request{}
	}
	for _, q := range uc.tail {
		q.Waited = e.at.Sub(q.At)
		switch {
		case e.oneSided:
			r.info.add(q, oneSided)
		case e.gaps || q.lossy:
			// (A connection read back from an agent's records does
			// not count its gaps: its requests say them.)
			r.info.add(q, gaps)
		case q.Waited < q.allow && q.longPoll:
			r.info.add(q, longPoll)
		case q.Waited < q.allow:
			r.info.add(q, inFlight)
		default:
			r.warnGroup(q).add(q, reason)
		}
	}
	uc.tail = nil
}

// Findings implements detectors.Rule: one warning per server with
// unanswered requests, and one info finding for those that may yet have
// been answered. It settles the requests still open.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	end := endings(p)
	// Requests of one-sided connections waited until the end.
	settle := func(q *Request) {
		if q.Waited < 0 {
			q.Waited = end(q.Conn).at.Sub(q.At)
		}
	}
	settle(&r.info.Oldest)
	for i := range r.info.reqs {
		settle(&r.info.reqs[i])
	}
	// Settle the requests still open at the end, connection by
	// connection in order.
	open := make([]*conn, 0, len(r.conns))
	for _, uc := range r.conns {
		if len(uc.tail) > 0 || uc.evicted.Conn != nil {
			open = append(open, uc)
		}
	}
	sort.Slice(open, func(i, j int) bool { return open[i].info().ID < open[j].info().ID })
	for _, uc := range open {
		r.settle(uc, end(uc.info()))
	}
	var out []detectors.Finding
	var byID map[int]*flows.Conn // the final connections by id, made once if a group needs them
	byServer := func(a, b *Group) int { return strings.Compare(a.server.String(), b.server.String()) }
	for _, g := range slices.SortedFunc(maps.Values(r.warn), byServer) {
		if g.byAPI["ApiVersions"] > 0 && byID == nil {
			byID = make(map[int]*flows.Conn, len(p.Conns))
			for _, c := range p.Conns {
				byID[c.ID] = c
			}
		}
		out = append(out, r.warning(p, g, byID))
	}
	// Leave out a group of nothing but pending long polls.
	if g := &r.info; g.N > g.Reasons[longPoll] {
		out = append(out, r.pending(p, g))
	}
	return out
}

// Snapshot implements detectors.Snapshotter: Findings settles the open
// requests into the groups, so it runs here on copies of the groups and
// of the per-connection state.
func (r *rule) Snapshot(p *detectors.Pass) []detectors.Finding {
	c := *r
	c.conns = make(map[tally.ConnKey]*conn, len(r.conns))
	for k, uc := range r.conns {
		cu := *uc // Findings only reads the tail, then drops it from the copy
		c.conns[k] = &cu
	}
	c.warn = make(map[netip.AddrPort]*Group, len(r.warn))
	for k, g := range r.warn {
		c.warn[k] = g.clone()
	}
	c.info = *r.info.clone()
	return c.Findings(p)
}

func (r *rule) warning(p *detectors.Pass, g *Group, byID map[int]*flows.Conn) detectors.Finding {
	f := &Finding{Server: g.server.String(), APIs: slices.Sorted(maps.Keys(g.byAPI)), ByAPI: g.byAPI,
		ClientIDs: text.SortedKeys(g.clientIDs), Clients: g.conns.Clients(), OldestAPI: decode.Name(g.Oldest.Key),
		OldestPacket: g.Oldest.Evidence.Packet, WaitedS: text.Seconds(g.Felt), Ongoing: g.ongoing,
		Group: g, ServerLabel: p.Label(g.server), Grace: r.p.Grace}
	if g.byAPI["ApiVersions"] > 0 {
		f.Silent, f.TLSBack = silentConns(byID, g.conns.IDs())
		switch {
		case f.Silent && f.TLSBack:
			f.NotKafka = "tls"
		case f.Silent:
			f.NotKafka = "nothing"
		}
	}
	return g.finding(p, g.Severity, overtaken, closed, []netip.AddrPort{g.server}, f)
}

// silentConns reports whether none of the connections ids (all among
// the final connections byID) carried a byte to the client but TLS
// records (tls: some did): a TLS listener's alert to a plaintext client.
func silentConns(byID map[int]*flows.Conn, ids []int) (silent, tls bool) {
	for _, id := range ids {
		c := byID[id]
		if c == nil {
			return false, false
		}
		if b := c.Bytes[flows.ToClient]; b > 0 {
			if c.Skipped["tls"] < b {
				return false, false
			}
			tls = true
		}
	}
	return len(ids) > 0, tls
}

// pending lists the requests that may yet have been answered.
func (r *rule) pending(p *detectors.Pass, g *Group) detectors.Finding {
	f := &Pending{APIs: slices.Sorted(maps.Keys(g.byAPI)), ByAPI: g.byAPI, Servers: g.conns.Servers(),
		OldestAPI: decode.Name(g.Oldest.Key), OldestPacket: g.Oldest.Evidence.Packet, Group: g, Grace: r.p.Grace}
	return g.finding(p, detectors.Info, inFlight, reasons-1, g.conns.ServerAddrs(), f)
}

// finding is the group's finding at sev, counting the reasons from first
// to last.
func (g *Group) finding(p *detectors.Pass, sev detectors.Severity, first, last int, servers []netip.AddrPort,
	d interface {
		detectors.Detail
		counted() *Counted
	}) detectors.Finding {
	c := d.counted()
	c.Requests, c.Connections = g.N, int64(g.conns.Len()+g.conns.More)
	c.ByReason = make(map[string]int64, last-first+1)
	for i := first; i <= last; i++ {
		c.ByReason[reasonNames[i]] = g.Reasons[i]
	}
	return detectors.Finding{
		Severity: sev,
		First:    g.first,
		Last:     g.last,
		Conns:    g.conns.IDs(),
		Nodes:    g.conns.Nodes(p.Nodes),
		Evidence: g.evidence(),
		Subject:  detectors.Subject{ClientIDs: text.SortedKeys(g.clientIDs), Clients: g.conns.ClientAddrs(), Servers: servers, Waits: true},
		Detail:   d,
	}
}
