package legacy

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// listenerConflictSpec: advertised listeners that cannot work.
//
// Each Metadata and DescribeCluster response is checked on its own, not the
// cumulative node table: a node that moves to another address between
// responses (a broker restarted elsewhere, an id reused) is not a conflict.
//
//   - error: one response lists several node ids at one host:port. Host
//     names compare case-insensitively, and "localhost", 127.0.0.1 and ::1
//     are one host (a local client reaches the same listener through each).
//   - warning: a response sent to a remote client (neither loopback nor the
//     broker's own address) advertises a loopback or unspecified address
//     (localhost, 127.x, ::1, 0.0.0.0): the client will connect to itself.
//     One finding covers every such endpoint (a cluster configured this way
//     advertises all its brokers so). It is info instead when every such
//     client afterwards opened a new connection to one of those ports
//     carrying Produce, Fetch or group requests: the address works for it
//     (port forwarding, e.g. Docker's -p).
func listenerConflictSpec() Spec {
	return Spec{
		ID:       "advertised-listener-conflict",
		Severity: Error,
		Summary: "A Metadata or DescribeCluster response lists several node ids at one host:port (error: " +
			"requests for all of them reach one broker), or advertises a loopback address to a remote client " +
			"(warning: the client connects to itself). Checked per response, so nodes that move between " +
			"addresses over time are not conflicts.",
		New: func(Params) Detector {
			return &listenerConflict{shared: map[string]*advertIssue{}}
		},
	}
}

// Bounds on what is kept.
const (
	maxAdvertIssues  = 1024
	maxAdvertClients = 32
	maxAdvertServers = 8
)

type listenerConflict struct {
	// shared: several ids at one endpoint, by canonical endpoint.
	shared map[string]*advertIssue
	// loopback: loopback endpoints told to remote clients, nil until
	// one is.
	loopback *advertIssue
	scratch  []advertBroker
}

type advertBroker struct {
	host string // as advertised
	key  string // canonical host
	port int32
	id   int32
}

// advertIssue is one problem endpoint and the responses that show it.
type advertIssue struct {
	endpoint string
	// endpoints and ports, for the loopback issue (several endpoints).
	endpoints   []string
	ports       []int32
	ids         idSet
	responses   int64
	first, last time.Time
	servers     []netip.AddrPort
	conns       idSet
	apis        []string
	// clients and when each was first told.
	clients     []netip.Addr
	toldAt      []time.Time
	moreClients bool
	ev          sampler[Evidence]
}

