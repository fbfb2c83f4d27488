// Package advertisedlistenerconflict reports advertised listeners that cannot work.
//
// Each Metadata and DescribeCluster response is checked on its own
// (cluster.Brokers), not the cumulative node table (cluster.Nodes): a node
// that moves to another address between responses (a broker restarted
// elsewhere, an id reused) is not a conflict.
//
//   - Finding: one response lists several node ids at one host:port. Host
//     names compare case-insensitively, and "localhost", 127.0.0.1 and ::1
//     are one host (a local client reaches the same listener through
//     each). A warning: a misconfiguration that will bite (the severity
//     policy's own example) whether or not a client met it yet. An error
//     when clients were refused there for long: a partition refused
//     NOT_LEADER_OR_FOLLOWER by the one broker listening there until an
//     answer for it carries no error; a node asked for there by a client of
//     KIP-1242 (ApiVersions v5 names the node it expects) and answered
//     REBOOTSTRAP_REQUIRED until an ApiVersions for it succeeds; or
//     connection attempts to the endpoint failing until one opens; for
//     30 s or more, or still after 10 s at the end of the capture
//     (detectors.Grade; a spell of one refusal does not count). Only
//     endpoints advertised by IP address or as localhost are matched to
//     the servers of the capture.
//   - Loopback: a response sent to a remote client (neither loopback nor
//     the broker's own address) advertises a loopback or unspecified
//     address (localhost, 127.x, ::1, 0.0.0.0): the client will connect to
//     itself. A warning; one finding covers every such endpoint (a cluster
//     configured this way advertises all its brokers so). It is info
//     instead when every such client afterwards opened a new connection
//     to one of those ports carrying Produce, Fetch or group requests: the
//     address works for it (port forwarding, e.g. Docker's -p).
package advertisedlistenerconflict

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/spell"
	"github.com/kfsniff/kfsniff/detectors/internal/tally"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Analyzer is the rule.
var Analyzer = detectors.Define(detectors.Analyzer{
	Name:     "advertised-listener-conflict",
	Recorded: []string{"fixtures/pcaps/kafka/kraft-listener-conflict.pcap.gz", "fixtures/pcaps/clients/listener-conflict-kgo.pcap", "fixtures/pcaps/clients/listener-conflict-sarama.pcap"},
	Severity: detectors.Error,
	Doc: "A Metadata or DescribeCluster response lists several node ids at one host:port (requests for all of " +
		"them reach one broker, which refuses those meant for the others), or advertises a loopback address to a " +
		"remote client (the client connects to itself). Checked per response, so nodes that move between addresses " +
		"over time are not conflicts. Both are warnings: misconfigurations that will bite, whether or not a client " +
		"met them yet. Several ids at one endpoint is an error when clients were refused there for 30 s or more, or " +
		"still after 10 s at the end of the capture: a partition refused NOT_LEADER_OR_FOLLOWER at the endpoint until " +
		"written or fetched, a node asked for there answered REBOOTSTRAP_REQUIRED (KIP-1242 clients) until reached, or " +
		"connection attempts to it failing until one opens (endpoints advertised by IP or as localhost). Loopback told " +
		"to clients that then reached the brokers anyway (a port forward) is info.",
}, Params{}, New)

// Params: the rule has none.
type Params struct{}

// Bounds on what is kept.
const (
	maxIssues  = 1024 // endpoints with several node ids
	maxClients = 32   // clients told, per issue
	maxConns   = 16   // connections listed, per issue
	maxIDs     = 64   // node ids, endpoints and ports listed, per issue
)

// New makes the rule.
func New(Params) detectors.Rule {
	return &rule{shared: map[string]*issue{}, at: map[netip.AddrPort]*issue{}}
}

type rule struct {
	// shared: several ids at one endpoint, by canonical endpoint.
	shared map[string]*issue
	// dropped counts responses showing several ids at an endpoint not
	// tracked (beyond maxIssues).
	dropped int64
	// loopback: loopback endpoints told to remote clients, nil until
	// one is.
	loopback *issue
	// scratch holds the brokers of the response being read.
	scratch []broker
	// at resolves server addresses to the shared endpoint they are (nil:
	// none), emptied when an endpoint is added; openParts counts the
	// partitions refused at one and not yet answered without error.
	at        map[netip.AddrPort]*issue
	openParts int
	// brokersDropped counts brokers of responses past
	// cluster.MaxBrokersPerResponse, not judged.
	brokersDropped int64
}

