// Package throttled reports responses with throttleTimeMs > 0: a broker
// throttled a client that exceeds a quota (produce or fetch bytes per
// second, request time percentage, controller mutations), and the
// response says how long the client must wait. Throttling is reported per
// client id and API, since quotas are set per user and client id: a
// warning when it happened MinResponses times or added up to MinTotal,
// otherwise (one short throttle, a burst at start-up) info.
package throttled

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "throttled",
	Severity: detectors.Warning,
	Doc: "Responses with throttleTimeMs > 0: a broker throttled a client for exceeding a quota. " +
		"Per client id and API: how many responses, the longest and the total throttle time; a " +
		"warning from min-responses throttled responses or min-total in all, info below.",
}, Params{MinResponses: 3, MinTotal: time.Second}, New)

// Params are the rule's thresholds.
type Params struct {
	MinResponses int           `param:"min-responses" doc:"throttled responses of one client id and API that make a warning"`
	MinTotal     time.Duration `param:"min-total" unit:"ms" alias:"min-total-ms" doc:"total throttle time of one client id and API that makes a warning"`
}

// maxGroups bounds the client id and API pairs tracked; more are counted
// together.
const maxGroups = 1024

// New makes the rule.
func New(p Params) detectors.Rule {
	return &rule{p: Params{MinResponses: max(p.MinResponses, 1), MinTotal: p.MinTotal}, groups: map[key]*group{}}
}

type rule struct {
	p       Params
	groups  map[key]*group
	dropped int64
}

type key struct {
	clientID string
	api      int16
}

type group struct {
	key         key
	n           int64
	total, max  time.Duration
	maxAt       detectors.Evidence
	first, last time.Time
	after       bool // the broker throttles after the response (KIP-219)
	before      bool // the response itself was held back
	versions    map[int16]bool
	conns       tally.Conns
	ev          detectors.Sampler[detectors.Evidence]
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Req == nil || x.Resp == nil || x.Resp.Resp == nil {
		return
	}
	tr, ok := x.Resp.Resp.(kmsg.ThrottleResponse)
	if !ok {
		return
	}
	ms, after := tr.Throttle()
	if ms <= 0 {
		return
	}
	k := key{x.Req.ClientID, x.Req.Key}
	g := r.groups[k]
	if g == nil {
		if len(r.groups) >= maxGroups {
			r.dropped++
			return
		}
		g = &group{key: k, versions: map[int16]bool{}}
		r.groups[k] = g
	}
	d := time.Duration(ms) * time.Millisecond
	t := x.Resp.Time
	if g.n == 0 {
		g.first = t
	}
	g.n++
	g.last = t
	g.total += d
	ev := detectors.EvidenceAt(x.Resp, x.Req.Name()+" v"+itoa(int(x.Resp.Version))+" response throttleTimeMs "+itoa(int(ms)))
	if d > g.max {
		g.max, g.maxAt = d, ev
	}
	if after {
		g.after = true
	} else {
		g.before = true
	}
	g.versions[x.Resp.Version] = true
	g.conns.Add(x.Conn)
	g.ev.Add(ev)
}

// Findings implements detectors.Rule: one per client id and API.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	groups := make([]*group, 0, len(r.groups))
	for _, g := range r.groups {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		if a.key.clientID != b.key.clientID {
			return a.key.clientID < b.key.clientID
		}
		return a.key.api < b.key.api
	})
	out := make([]detectors.Finding, 0, len(groups))
	for _, g := range groups {
		out = append(out, r.finding(p, g))
	}
	return out
}

func (r *rule) finding(p *detectors.Pass, g *group) detectors.Finding {
	f := &Finding{
		ClientID: g.key.clientID, API: decode.Name(g.key.api), Clients: g.conns.Clients(), Servers: g.conns.Servers(),
		Quota: quota(g.key.api), AfterResponse: g.after,
		key: g.key.api, n: g.n, total: g.total, max: g.max, first: g.first, last: g.last, before: g.before,
		serverLabels: g.conns.ServerLabels(p.Nodes), dropped: r.dropped, p: r.p,
	}
	for v := range g.versions {
		f.Versions = append(f.Versions, int(v))
	}
	sort.Ints(f.Versions)
	sev := detectors.Info
	if g.n >= int64(r.p.MinResponses) || g.total >= r.p.MinTotal {
		sev = detectors.Warning
	}
	f.warning = sev == detectors.Warning
	ev := g.ev.List()
	if !hasPacket(ev, g.maxAt) {
		ev = append(ev, g.maxAt)
		detectors.SortEvidence(ev)
	}
	return detectors.Finding{
		Severity: sev,
		First:    g.first,
		Last:     g.last,
		Conns:    g.conns.IDs(),
		Nodes:    g.conns.Nodes(p.Nodes),
		Counts: map[string]int64{
			"throttled_responses": g.n,
			"throttle_ms_total":   g.total.Milliseconds(),
			"throttle_ms_max":     g.max.Milliseconds(),
		},
		Evidence: ev,
		Subject:  detectors.Subject{ClientIDs: []string{g.key.clientID}, Clients: g.conns.ClientAddrs(), Servers: g.conns.ServerAddrs()},
		Detail:   f,
	}
}

// quota names the quota most likely behind a throttled API.
func quota(api int16) string {
	switch kmsg.Key(api) {
	case kmsg.Produce:
		return "producer_byte_rate"
	case kmsg.Fetch:
		return "consumer_byte_rate"
	case kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.CreatePartitions:
		return "controller_mutation_rate"
	}
	return "request_percentage"
}

// metric is the quota metric's type for an API.
func metric(api int16) string {
	switch kmsg.Key(api) {
	case kmsg.Produce:
		return "Produce"
	case kmsg.Fetch:
		return "Fetch"
	case kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.CreatePartitions:
		return "ControllerMutation"
	}
	return "Request"
}

func hasPacket(ev []detectors.Evidence, e detectors.Evidence) bool {
	for _, x := range ev {
		if x.File == e.File && x.Packet == e.Packet {
			return true
		}
	}
	return false
}
