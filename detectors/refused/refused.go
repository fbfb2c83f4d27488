// Package refused reports connection attempts towards an endpoint that
// fail: SYN answered by RST (refused) or never answered.
//
// One finding per endpoint (server address and port). It is a warning when
// the endpoint is a Kafka endpoint (advertised by Metadata or another
// response, the server of a Kafka connection in the capture, or on a Kafka
// port), at least MinAttempts connection attempts failed, and the endpoint
// did not recover: either no connection to it opened after the last
// failure, or the failures went on for Recovery or longer. Else it is
// info: a single refused attempt followed by a good connection, a broker
// restart of a few seconds, a port that is not Kafka.
//
// It is never an error: a refused connection is the symptom; its cause (a
// broker down, a wrong advertised listener) is what leader-election-stall
// and advertised-listener-conflict report as errors.
package refused

import (
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "connection-refused",
	Severity: detectors.Warning,
	Doc: "Connection attempts that fail towards one endpoint: SYN answered by RST (nothing listens, or a " +
		"firewall rejects) or SYNs never answered (host down, packets dropped). Counts the attempts and " +
		"clients, and says whether Metadata advertises the endpoint, for which nodes. A warning for a Kafka " +
		"endpoint with min-attempts failures that did not stop within recovery with a connection that opens; info otherwise.",
}, Params{MinAttempts: 3, Recovery: 30 * time.Second}, New)

// Params are the rule's thresholds.
type Params struct {
	MinAttempts int           `param:"min-attempts" doc:"failed connection attempts (each SYN with its retransmissions counts once) to one endpoint for a warning"`
	Recovery    time.Duration `param:"recovery" unit:"s" doc:"failures that stop within this time, followed by a connection to the endpoint that opens, are a restart (info), not a warning"`
}

// Bounds against connection churn: endpoints tracked, clients kept per
// endpoint.
const (
	maxEndpoints = 4096
	maxClients   = 16
)

// New makes the rule.
func New(p Params) detectors.Rule {
	ports, _ := flows.ParsePorts(flows.DefaultPorts)
	return &rule{p: p, eps: map[netip.AddrPort]*endpoint{}, ports: ports}
}

type rule struct {
	p   Params
	eps map[netip.AddrPort]*endpoint
	// ports are the default Kafka ports, for a Pass without the run's.
	ports *flows.Ports
}

type endpoint struct {
	attempts, refused, unanswered, syns int64
	first, last                         time.Time
	clients                             []netip.Addr
	moreClients                         bool
	ev                                  detectors.Sampler[detectors.Evidence]
}

// ConnEvent implements detectors.ConnHook.
func (r *rule) ConnEvent(_ *detectors.Pass, e *detectors.ConnEvent) {
	if e.Kind != flows.ConnRefused && e.Kind != flows.ConnUnanswered {
		return
	}
	srv := netip.AddrPortFrom(e.Server.Addr().Unmap(), e.Server.Port())
	ep := r.eps[srv]
	if ep == nil {
		if len(r.eps) >= maxEndpoints {
			return
		}
		ep = &endpoint{first: e.Time, last: e.Time}
		r.eps[srv] = ep
	}
	ep.attempts++
	syns := max(e.Attempts, 1)
	ep.syns += int64(syns)
	what := "SYN from " + e.Client.String() + " to " + srv.String()
	if e.Kind == flows.ConnRefused {
		ep.refused++
		what += " answered by RST"
	} else {
		ep.unanswered++
		what += " never answered (" + text.Plural(syns, "SYN", "SYNs") + ")"
	}
	if e.Time.Before(ep.first) {
		ep.first = e.Time
	}
	if e.Time.After(ep.last) {
		ep.last = e.Time
	}
	if c := e.Client.Addr().Unmap(); !slices.Contains(ep.clients, c) {
		if len(ep.clients) < maxClients {
			ep.clients = append(ep.clients, c)
		} else {
			ep.moreClients = true
		}
	}
	ep.ev.Add(detectors.Evidence{File: e.File, Packet: e.Packet, What: what})
}

// Findings implements detectors.Rule: one per endpoint, in address order.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	srvs := make([]netip.AddrPort, 0, len(r.eps))
	for s := range r.eps {
		srvs = append(srvs, s)
	}
	sort.Slice(srvs, func(i, j int) bool { return srvs[i].Compare(srvs[j]) < 0 })
	out := make([]detectors.Finding, 0, len(srvs))
	for _, s := range srvs {
		out = append(out, r.finding(p, s, r.eps[s]))
	}
	return out
}

func (r *rule) finding(p *detectors.Pass, srv netip.AddrPort, ep *endpoint) detectors.Finding {
	f := &Finding{Endpoint: srv.String(), srv: srv, attempts: ep.attempts, refused: ep.refused,
		unanswered: ep.unanswered, syns: ep.syns, first: ep.first, last: ep.last, moreClients: ep.moreClients}
	if p.Nodes != nil {
		f.ids = p.Nodes.ServerIDs(srv)
		if len(f.ids) > 0 {
			f.AdvertisedAs = p.Nodes.AdvertisedAs(srv)
		}
	}
	f.Advertised = len(f.ids) > 0

	// Connections to the endpoint that opened: one after the last failure
	// means the endpoint recovered.
	ports := r.ports
	if p.Ports != nil {
		ports = p.Ports // the run's --ports
	}
	f.KafkaEndpoint = f.Advertised || ports.Has(srv.Port())
	for _, c := range p.Conns {
		if netip.AddrPortFrom(c.Server.Addr().Unmap(), c.Server.Port()) != srv {
			continue
		}
		f.KafkaEndpoint = true
		f.seen++
		if c.Handshake && !c.FirstSeen.Before(ep.last) {
			f.after++
		}
	}
	f.Recovered = f.after > 0
	span := ep.last.Sub(ep.first)

	sev := detectors.Warning
	switch {
	case !f.KafkaEndpoint:
		sev, f.why = detectors.Info, notKafka
	case ep.attempts < int64(r.p.MinAttempts):
		sev, f.why = detectors.Info, fewAttempts
	case f.Recovered && span < r.p.Recovery:
		sev, f.why = detectors.Info, restart
	}
	f.minAttempts = r.p.MinAttempts

	cl := slices.Clone(ep.clients)
	sort.Slice(cl, func(i, j int) bool { return cl[i].Less(cl[j]) })
	f.Clients = make([]string, len(cl))
	for i, c := range cl {
		f.Clients[i] = c.String()
	}
	return detectors.Finding{
		Severity: sev,
		First:    ep.first,
		Last:     ep.last,
		Nodes:    f.ids,
		Counts: map[string]int64{
			"attempts":   ep.attempts,
			"refused":    ep.refused,
			"unanswered": ep.unanswered,
			"syns":       ep.syns,
		},
		Evidence: ep.ev.List(),
		Subject:  detectors.Subject{Clients: cl, Servers: []netip.AddrPort{srv}, Nodes: f.ids},
		Detail:   f,
	}
}