// Cut implements detectors.Bounded.
func (r *rule) Cut() map[string]int64 {
	return map[string]int64{"brokers_not_judged": r.brokersDropped}
}

type broker struct {
	host string // as advertised
	key  string // canonical host
	port int32
	id   int32
}

// issue is one problem endpoint and the responses that show it.
type issue struct {
	endpoint string
	// endpoints and ports, for the loopback issue (several endpoints).
	endpoints   []string
	ports       []int32
	ids         tally.IDs
	responses   int64
	first, last time.Time
	conns       tally.Conns
	apis        []string
	// clients and when each was first told.
	clients     []netip.Addr
	toldAt      []time.Time
	moreClients bool
	ev          detectors.Sampler[detectors.Evidence]
	// felt is what clients met at a shared endpoint.
	felt felt
}

func newIssue(endpoint string) *issue {
	return &issue{endpoint: endpoint, ids: tally.IDs{}, conns: tally.Conns{Max: maxConns}, felt: felt{parts: map[cluster.Partition]*spell.Spell{}, nodes: map[int32]*spell.Spell{}}}
}

func (r *rule) add(id int32, host string, port int32) {
	if len(r.scratch) >= cluster.MaxBrokersPerResponse {
		r.brokersDropped++ // a response's brokers are judged up to the bound flows learns
		return
	}
	r.scratch = append(r.scratch, broker{host: host, key: canonicalHost(host), port: port, id: id})
}

func compareBrokers(a, b broker) int {
	return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.port, b.port), cmp.Compare(a.host, b.host), cmp.Compare(a.id, b.id))
}

// Exchange implements detectors.ExchangeHook.
func (r *rule) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	if x.Resp == nil {
		return
	}
	if r.served(x) {
		return
	}
	r.scratch = r.scratch[:0]
	if !cluster.Brokers(x.Resp.Resp, r.add) || len(r.scratch) == 0 {
		return
	}
	bs := r.scratch
	defer clear(bs) // the hosts belong to the response
	slices.SortFunc(bs, compareBrokers)
	// Several ids at one endpoint.
	for i := 0; i < len(bs); {
		j := i + 1
		distinct := false
		for j < len(bs) && bs[j].key == bs[i].key && bs[j].port == bs[i].port {
			distinct = distinct || bs[j].id != bs[i].id
			j++
		}
		if distinct {
			r.sharedAt(x, bs[i:j])
		}
		i = j
	}
	// Loopback addresses told to a remote client.
	client := x.Conn.Client.Addr().Unmap()
	if client.IsLoopback() || client == x.Conn.Server.Addr().Unmap() {
		return
	}
	var told []string
	for i := range bs {
		b := &bs[i]
		if !loopbackHost(b.host) {
			continue
		}
		if r.loopback == nil {
			r.loopback = newIssue("")
		}
		is := r.loopback
		if len(is.ids) < maxIDs {
			is.ids.Add(b.id)
		}
		ep := cluster.Endpoint(b.host, b.port)
		if !slices.Contains(is.endpoints, ep) && len(is.endpoints) < maxIDs {
			is.endpoints = append(is.endpoints, ep)
		}
		if !slices.Contains(is.ports, b.port) && len(is.ports) < maxIDs {
			is.ports = append(is.ports, b.port)
		}
		if len(told) < 4 {
			told = append(told, fmt.Sprintf("node %d at %s", b.id, ep))
		}
	}
	if told != nil {
		r.loopback.seen(x, fmt.Sprintf("%s response from %s tells %s: %s", x.Resp.Name(), x.Conn.Server, client, strings.Join(told, ", ")))
	}
}