// OnExchange implements flows.ExchangeHandler.
func (d *listenerConflict) OnExchange(x *flows.Exchange) {
	if x.Resp == nil {
		return
	}
	d.scratch = d.scratch[:0]
	switch r := x.Resp.Resp.(type) {
	case *kmsg.MetadataResponse:
		for _, b := range r.Brokers {
			d.scratch = append(d.scratch, advertBroker{host: b.Host, port: b.Port, id: b.NodeID})
		}
	case *kmsg.DescribeClusterResponse:
		for _, b := range r.Brokers {
			d.scratch = append(d.scratch, advertBroker{host: b.Host, port: b.Port, id: b.NodeID})
		}
	default:
		return
	}
	if len(d.scratch) == 0 {
		return
	}
	bs := d.scratch
	for i := range bs {
		bs[i].key = canonicalHost(bs[i].host)
	}
	sort.Slice(bs, func(i, j int) bool {
		a, b := &bs[i], &bs[j]
		if a.key != b.key {
			return a.key < b.key
		}
		if a.port != b.port {
			return a.port < b.port
		}
		if a.host != b.host {
			return a.host < b.host
		}
		return a.id < b.id
	})
	// Several ids at one endpoint.
	for i := 0; i < len(bs); {
		j := i + 1
		distinct := false
		for j < len(bs) && bs[j].key == bs[i].key && bs[j].port == bs[i].port {
			if bs[j].id != bs[i].id {
				distinct = true
			}
			j++
		}
		if distinct {
			key := flows.Endpoint(bs[i].key, bs[i].port)
			if is := d.issue(d.shared, key, flows.Endpoint(bs[i].host, bs[i].port)); is != nil {
				for _, b := range bs[i:j] {
					if len(is.ids) < 64 {
						is.ids.add(b.id)
					}
				}
				is.seen(x, fmt.Sprintf("%s response from %s lists nodes %s at %s", x.Resp.Name(), x.Conn.Server,
					text.IDs(idsOf(bs[i:j]), 0), flows.Endpoint(bs[i].host, bs[i].port)))
			}
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
		if d.loopback == nil {
			d.loopback = &advertIssue{ids: idSet{}, conns: idSet{}}
		}
		is := d.loopback
		if len(is.ids) < 64 {
			is.ids.add(b.id)
		}
		ep := flows.Endpoint(b.host, b.port)
		if !hasString(is.endpoints, ep) && len(is.endpoints) < 64 {
			is.endpoints = append(is.endpoints, ep)
		}
		if !slices.Contains(is.ports, b.port) && len(is.ports) < 64 {
			is.ports = append(is.ports, b.port)
		}
		if len(told) < 4 {
			told = append(told, fmt.Sprintf("node %d at %s", b.id, ep))
		}
	}
	if told != nil {
		d.loopback.seen(x, fmt.Sprintf("%s response from %s tells %s: %s", x.Resp.Name(), x.Conn.Server, client, strings.Join(told, ", ")))
	}
}

func (d *listenerConflict) issue(m map[string]*advertIssue, key, endpoint string) *advertIssue {
	is := m[key]
	if is == nil {
		if len(m) >= maxAdvertIssues {
			return nil
		}
		is = &advertIssue{endpoint: endpoint, ids: idSet{}, conns: idSet{}}
		m[key] = is
	}
	return is
}

// seen counts a response showing the issue.
func (is *advertIssue) seen(x *flows.Exchange, what string) {
	t := x.Resp.Time
	if is.responses == 0 || t.Before(is.first) {
		is.first = t
	}
	if t.After(is.last) {
		is.last = t
	}
	is.responses++
	if !hasAddrPort(is.servers, x.Conn.Server) && len(is.servers) < maxAdvertServers {
		is.servers = append(is.servers, x.Conn.Server)
	}
	if len(is.conns) < maxStallConns {
		is.conns.add(int32(x.Conn.ID))
	}
	if name := x.Resp.Name(); !hasString(is.apis, name) {
		is.apis = append(is.apis, name)
	}
	c := x.Conn.Client.Addr().Unmap()
	known := false
	for _, k := range is.clients {
		if k == c {
			known = true
			break
		}
	}
	if !known {
		if len(is.clients) < maxAdvertClients {
			is.clients = append(is.clients, c)
			is.toldAt = append(is.toldAt, t)
		} else {
			is.moreClients = true
		}
	}
	is.ev.add(evidence(x.Resp, what))
}

// Findings implements Detector.
func (d *listenerConflict) Findings(env *Env) []Finding {
	var out []Finding
	for _, k := range advertIssueKeys(d.shared) {
		out = append(out, d.sharedFinding(env, d.shared[k]))
	}
	if d.loopback != nil {
		out = append(out, d.loopbackFinding(env, d.loopback))
	}
	return out
}

func (d *listenerConflict) sharedFinding(env *Env, is *advertIssue) Finding {
	ids := is.ids.sorted()
	servers := is.serverStrings()
	clients := is.clientStrings(nil)
	var unadvertised []string
	if env != nil && env.Nodes != nil {
		for _, s := range is.servers {
			if len(env.Nodes.ServerIDs(s)) == 0 {
				unadvertised = append(unadvertised, s.String())
			}
		}
	}
	sort.Strings(unadvertised)
	sum := fmt.Sprintf("nodes %s are all advertised at %s: a client reaches at most one of them there", text.IDs(ids, 0), is.endpoint)
	var ex strings.Builder
	fmt.Fprintf(&ex, "%d %s %s from %s to %s, from %s to %s UTC, list nodes %s at the same address %s. ",
		is.responses, strings.Join(is.apis, "/"), text.Word(int(is.responses), "response", "responses"), strings.Join(serverNodeLabels(env, servers), ", "), strings.Join(clients, ", "),
		text.Stamp(is.first), text.Stamp(is.last), text.IDs(ids, 0), is.endpoint)
	fmt.Fprintf(&ex, "Clients connect to a node at the address it advertises, so requests for nodes %s all go to whatever "+
		"listens on %s, which is one process at most: requests for the others reach the wrong broker "+
		"(NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR) or are refused when that one is down. ", text.IDs(ids, 0), is.endpoint)
	if len(unadvertised) > 0 {
		fmt.Fprintf(&ex, "The responses came from %s, an address no node advertises: the brokers listen elsewhere than they advertise.",
			strings.Join(unadvertised, ", "))
	}
	next := fmt.Sprintf("Give each broker its own advertised.listeners, matching the address it listens on (listeners=), "+
		"for nodes %s; check with kafka-broker-api-versions.sh --bootstrap-server %s (one line per node with its address) "+
		"or kcat -L -b %s.", text.IDs(ids, 0), firstOrElse(servers, is.endpoint), firstOrElse(servers, is.endpoint))
	return Finding{
		Severity: Error,
		Summary:  sum,
		First:    is.first,
		Last:     is.last,
		Conns:    is.conns.ints(),
		Nodes:    ids,
		Counts:   map[string]int64{"responses": is.responses},
		Fields: map[string]any{
			"problem":  "shared-endpoint",
			"endpoint": is.endpoint,
			"node_ids": ids,
			"servers":  servers,
			"clients":  clients,
		},
		Evidence:    is.ev.list(),
		Explanation: ex.String(),
		Next:        next,
	}
}

func (d *listenerConflict) loopbackFinding(env *Env, is *advertIssue) Finding {
	ids := is.ids.sorted()
	eps := slices.Clone(is.endpoints)
	sort.Strings(eps)
	ports := make([]string, len(is.ports))
	for i, p := range is.ports {
		ports[i] = strconv.Itoa(int(p))
	}
	// A client that opened a new connection to one of these ports
	// afterwards and produced, fetched or took part in a group reached a
	// broker through the advertised address.
	reached := make(map[netip.Addr]bool)
	if env != nil {
		for _, c := range env.Conns {
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
	}
	stuck := is.clientStrings(func(a netip.Addr) bool { return !reached[a] })
	sev := Warning
	if len(stuck) == 0 && !is.moreClients {
		sev = Info
	}
	all := is.clientStrings(nil)
	servers := is.serverStrings()
	nodes := text.Word(len(ids), "node", "nodes") + " " + text.IDs(ids, 0)
	var sum string
	if sev == Warning {
		sum = fmt.Sprintf("%s advertised at %s to remote %s %s: %s will connect to %s", nodes, strings.Join(eps, ", "),
			text.Word(len(stuck), "client", "clients"), strings.Join(stuck, ", "),
			text.Word(len(stuck), "it", "they"), text.Word(len(stuck), "itself", "themselves"))
	} else {
		sum = fmt.Sprintf("%s advertised at %s to remote %s %s, which reached the brokers anyway (port forwarding)",
			nodes, strings.Join(eps, ", "), text.Word(len(all), "client", "clients"), strings.Join(all, ", "))
	}
	var ex strings.Builder
	fmt.Fprintf(&ex, "%d %s %s from %s, from %s to %s UTC, give remote %s %s the loopback %s %s for %s. ",
		is.responses, strings.Join(is.apis, "/"), text.Word(int(is.responses), "response", "responses"),
		strings.Join(serverNodeLabels(env, servers), ", "), text.Stamp(is.first), text.Stamp(is.last),
		text.Word(len(all), "client", "clients"), strings.Join(all, ", "),
		text.Word(len(eps), "address", "addresses"), strings.Join(eps, ", "), nodes)
	ex.WriteString("A loopback address means the client's own host: after bootstrapping, the client connects to itself, " +
		"gets refused or reaches something else, and never produces or fetches.")
	switch {
	case sev == Info:
		fmt.Fprintf(&ex, " Each of these clients afterwards opened a connection to port %s carrying Produce, Fetch or group requests, "+
			"so the address works for them (a port forward, e.g. Docker's -p); clients elsewhere would fail.", strings.Join(ports, "/"))
	case len(stuck) < len(all):
		fmt.Fprintf(&ex, " Some clients did reach a broker on port %s afterwards (a port forward?); %s did not.", strings.Join(ports, "/"), strings.Join(stuck, ", "))
	default:
		fmt.Fprintf(&ex, " No new connection from %s to port %s carried Produce, Fetch or group requests afterwards.", strings.Join(stuck, ", "), strings.Join(ports, "/"))
	}
	next := fmt.Sprintf("Set advertised.listeners of %s to an address the clients can reach (the broker's IP or DNS name); "+
		"for clients both inside and outside a container or host, use two listeners (e.g. INTERNAL://localhost:%d,EXTERNAL://<host>:<port>) "+
		"with listener.security.protocol.map. Check with kcat -L -b %s from the client host.",
		nodes, is.ports[0], firstOrElse(servers, eps[0]))
	return Finding{
		Severity: sev,
		Summary:  sum,
		First:    is.first,
		Last:     is.last,
		Conns:    is.conns.ints(),
		Nodes:    ids,
		Counts:   map[string]int64{"responses": is.responses},
		Fields: map[string]any{
			"problem":   "loopback",
			"endpoint":  eps[0],
			"endpoints": eps,
			"node_ids":  ids,
			"servers":   servers,
			"clients":   all,
			"stuck":     stuck,
		},
		Evidence:    is.ev.list(),
		Explanation: ex.String(),
		Next:        next,
	}
}

func (is *advertIssue) serverStrings() []string {
	m := make(map[netip.AddrPort]bool, len(is.servers))
	for _, s := range is.servers {
		m[s] = true
	}
	return addrPortStrings(m)
}

// clientStrings returns the clients (those keep accepts, if set), sorted.
func (is *advertIssue) clientStrings(keep func(netip.Addr) bool) []string {
	cl := make([]netip.Addr, 0, len(is.clients))
	for _, c := range is.clients {
		if keep == nil || keep(c) {
			cl = append(cl, c)
		}
	}
	sort.Slice(cl, func(i, j int) bool { return cl[i].Less(cl[j]) })
	out := make([]string, len(cl))
	for i, c := range cl {
		out[i] = c.String()
	}
	return out
}

// nodeTraffic reports a connection carrying requests that go to a specific
// node (not to any bootstrap address): Produce, Fetch, group membership.
func nodeTraffic(c *flows.Conn) bool {
	for _, k := range []kmsg.Key{kmsg.Produce, kmsg.Fetch, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat,
		kmsg.OffsetCommit, kmsg.ConsumerGroupHeartbeat, kmsg.ShareFetch, kmsg.ShareGroupHeartbeat} {
		if c.APIs[int16(k)] > 0 {
			return true
		}
	}
	return false
}

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

func idsOf(bs []advertBroker) []int32 {
	s := idSet{}
	for _, b := range bs {
		s.add(b.id)
	}
	return s.sorted()
}

func advertIssueKeys(m map[string]*advertIssue) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
