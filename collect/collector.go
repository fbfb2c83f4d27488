// Package collect counts a run for its report: the flows handlers that
// gather per-API counts (CountRequest and CountExchange, shared with the
// terminal UI and the metrics), the client inventory, consumers' and
// followers' lag, the timeline of the HTML charts and connection events,
// and Build, which makes them, with the analyzer's state and the
// findings, into a report.Report that package report renders.
package collect

import (
	"cmp"
	"maps"
	"slices"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/report"
)

// Collector gathers per-API counts and connection events from the
// analyzer's handlers; Build turns them into a Report.
type Collector struct {
	apis   map[apiKey]*APICounts
	events []report.Event
	// counts of events by kind, for the totals.
	refused, unansweredSYN int64
	inv                    *inventory // clients[] (clients.go)
	lag                    LagCollector
	timeline               timeline // report.Report.Timeline (timeline.go)
}

type apiKey struct{ key, version int16 }

// connCache keeps a value per connection in the slot of its number
// (ConnInfo.ID, dense from 1 in order of opening) modulo connCacheSlots,
// tagged with it: an index into a slice where a map of thousands costs a
// cache miss a request. Fixed, allocated at first use, so that a live
// capture numbering 50 new connections a second does not grow it for
// hours (TestConnCachesFixed); connections sending at once share a slot
// only 4096 openings apart.
type connCache[V any] []connSlot[V]

type connSlot[V any] struct {
	id int
	v  V
}

const connCacheSlots = 1 << 12

// slot is the slot of connection id, its value id's when slot.id is.
func (c *connCache[V]) slot(id int) *connSlot[V] {
	if *c == nil {
		*c = make(connCache[V], connCacheSlots)
	}
	return &(*c)[uint(id)%connCacheSlots]
}

// maxEvents bounds the connection events listed (counts stay exact).
const maxEvents = 1000

// NewCollector returns an empty Collector.
func NewCollector() *Collector {
	c := &Collector{apis: make(map[apiKey]*APICounts), inv: newInventory()}
	c.timeline.init()
	return c
}

// unknownRow is the one API row of every (key, version) pair kmsg cannot
// decode: a pair from the wire would otherwise be a row, with its
// histogram, each (the pairs are listed, bounded, in
// Totals.UnknownAPIs). The rows of known pairs are bounded by kmsg's
// table.
var unknownRow = apiKey{-1, -1}

func (c *Collector) api(key, version int16) *APICounts {
	k := apiKey{key, version}
	if !decode.KnownVersion(key, version) {
		k = unknownRow
	}
	s := c.apis[k]
	if s == nil {
		s = &APICounts{}
		c.apis[k] = s
	}
	return s
}

// UseLag implements flows.LagUser: the report's lag (Report.Lag) is read
// from the Delivery's table.
func (c *Collector) UseLag(t *flows.LagTable) bool { return c.lag.UseLag(t) }

// OnRequest counts a request frame.
func (c *Collector) OnRequest(m *flows.Message) {
	c.inv.request(m)
	c.lag.OnRequest(m)
	c.timeline.request(m)
	CountRequest(c.api(m.Key, m.Version), m)
}

// OnExchange counts a response and its latency.
func (c *Collector) OnExchange(x *flows.Exchange) {
	c.inv.exchange(x)
	c.lag.OnExchange(x)
	if x.Resp != nil {
		c.timeline.response(x)
	}
	if x.Req == nil {
		return // unmatched: counted per connection
	}
	CountExchange(c.api(x.Req.Key, x.Req.Version), x)
}

// OnConnEvent records refused and unanswered connection attempts.
func (c *Collector) OnConnEvent(e *flows.ConnEvent) {
	switch e.Kind {
	case flows.ConnRefused:
		c.refused++
	case flows.ConnUnanswered:
		c.unansweredSYN++
	default:
		return
	}
	if len(c.events) < maxEvents {
		c.events = append(c.events, report.Event{
			Kind: e.Kind.String(), Client: e.Client.String(), Server: e.Server.String(),
			File: e.File, Packet: e.Packet, Time: e.Time, Attempts: e.Attempts,
		})
	}
}