// issueAt is the shared endpoint whose listener ap is (nil: none), resolved
// once per server: by its address, or as "localhost" for a loopback one.
// An endpoint advertised by host name is not matched (no DNS here).
func (r *rule) issueAt(ap netip.AddrPort) *issue {
	if len(r.shared) == 0 {
		return nil
	}
	if is, ok := r.at[ap]; ok {
		return is
	}
	is := r.shared[cluster.Endpoint(canonicalHost(ap.Addr().Unmap().String()), int32(ap.Port()))]
	if len(r.at) < maxServers {
		r.at[ap] = is
	}
	return is
}

// sharedAt counts a response listing several node ids (bs, one endpoint).
func (r *rule) sharedAt(x *detectors.Exchange, bs []broker) {
	key := cluster.Endpoint(bs[0].key, bs[0].port)
	ep := cluster.Endpoint(bs[0].host, bs[0].port)
	is := r.shared[key]
	if is == nil {
		if len(r.shared) >= maxIssues {
			r.dropped++
			return
		}
		is = newIssue(ep)
		r.shared[key] = is
		clear(r.at) // a server may be this endpoint
	}
	ids := tally.IDs{}
	for _, b := range bs {
		if len(is.ids) < maxIDs {
			is.ids.Add(b.id)
		}
		ids.Add(b.id)
	}
	is.seen(x, fmt.Sprintf("%s response from %s lists nodes %s at %s", x.Resp.Name(), x.Conn.Server, text.IDs(ids.Sorted(), maxIDs), ep))
}

// seen counts a response showing the issue.
func (is *issue) seen(x *detectors.Exchange, what string) {
	t := x.Resp.Time
	if is.responses == 0 || t.Before(is.first) {
		is.first = t
	}
	if t.After(is.last) {
		is.last = t
	}
	is.responses++
	is.conns.Add(x.Conn)
	if name := x.Resp.Name(); !slices.Contains(is.apis, name) {
		is.apis = append(is.apis, name)
	}
	c := x.Conn.Client.Addr().Unmap()
	if !slices.Contains(is.clients, c) {
		if len(is.clients) < maxClients {
			is.clients = append(is.clients, c)
			is.toldAt = append(is.toldAt, t)
		} else {
			is.moreClients = true
		}
	}
	is.ev.Add(detectors.EvidenceAt(x.Resp, what))
}

// Findings implements detectors.Rule: one error per shared endpoint, then
// one finding for the loopback addresses.
func (r *rule) Findings(p *detectors.Pass) []detectors.Finding {
	var out []detectors.Finding
	for _, k := range slices.Sorted(maps.Keys(r.shared)) {
		out = append(out, r.sharedFinding(p, r.shared[k]))
	}
	if r.loopback != nil {
		out = append(out, loopbackFinding(p, r.loopback))
	}
	return out
}

func (r *rule) sharedFinding(p *detectors.Pass, is *issue) detectors.Finding {
	f := &Finding{Problem: "shared-endpoint", Endpoint: is.endpoint, NodeIDs: is.ids.Sorted(), Servers: tally.AddrStrings(is.conns.ServerAddrs()),
		Clients: is.clientStrings(nil), Dropped: r.dropped}
	f.Told = is.told(p)
	if p.Nodes != nil {
		for _, s := range is.conns.ServerAddrs() {
			if len(p.Nodes.ServerIDs(s)) == 0 {
				f.Unadvertised = append(f.Unadvertised, s.String())
			}
		}
	}
	slices.Sort(f.Unadvertised)
	// A misconfiguration that will bite is a warning; clients refused
	// there for long make it an error (the policy, detectors.Grade).
	held, ongoing := is.felt.held(p.End)
	f.RefusedS, f.Ongoing, f.Held = text.Seconds(held), ongoing, held
	f.Attempts, f.Refused, f.Parts, f.PartsDropped = is.felt.attempts, is.felt.refused, len(is.felt.parts), is.felt.dropped
	f.Rebootstrap, f.RebootNodes = is.felt.rebootstrap, slices.Sorted(maps.Keys(is.felt.nodes))
	f.Severity = max(detectors.Warning, detectors.Grade(held, ongoing))
	fd := is.finding(f.Severity, f.NodeIDs, f)
	fd.Evidence = append(fd.Evidence, is.felt.ev.List()...)
	detectors.SortEvidence(fd.Evidence)
	return fd
}

