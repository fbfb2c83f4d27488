package legacy

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// connRefusedSpec: connection attempts towards an endpoint that fail, SYN
// answered by RST (refused) or never answered.
//
// One finding per endpoint (server address and port). It is a warning when
// the endpoint is a Kafka endpoint (advertised by Metadata or another
// response, the server of a Kafka connection in the capture, or on a default
// Kafka port), at least min-attempts connection attempts failed, and the
// endpoint did not recover: either no connection to it opened after the
// last failure, or the failures went on for recovery seconds or more. Else
// it is info: a single refused attempt followed by a good connection, a
// broker restart of a few seconds, a port that is not Kafka.
//
// It is never an error: a refused connection is the symptom; its cause (a
// broker down, a wrong advertised listener) is what leader-election-stall
// and advertised-listener-conflict report as errors.
func connRefusedSpec() Spec {
	return Spec{
		ID:       "connection-refused",
		Severity: Warning,
		Summary: "Connection attempts that fail towards one endpoint: SYN answered by RST (nothing listens, or a " +
			"firewall rejects) or SYNs never answered (host down, packets dropped). Counts the attempts and " +
			"clients, and says whether Metadata advertises the endpoint, for which nodes. A warning for a Kafka " +
			"endpoint with min-attempts failures that did not stop within recovery seconds with a connection that opens; info otherwise.",
		Params: []Param{
			{Name: "min-attempts", Default: 3,
				Meaning: "failed connection attempts (each SYN with its retransmissions counts once) to one endpoint for a warning"},
			{Name: "recovery", Default: 30,
				Meaning: "seconds: failures that stop within this time, followed by a connection to the endpoint that " +
					"opens, are a restart (info), not a warning"},
		},
		New: func(p Params) Detector {
			ports, _ := flows.ParsePorts(flows.DefaultPorts)
			return &connRefused{
				minAttempts: p.Int("min-attempts"),
				recovery:    p.Seconds("recovery"),
				eps:         map[netip.AddrPort]*refusedEndpoint{},
				ports:       ports,
			}
		},
	}
}

// Bounds against connection churn: endpoints tracked, clients kept per
// endpoint.
const (
	maxRefusedEndpoints = 4096
	maxRefusedClients   = 16
)

type connRefused struct {
	minAttempts int
	recovery    time.Duration
	eps         map[netip.AddrPort]*refusedEndpoint
	// ports are the default Kafka ports (the run's --ports are not in
	// Env).
	ports *flows.Ports
}

type refusedEndpoint struct {
	attempts, refused, unanswered, syns int64
	first, last                         time.Time
	clients                             []netip.Addr
	moreClients                         bool
	ev                                  sampler[Evidence]
}

// OnConnEvent implements flows.ConnHandler.
func (d *connRefused) OnConnEvent(e *flows.ConnEvent) {
	if e.Kind != flows.ConnRefused && e.Kind != flows.ConnUnanswered {
		return
	}
	srv := netip.AddrPortFrom(e.Server.Addr().Unmap(), e.Server.Port())
	ep := d.eps[srv]
	if ep == nil {
		if len(d.eps) >= maxRefusedEndpoints {
			return
		}
		ep = &refusedEndpoint{first: e.Time, last: e.Time}
		d.eps[srv] = ep
	}
	ep.attempts++
	ep.syns += int64(max(e.Attempts, 1))
	var what string
	if e.Kind == flows.ConnRefused {
		ep.refused++
		what = "SYN from " + e.Client.String() + " to " + srv.String() + " answered by RST"
	} else {
		ep.unanswered++
		what = "SYN from " + e.Client.String() + " to " + srv.String() + " never answered (" + strconv.Itoa(max(e.Attempts, 1)) + " SYNs)"
	}
	if e.Time.Before(ep.first) {
		ep.first = e.Time
	}
	if e.Time.After(ep.last) {
		ep.last = e.Time
	}
	c := e.Client.Addr().Unmap()
	known := false
	for _, x := range ep.clients {
		if x == c {
			known = true
			break
		}
	}
	if !known {
		if len(ep.clients) < maxRefusedClients {
			ep.clients = append(ep.clients, c)
		} else {
			ep.moreClients = true
		}
	}
	ep.ev.add(Evidence{File: e.File, Packet: e.Packet, What: what})
}