// Build assembles the report from the collector, the analyzer's state, the
// inputs and the findings.
func (c *Collector) Build(files []report.File, st *flows.Stats, conns []*flows.Conn, nodes *cluster.Nodes, findings []detectors.Finding) *report.Report {
	r := &report.Report{Schema: report.Schema, Findings: findings, Events: c.events}
	if r.Findings == nil {
		r.Findings = []detectors.Finding{}
	}
	if r.Events == nil {
		r.Events = []report.Event{}
	}
	r.Capture = report.Capture{Files: files, Packets: st.Packets, Bytes: st.Bytes, First: st.FirstTime, Last: st.LastTime}
	if !st.FirstTime.IsZero() {
		r.Capture.Duration = st.LastTime.Sub(st.FirstTime).Seconds()
	}
	t := &r.Totals
	t.TCPPackets = st.TCPPackets
	t.KafkaConnections = len(conns) + st.Evicted.Conns
	t.OtherTCP = st.OtherTCP
	t.NonIP, t.NonTCP, t.Fragments, t.Truncated, t.BadPackets = st.NonIP, st.NonTCP, st.Fragments, st.Truncated, st.BadPackets
	t.Reassembled, t.FragmentBytesLost = st.Reassembled, st.FragLostBytes
	t.FirstBadPacket, t.InternalErrors, t.FirstInternalError = problemAt(st.FirstBad), st.InternalErrors, problemAt(st.FirstInternal)
	t.FingerprintsDropped = st.KeptDropped
	t.DatagramsLost = map[string]int64{}
	maps.Copy(t.DatagramsLost, st.FragLost)
	t.RefusedConnections, t.UnansweredSYNs = c.refused, c.unansweredSYN
	t.SkippedBytes = map[string]int64{}
	for k, n := range st.UnknownAPIs {
		t.UnknownAPIs = append(t.UnknownAPIs, report.UnknownAPI{Key: k.Key, Version: k.Version, Count: n})
	}
	slices.SortFunc(t.UnknownAPIs, func(a, b report.UnknownAPI) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Version, b.Version))
	})
	if t.UnknownAPIs == nil {
		t.UnknownAPIs = []report.UnknownAPI{}
	}
	t.BoundsReached = map[string]int64{}
	bound := func(name string, n int64) {
		if n > 0 {
			t.BoundsReached[name] += n
		}
	}
	bound("unknown_apis_not_listed", st.UnknownAPIsNotListed)
	if nodes != nil {
		d := nodes.Dropped()
		bound("node_ids_dropped", d.IDs)
		bound("node_endpoints_dropped", d.Endpoints)
		bound("topic_ids_dropped", d.Topics)
		bound("metadata_brokers_dropped", d.Brokers)
	}
	// The connections table (MaxConns) and the quiet connections
	// remembered for resumption.
	// Connections closed for longer than KeepClosed (live) are folded
	// too, but not for a bound: counted apart (ClosedFolded).
	ev := &st.Evicted
	full := max(0, ev.Conns-ev.Aged)
	bound("connections_not_listed", int64(full))
	bound("idle_connections_forgotten", st.IdleForgotten)
	t.EvictedConnections, t.ClosedFolded, t.IdleEvicted = full, ev.Aged, st.IdleEvicted
	// The counts of the connections listed and of those folded (ev).
	all := *ev
	all.Skipped = maps.Clone(ev.Skipped)
	r.Connections = make([]report.Connection, 0, len(conns))
	for _, cn := range conns {
		all.Fold(cn)
		if _, ok := cn.OneSided(); ok {
			t.OneSidedConnections++
		}
		r.Connections = append(r.Connections, connection(cn, nodes))
	}
	t.Requests = int64(all.Requests)
	t.Responses = int64(all.Responses)
	t.ErrorResponses = int64(all.ErrorResponses)
	t.UnmatchedResponses = int64(all.Unmatched)
	t.UnansweredRequests = int64(all.Unanswered)
	t.NoResponseExpected = int64(all.NoResponse)
	t.NotCaptured = int64(all.NotCaptured)
	t.DecodeErrors = int64(all.DecodeErrs)
	t.FramingErrors = int64(all.FramingErrors)
	t.Gaps = int64(all.Gaps)
	t.LostBytes = all.Lost
	maps.Copy(t.SkippedBytes, all.Skipped)
	noteLoss(r.Findings, conns)
	r.Incidents = report.Incidents(r.Findings)
	r.Clients, r.ClientsNotListed = c.inv.build(nodes), c.inv.cut
	r.Lag, r.LagDropped = c.lag.Rows(nodes), c.lag.Dropped()
	r.Timeline = c.timeline.build(nodes)
	keys := slices.SortedFunc(maps.Keys(c.apis), func(a, b apiKey) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.version, b.version))
	})
	r.APIs = make([]report.API, 0, len(keys))
	for _, k := range keys {
		s := c.apis[k]
		name := decode.Name(k.key)
		if k == unknownRow {
			name = report.UnknownAPIName
		}
		a := report.API{
			Key: k.key, Name: name, Version: k.version,
			Requests: s.Requests, Responses: s.Responses, ErrorResponses: s.ErrorResponses,
			DecodeErrors: s.DecodeErrors, Unanswered: s.Unanswered, Errors: map[string]int64{},
			Latency: report.Latency{P50: report.Millis(s.Latency.Quantile(0.5)), P99: report.Millis(s.Latency.Quantile(0.99)), Max: report.Millis(s.Latency.Max())},
		}
		for code, n := range s.Errors {
			a.Errors[ErrorName(code)] += n
		}
		r.APIs = append(r.APIs, a)
	}
	return r
}

