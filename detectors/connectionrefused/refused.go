// Package connectionrefused reports connection attempts towards an endpoint that
// fail: SYN answered by RST (refused) or never answered.
//
// One finding per endpoint (server address and port), graded by how long
// clients were unable to connect to it (detectors.Grade): from the first
// failure to the last, still failing at the end if no connection to it
// opened after the last failure. Only Kafka endpoints are
// graded: advertised by Metadata (or another response), the server of a
// Kafka connection in the capture, on a Kafka port, or on a host that
// serves Kafka on another port in the capture while this port never
// accepted a connection (a dead bootstrap server or listener); refusals
// elsewhere (port scans, health checks) are info.
//
//   - info: not a Kafka endpoint; failures that stopped within Recovery,
//     followed by a connection that opens (a restart); fewer than
//     MinAttempts failures, within 3 s, never followed by a connection;
//   - warning: clients unable to connect for 3 s or more; or an endpoint
//     that refused MinAttempts attempts or more and never accepted one
//     afterwards in the capture, however quickly the clients gave up (a
//     dead bootstrap server or listener: a misconfiguration that bites);
//   - error: unable to connect for 30 s or more, or for 10 s or more and
//     still failing when the capture ended.
package connectionrefused

import (
	"maps"
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
	Name: "connection-refused",
	Recorded: []string{"fixtures/pcaps/kafka/java-refused-bootstrap.pcap.gz", "fixtures/pcaps/clients/refused-bootstrap-kgo.pcap", "fixtures/pcaps/clients/refused-bootstrap-sarama.pcap",
		"fixtures/pcaps/clients/refused-bootstrap-librdkafka.pcap"},
	Severity: detectors.Error,
	Doc: "Connection attempts that fail towards one endpoint: SYN answered by RST (nothing listens, or a " +
		"firewall rejects) or SYNs never answered (host down, packets dropped). Counts the attempts and " +
		"clients, and says whether Metadata advertises the endpoint, for which nodes. Only Kafka endpoints are " +
		"graded: advertised, with a Kafka connection, on a Kafka port, or a port that never accepted a connection " +
		"on a host serving Kafka on another port (a dead bootstrap server or listener); other refusals are info. " +
		"Graded by how long clients were unable to connect (first to last failure): info for a restart (failures " +
		"within recovery, then a connection that opens), warning from 3 s or when min-attempts failed and none " +
		"opened afterwards (a dead endpoint), error from 30 s, or from 10 s when none opened afterwards.",
}, Params{MinAttempts: 3, Recovery: detectors.FeltAfter}, New)

// Params are the rule's thresholds.
type Params struct {
	MinAttempts int           `param:"min-attempts" doc:"failed connection attempts (each SYN with its retransmissions counts once) to a Kafka endpoint that never accepted one afterwards that make a warning however short (a dead bootstrap server)"`
	Recovery    time.Duration `param:"recovery" unit:"s" doc:"failures that stop within this time (first to last), followed by a connection to the endpoint that opens, are a restart (info); raise it where restarts this long are routine"`
}

// Bounds against connection churn: endpoints tracked, clients kept per
// endpoint.
const (
	maxEndpoints = 4096
	maxClients   = 16
	// maxSameHost bounds the other Kafka endpoints of its host a finding
	// names.
	maxSameHost = 8
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
	srvs := slices.SortedFunc(maps.Keys(r.eps), netip.AddrPort.Compare)
	out := make([]detectors.Finding, 0, len(srvs))
	for _, s := range srvs {
		out = append(out, r.finding(p, s, r.eps[s]))
	}
	return out
}

func (r *rule) finding(p *detectors.Pass, srv netip.AddrPort, ep *endpoint) detectors.Finding {
	f := &Finding{Endpoint: srv.String(), Server: srv, Attempts: ep.attempts, Refused: ep.refused,
		Unanswered: ep.unanswered, SYNs: ep.syns, First: ep.first, Last: ep.last, MoreClients: ep.moreClients}
	if p.Nodes != nil {
		f.IDs = p.Nodes.ServerIDs(srv)
		if len(f.IDs) > 0 {
			f.AdvertisedAs = p.Nodes.AdvertisedAs(srv)
		}
	}
	f.Advertised = len(f.IDs) > 0

	// Connections to the endpoint that opened: one after the last failure
	// means the endpoint recovered.
	ports := r.ports
	if p.Ports != nil {
		ports = p.Ports // the run's --ports
	}
	f.KafkaEndpoint = f.Advertised || ports.Has(srv.Port())
	for _, c := range p.Conns {
		s := netip.AddrPortFrom(c.Server.Addr().Unmap(), c.Server.Port())
		if s.Addr() == srv.Addr() && s.Port() != srv.Port() && !slices.Contains(f.SameHost, s.String()) {
			if len(f.SameHost) < maxSameHost {
				f.SameHost = append(f.SameHost, s.String())
			}
		}
		if s != srv {
			continue
		}
		f.KafkaEndpoint = true
		f.Seen++
		if c.Handshake && !c.FirstSeen.Before(ep.last) {
			f.After++
		}
	}
	// Kafka endpoints advertised on the same host, connected to or not:
	// a client given a wrong port for a broker whose Metadata names its
	// right one (the Java client refused at a bootstrap port, recorded on
	// Apache Kafka 4.1.1: fixtures/pcaps/kafka/java-refused-bootstrap).
	if p.Nodes != nil {
		for ep := range p.Nodes.Endpoints() {
			a, err := netip.ParseAddrPort(ep)
			if err != nil || a.Addr().Unmap() != srv.Addr().Unmap() || a.Port() == srv.Port() || slices.Contains(f.SameHost, ep) {
				continue
			}
			if len(f.SameHost) < maxSameHost {
				f.SameHost = append(f.SameHost, ep)
			}
		}
	}
	sort.Strings(f.SameHost)
	f.Accepted = p.Listeners.Accepted(srv)
	if !f.KafkaEndpoint && len(f.SameHost) > 0 && !f.Accepted {
		f.KafkaEndpoint, f.DeadListener = true, true
	}
	f.Recovered = f.After > 0

	// How long clients were unable to connect: from the first failure to
	// the last (the policy's measure; a client's retry backoff after the
	// last failure is not counted).
	held := ep.last.Sub(ep.first)
	f.UnableS = text.Seconds(held)
	f.Ongoing = !f.Recovered
	sev := detectors.Grade(held, f.Ongoing)
	switch {
	case !f.KafkaEndpoint:
		sev, f.Why = detectors.Info, notKafka
	case f.Recovered && held < r.p.Recovery:
		sev, f.Why = detectors.Info, restart
	case sev == detectors.Info && f.Recovered:
		sev = detectors.Warning // recovery was set below FeltAfter
	case sev == detectors.Info && ep.attempts >= int64(r.p.MinAttempts):
		sev = detectors.Warning // a dead endpoint: every attempt failed
	case sev == detectors.Info:
		f.Why = fewAttempts
	}
	f.Held, f.Recovery = held, r.p.Recovery
	f.MinAttempts = r.p.MinAttempts

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
		Nodes:    f.IDs,
		Evidence: ep.ev.List(),
		Subject:  detectors.Subject{Clients: cl, Servers: []netip.AddrPort{srv}, Nodes: f.IDs},
		Detail:   f,
	}
}