// Findings implements Detector.
func (d *connRefused) Findings(env *Env) []Finding {
	if env.Ports != nil {
		d.ports = env.Ports // the run's --ports
	}
	srvs := make([]netip.AddrPort, 0, len(d.eps))
	for s := range d.eps {
		srvs = append(srvs, s)
	}
	sort.Slice(srvs, func(i, j int) bool { return srvs[i].Compare(srvs[j]) < 0 })
	out := make([]Finding, 0, len(srvs))
	for _, s := range srvs {
		out = append(out, d.finding(env, s, d.eps[s]))
	}
	return out
}

func (d *connRefused) finding(env *Env, srv netip.AddrPort, ep *refusedEndpoint) Finding {
	var ids []int32
	if env != nil && env.Nodes != nil {
		ids = append(ids, env.Nodes.ServerIDs(srv)...)
	}
	advertised := len(ids) > 0
	var advertisedAs []string
	for _, id := range ids {
		for _, e := range env.Nodes.EndpointsOf(id) {
			if sameEndpoint(e, srv) && !hasString(advertisedAs, e) {
				advertisedAs = append(advertisedAs, e)
			}
		}
	}
	sort.Strings(advertisedAs)

	// Connections to the endpoint that opened: one after the last failure
	// means the endpoint recovered.
	kafka := advertised || d.ports.Has(srv.Port())
	var seen, after int
	if env != nil {
		for _, c := range env.Conns {
			if netip.AddrPortFrom(c.Server.Addr().Unmap(), c.Server.Port()) != srv {
				continue
			}
			kafka = true
			seen++
			if c.Handshake && !c.FirstSeen.Before(ep.last) {
				after++
			}
		}
	}
	recovered := after > 0
	span := ep.last.Sub(ep.first)

	sev := Warning
	var why string
	switch {
	case !kafka:
		sev, why = Info, "the endpoint is not known as Kafka (not advertised, no Kafka connection to it, not a default Kafka port)"
	case ep.attempts < int64(d.minAttempts):
		sev, why = Info, fmt.Sprintf("fewer than %d attempts failed", d.minAttempts)
	case recovered && span < d.recovery:
		sev, why = Info, fmt.Sprintf("the failures lasted %s and then a connection to it opened (a restart)", text.Duration(span))
	}

	clients := make([]string, len(ep.clients))
	cl := append([]netip.Addr(nil), ep.clients...)
	sort.Slice(cl, func(i, j int) bool { return cl[i].Less(cl[j]) })
	for i, c := range cl {
		clients[i] = c.String()
	}
	clientText := strings.Join(clients, ", ")
	if ep.moreClients {
		clientText += " and more"
	}

	how := "refused (SYN answered by RST)"
	switch {
	case ep.refused == 0:
		how = "never answered (SYNs unanswered)"
	case ep.unanswered > 0:
		how = fmt.Sprintf("failed (%d refused by RST, %d SYNs unanswered)", ep.refused, ep.unanswered)
	}
	var sum strings.Builder
	fmt.Fprintf(&sum, "%d connection %s to %s from %s %s", ep.attempts, text.Word(int(ep.attempts), "attempt", "attempts"),
		srv, clientText, how)
	if ep.attempts > 1 {
		fmt.Fprintf(&sum, " over %s", text.Duration(span))
	}
	if advertised {
		fmt.Fprintf(&sum, "; Metadata advertises it (%s) for %s %s", strings.Join(advertisedAs, ", "),
			text.Word(len(ids), "node", "nodes"), text.IDs(ids, 0))
	}
	if recovered {
		sum.WriteString("; a connection to it opened afterwards")
	}

	var ex strings.Builder
	fmt.Fprintf(&ex, "From %s to %s UTC, %d connection %s (%d SYNs with retransmissions) from %s to %s %s. ",
		text.Stamp(ep.first), text.Stamp(ep.last), ep.attempts,
		text.Word(int(ep.attempts), "attempt", "attempts"), ep.syns, clientText, srv, how)
	if ep.refused > 0 {
		fmt.Fprintf(&ex, "A RST in answer to a SYN means the host is up but nothing listens on port %d (or a firewall rejects). ", srv.Port())
	}
	if ep.unanswered > 0 {
		ex.WriteString("An unanswered SYN means the host is down or unreachable, or a firewall drops the packets. ")
	}
	if advertised {
		fmt.Fprintf(&ex, "Metadata advertises this endpoint (as %s) for %s %s, so clients are sent there and fail. ",
			strings.Join(advertisedAs, ", "), text.Word(len(ids), "node", "nodes"), text.IDs(ids, 0))
	} else if kafka {
		ex.WriteString("No Metadata response in the capture advertises it: it is a bootstrap address or a stale one. ")
	}
	switch {
	case recovered:
		fmt.Fprintf(&ex, "%d %s to it opened after the last failure.", after, text.Word(after, "connection", "connections"))
	case seen > 0:
		fmt.Fprintf(&ex, "The capture holds %d Kafka %s to it, none opened after the last failure.", seen, text.Word(seen, "connection", "connections"))
	default:
		ex.WriteString("No Kafka connection to it is in the capture.")
	}
	if sev == Info {
		ex.WriteString(" Info only: " + why + ".")
	}

	next := fmt.Sprintf("On the host of %s: ss -ltnp 'sport = :%d' (does anything listen?), the broker process and its log", srv, srv.Port())
	if advertised {
		next += fmt.Sprintf(" for %s %s; compare listeners= and advertised.listeners= of %s with this address",
			text.Word(len(ids), "node", "nodes"), text.IDs(ids, 0), text.Word(len(ids), "that node", "those nodes"))
	}
	next += fmt.Sprintf(". From a client host: nc -vz %s %d.", srv.Addr(), srv.Port())
	if ep.unanswered > 0 {
		next += " For unanswered SYNs: is the host up, firewall / security group rules, routes."
	}
	if !advertised && kafka {
		next += " Check the clients' bootstrap.servers."
	}

	return Finding{
		Severity: sev,
		Summary:  sum.String(),
		First:    ep.first,
		Last:     ep.last,
		Nodes:    ids,
		Counts: map[string]int64{
			"attempts":   ep.attempts,
			"refused":    ep.refused,
			"unanswered": ep.unanswered,
			"syns":       ep.syns,
		},
		Fields: map[string]any{
			"endpoint":       srv.String(),
			"advertised":     advertised,
			"advertised_as":  advertisedAs,
			"clients":        clients,
			"recovered":      recovered,
			"kafka_endpoint": kafka,
		},
		Evidence:    ep.ev.list(),
		Explanation: ex.String(),
		Next:        next,
	}
}

// sameEndpoint reports whether an advertised "host:port" names srv: the same
// address, or "localhost" for a loopback one.
func sameEndpoint(advertised string, srv netip.AddrPort) bool {
	host, port, ok := splitEndpoint(advertised)
	if !ok || port != srv.Port() {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return srv.Addr().IsLoopback()
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap() == srv.Addr().Unmap()
}

// splitEndpoint splits "host:port" or "[v6]:port".
func splitEndpoint(ep string) (string, uint16, bool) {
	i := strings.LastIndexByte(ep, ':')
	if i < 0 {
		return "", 0, false
	}
	p, err := strconv.ParseUint(ep[i+1:], 10, 16)
	if err != nil {
		return "", 0, false
	}
	return strings.TrimSuffix(strings.TrimPrefix(ep[:i], "["), "]"), uint16(p), true
}

func hasString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