func connection(c *flows.Conn, nodes *cluster.Nodes) report.Connection {
	out := report.Connection{
		ID: c.ID, Agent: c.Agent, Client: c.Client.String(), Server: c.Server.String(),
		Recognised: string(c.Recognised), ClientBy: string(c.ClientBy),
		Handshake: c.Handshake, MidStream: c.MidStream, TLS: c.TLS, TLSSession: connTLS(c.TLSInfo),
		ClientIDs: append([]string{}, c.ClientIDs...), APIs: map[string]int{},
		Requests: c.Requests, Responses: c.Responses, Errors: c.ErrorResponses,
		Unmatched: c.Unmatched, Unanswered: c.Unanswered, NoResponse: c.NoResponse, NotCaptured: c.NotCaptured,
		BytesToServer: c.Bytes[flows.ToServer], BytesToClient: c.Bytes[flows.ToClient],
		File: c.File, FirstPacket: c.FirstPacket, LastPacket: c.LastPacket,
		FirstSeen: c.FirstSeen, LastSeen: c.LastSeen,
		Gaps: c.Gaps, FramingErrors: c.FramingErrors, DecodeErrors: c.DecodeErrors,
		DatagramsLost: c.FragLost, FragBytesLost: c.FragLostBytes,
		Closed: c.Closed, Reset: c.Reset,
	}
	for _, a := range c.APIs {
		name := decode.Name(a.Key)
		if a.Key == flows.UnknownKey {
			name = report.UnknownAPIName
		}
		out.APIs[name] += a.N
	}
	if d, ok := c.OneSided(); ok {
		out.OneSided = "client->server"
		if d == flows.ToClient {
			out.OneSided = "server->client"
		}
	}
	if c.Gaps > 0 {
		out.Loss = &report.Loss{
			ToServer: c.Lost[flows.ToServer], ToClient: c.Lost[flows.ToClient], Snaplen: c.Cut[0] + c.Cut[1],
			File: c.FirstGap.File, FirstPacket: c.FirstGap.Packet, LastPacket: c.LastGap.Packet,
			First: c.FirstGap.Time, Last: c.LastGap.Time,
		}
	}
	out.Roles = []string{}
	for _, role := range c.Roles.List() {
		out.Roles = append(out.Roles, role.String())
	}
	if nodes != nil {
		if id := nodes.Host(c.Client.Addr()); id >= 0 {
			out.ClientNode = &id
		}
		if id := nodes.Server(c.Server); id >= 0 {
			out.ServerNode = &id
		}
	}
	if len(c.Skipped) > 0 {
		out.SkippedBytes = maps.Clone(c.Skipped)
	}
	for _, p := range c.Problems {
		out.Problems = append(out.Problems, report.Problem{File: p.File, Packet: p.Packet, What: p.What})
	}
	return out
}

// noteLoss marks the findings whose span overlaps the gaps of one of their
// connections (detectors.CaptureLoss).
func noteLoss(findings []detectors.Finding, conns []*flows.Conn) {
	byID := make(map[int]*flows.Conn, len(conns))
	for _, c := range conns {
		if c.Gaps > 0 {
			byID[c.ID] = c
		}
	}
	if len(byID) == 0 {
		return
	}
	for i := range findings {
		f := &findings[i]
		var loss detectors.CaptureLoss
		for _, id := range f.Conns {
			c := byID[id]
			if c == nil || c.LastGap.Time.Before(f.First) || !f.Last.IsZero() && c.FirstGap.Time.After(f.Last) {
				continue
			}
			loss.Conns = append(loss.Conns, id)
			loss.Gaps += c.Gaps
			loss.Bytes += c.Lost[0] + c.Lost[1]
		}
		if len(loss.Conns) > 0 {
			f.CaptureLoss = &loss
		}
	}
}

// problemAt is p for the report, nil if there is none.
func problemAt(p flows.Problem) *report.Problem {
	if p.Packet == 0 {
		return nil
	}
	return &report.Problem{File: p.File, Packet: p.Packet, What: p.What}
}