func loopbackFinding(p *detectors.Pass, is *issue) detectors.Finding {
	eps := slices.Sorted(slices.Values(is.endpoints))
	// A client that opened a new connection to one of these ports
	// afterwards and produced, fetched or took part in a group reached a
	// broker through the advertised address.
	reached := make(map[netip.Addr]bool)
	for _, c := range p.Conns {
		if !slices.Contains(is.ports, int32(c.Server.Port())) || !nodeTraffic(c) {
			continue
		}
		ca := c.Client.Addr().Unmap()
		for i, k := range is.clients {
			if k == ca && !c.FirstSeen.Before(is.toldAt[i]) {
				reached[k] = true
			}
		}
	}
	f := &Loopback{Problem: "loopback", Endpoint: eps[0], Endpoints: eps, NodeIDs: is.ids.Sorted(), Servers: tally.AddrStrings(is.conns.ServerAddrs()),
		Clients: is.clientStrings(nil), Stuck: is.clientStrings(func(a netip.Addr) bool { return !reached[a] }),
		Ports: is.ports, Told: is.told(p)}
	sev := detectors.Warning
	if len(f.Stuck) == 0 && !is.moreClients {
		sev = detectors.Info
	}
	f.Warning = sev == detectors.Warning
	return is.finding(sev, f.NodeIDs, f)
}

func (is *issue) finding(sev detectors.Severity, ids []int32, d detectors.Detail) detectors.Finding {
	return detectors.Finding{
		Severity: sev,
		First:    is.first,
		Last:     is.last,
		Conns:    is.conns.IDs(),
		Nodes:    ids,
		Evidence: is.ev.List(),
		Subject:  detectors.Subject{Clients: is.clientAddrs(nil), Servers: is.conns.ServerAddrs(), Nodes: ids},
		Detail:   d,
	}
}

// told is what the prose says of the responses that showed the issue.
func (is *issue) told(p *detectors.Pass) Told {
	return Told{Responses: is.responses, APIs: strings.Join(is.apis, "/"), ServerLabels: tally.Labels(p.Nodes, is.conns.ServerAddrs()),
		First: is.first, Last: is.last, MoreConns: is.conns.More}
}

// clientAddrs returns the clients (those keep accepts, if set), sorted.
func (is *issue) clientAddrs(keep func(netip.Addr) bool) []netip.Addr {
	cl := make([]netip.Addr, 0, len(is.clients))
	for _, c := range is.clients {
		if keep == nil || keep(c) {
			cl = append(cl, c)
		}
	}
	slices.SortFunc(cl, netip.Addr.Compare)
	return cl
}

// clientStrings is clientAddrs as text (never nil).
func (is *issue) clientStrings(keep func(netip.Addr) bool) []string {
	cl := is.clientAddrs(keep)
	out := make([]string, len(cl))
	for i, c := range cl {
		out[i] = c.String()
	}
	return out
}

// nodeTraffic reports a connection carrying requests that go to a specific
// node (not to any bootstrap address): Produce, Fetch, group membership.
func nodeTraffic(c *flows.Conn) bool {
	return slices.ContainsFunc(nodeKeys[:], func(k kmsg.Key) bool { return c.APIs.Get(int16(k)) > 0 })
}

var nodeKeys = [...]kmsg.Key{kmsg.Produce, kmsg.Fetch, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat,
	kmsg.OffsetCommit, kmsg.ConsumerGroupHeartbeat, kmsg.ShareFetch, kmsg.ShareGroupHeartbeat}

// canonicalHost is the host as a grouping key: lower case, and one name
// for the loopback addresses a local client reaches the same listener by.
func canonicalHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	switch h {
	case "localhost", "127.0.0.1", "::1", "0:0:0:0:0:0:0:1":
		return "localhost"
	}
	return h
}

// loopbackHost reports an advertised host that means "this host" to
// whoever connects: localhost, 127.0.0.0/8, ::1, or the unspecified
// address.
func loopbackHost(h string) bool {
	h = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || h == "localhost.localdomain" || h == "ip6-localhost" {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && (a.Unmap().IsLoopback() || a.IsUnspecified())
}
