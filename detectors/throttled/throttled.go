// Package throttled reports responses with throttleTimeMs > 0: a broker
// throttled a client that exceeds a quota (produce or fetch bytes per
// second, request time percentage, controller mutations), and the
// response says how long the client must wait. Throttling is reported per
// client id and API, since quotas are set per user and client id.
//
// It is graded by how long the client id was held up (detectors.Grade):
// the time covered by its throttle waits, each from its response on
// (KIP-219: the broker sends the response at once and then stops reading
// from the connection; a well-behaved client waits too), or up to its
// response for versions before KIP-219 (the broker held the response
// back), overlapping waits counted once. Info below MinTotal (3 s); a
// warning from it; an error from 30 s, or from 10 s when the client id's
// last response of that API in the capture was still throttled.
package throttled

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "throttled",
	Recorded: []string{"fixtures/pcaps/clients/throttled-kgo.pcap", "fixtures/pcaps/clients/throttled-sarama.pcap"},
	Severity: detectors.Error,
	Doc: "Responses with throttleTimeMs > 0: a broker throttled a client for exceeding a quota. " +
		"Per client id and API: how many responses, the longest and the total throttle time, and how long " +
		"the client id was held up (its throttle waits, overlapping ones counted once). Info below min-total " +
		"held up, warning from it (3 s), error from 30 s or from 10 s when still throttled at the end.",
}, Params{MinTotal: detectors.FeltAfter}, New)

// Params are the rule's thresholds.
type Params struct {
	MinTotal time.Duration `param:"min-total" unit:"ms" alias:"min-total-ms" doc:"how long one client id must be held up by throttling of one API (its throttle waits, overlapping ones once) for a warning"`
}

// maxGroups bounds the client id and API pairs tracked; more are counted
// together.
const maxGroups = 1024

// New makes the rule.
func New(p Params) detectors.Rule {
	return &rule{p: p, groups: map[key]*group{}}
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
	// held is the time covered by the throttle waits so far, coverEnd
	// where the last of them ends; throttled is false once a response
	// without throttling came after the last throttled one.
	held      time.Duration
	coverEnd  time.Time
	throttled bool
	versions  tally.IDs
	conns     tally.Conns
	ev        detectors.Sampler[detectors.Evidence]
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
	if ms <= 0 && len(r.groups) == 0 {
		return
	}
	k := key{x.Req.Client.ID, x.Req.Key}
	g := r.groups[k]
	if ms <= 0 {
		if g != nil {
			g.throttled = false // healed, until throttled again
		}
		return
	}
	if g == nil {
		if len(r.groups) >= maxGroups {
			r.dropped++
			return
		}
		g = &group{key: k, versions: tally.IDs{}}
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
	g.throttled = true
	// The wait: after the response (KIP-219), or the response held back.
	from, to := t, t.Add(d)
	if !after {
		from, to = t.Add(-d), t
	}
	switch {
	case !from.Before(g.coverEnd):
		g.held += d
		g.coverEnd = to
	case to.After(g.coverEnd):
		g.held += to.Sub(g.coverEnd)
		g.coverEnd = to
	}
	ev := detectors.EvidenceAt(x.Resp, x.Req.Name()+" v"+strconv.Itoa(int(x.Resp.Version))+" response throttleTimeMs "+strconv.Itoa(int(ms)))
	if d > g.max {
		g.max, g.maxAt = d, ev
	}
	if after {
		g.after = true
	} else {
		g.before = true
	}
	g.versions.Add(int32(x.Resp.Version))
	g.conns.Add(x.Conn)
	g.ev.Add(ev)
}

// Findings implements detectors.Rule: one per client id and API.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	return detectors.FindingsOf(maps.Values(r.groups), nil, func(a, b *group) bool {
		return a.key.clientID < b.key.clientID || a.key.clientID == b.key.clientID && a.key.api < b.key.api
	}, func(g *group) detectors.Finding { return r.finding(p, g) })
}

func (r *rule) finding(p *detectors.Pass, g *group) detectors.Finding {
	f := &Finding{
		ClientID: g.key.clientID, API: decode.Name(g.key.api), Clients: g.conns.Clients(), Servers: g.conns.Servers(),
		Versions: g.versions.Ints(), AfterResponse: g.after,
		Responses: g.n, TotalMs: g.total.Milliseconds(), MaxMs: g.max.Milliseconds(), HeldMs: g.held.Milliseconds(),
		First: g.first, Last: g.last, Before: g.before,
		ServerLabels: g.conns.ServerLabels(p.Nodes), Dropped: r.dropped, MinTotal: r.p.MinTotal,
	}
	f.Quota, f.Metric = quota(g.key.api)
	f.HeldS, f.Ongoing = text.Seconds(g.held), g.throttled
	sev := detectors.Info
	if g.held >= r.p.MinTotal {
		sev = max(detectors.Warning, detectors.Grade(g.held, g.throttled))
	}
	f.Severity = sev
	ev := g.ev.List()
	if !slices.ContainsFunc(ev, func(e detectors.Evidence) bool { return e.File == g.maxAt.File && e.Packet == g.maxAt.Packet }) {
		ev = append(ev, g.maxAt)
		detectors.SortEvidence(ev)
	}
	return detectors.Finding{
		Severity: sev,
		First:    g.first,
		Last:     g.last,
		Conns:    g.conns.IDs(),
		Nodes:    g.conns.Nodes(p.Nodes),
		Evidence: ev,
		Subject:  detectors.Subject{ClientIDs: []string{g.key.clientID}, Clients: g.conns.ClientAddrs(), Servers: g.conns.ServerAddrs(), Waits: true},
		Detail:   f,
	}
}

// quota names the quota most likely behind a throttled API, and the
// quota metric's type for it.
func quota(api int16) (name, metric string) {
	switch kmsg.Key(api) {
	case kmsg.Produce:
		return "producer_byte_rate", "Produce"
	case kmsg.Fetch:
		return "consumer_byte_rate", "Fetch"
	case kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.CreatePartitions:
		return "controller_mutation_rate", "ControllerMutation"
	}
	return "request_percentage", "Request"
}
