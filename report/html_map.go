package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/kfsniff/kfsniff/detectors"
)

// The map of who talks to whom: clients, brokers and controllers as
// nodes, one edge per pair with the roles of its connections, marked
// failing when a finding at warning or above implicates it (its evidence
// is on one of the edge's connections or refused attempts), with the
// findings' numbers. Error responses, unanswered requests, resets and
// refused attempts are counted on every edge, but only the severity
// policy (docs/detectors.md) says which of them are failures: a first
// JoinGroup's MEMBER_ID_REQUIRED or a long-poll Fetch cut at shutdown is
// not.

// Map is the nodes and edges of the map.
type Map struct {
	Nodes []MapNode `json:"nodes"`
	Edges []MapEdge `json:"edges"`
	// NodesNotListed counts nodes past the bound, folded into "other
	// clients" and "other servers".
	NodesNotListed int `json:"nodes_not_listed,omitempty"`
}

// MapNode is a client (by host and client id), or a server: a node id
// when one was learned for it, else its endpoint.
type MapNode struct {
	ID string `json:"id"`
	// Kind is client, broker, controller or broker+controller (a node
	// that answers both clients or replicas, and KRaft's liveness or
	// raft traffic).
	Kind  string `json:"kind"`
	Label string `json:"label"`
}

// MapEdge is the traffic from one node to another.
type MapEdge struct {
	From  string   `json:"from"`
	To    string   `json:"to"`
	Roles []string `json:"roles"`
	// Conns are the connections' numbers (the first maxEdgeConns).
	Conns      []int `json:"connections"`
	ConnCount  int   `json:"connection_count"`
	Requests   int64 `json:"requests"`
	Errors     int64 `json:"error_responses"`
	Unanswered int64 `json:"unanswered"`
	Resets     int   `json:"resets"`
	Refused    int64 `json:"refused_attempts"`
	// Findings are the numbers (1-based, in the report's order) of the
	// findings at warning or above whose evidence is on this edge.
	Findings []int `json:"findings"`
	// Incidents are the numbers (1-based, in the report's order) of the
	// incidents those findings belong to: the edges of an incident carry
	// its number.
	Incidents []int `json:"incidents"`
	// Failing is len(Findings) > 0.
	Failing bool `json:"failing"`
}

const (
	maxMapNodes  = 48
	maxEdgeConns = 16
)

// roleOrder ranks roles for an edge's colour: the first of an edge's roles
// in this order is the one it is drawn with.
var roleOrder = []string{"replication", "raft", "liveness", "producer", "consumer", "group", "transactions", "admin", "metadata"}

func roleRank(r string) int {
	if i := slices.Index(roleOrder, r); i >= 0 {
		return i
	}
	return len(roleOrder)
}

// mainRole is the role an edge is drawn with.
func (e *MapEdge) mainRole() string {
	if len(e.Roles) == 0 {
		return ""
	}
	return e.Roles[0]
}

func buildMap(r *Report) Map {
	type node struct {
		MapNode
		server, client     bool // seen as a server, as a client
		control, dataPlane bool // served liveness/raft, served other roles
		order              int
	}
	nodes := map[string]*node{}
	// A server endpoint's node, from the connections that learned it
	// (connection events carry only endpoints).
	endpointNode := map[string]int32{}
	for _, c := range r.Connections {
		if c.ServerNode != nil {
			endpointNode[c.Server] = *c.ServerNode
		}
	}
	notListed := 0
	get := func(id, label string, server bool) *node {
		if n := nodes[id]; n != nil {
			return n
		}
		if len(nodes) >= maxMapNodes-2 {
			notListed++
			id, label = "other clients", "other clients"
			if server {
				id, label = "other servers", "other servers"
			}
			if n := nodes[id]; n != nil {
				return n
			}
		}
		n := &node{MapNode: MapNode{ID: id, Label: label}, order: len(nodes)}
		nodes[id] = n
		return n
	}
	serverOf := func(addr string, id *int32) *node {
		var n *node
		if id != nil {
			n = get(fmt.Sprintf("node %d", *id), nodeLabel(addr, id), true)
		} else if nid, ok := endpointNode[addr]; ok {
			n = get(fmt.Sprintf("node %d", nid), nodeLabel(addr, &nid), true)
		} else {
			n = get("server "+addr, Clean(addr), true)
		}
		if !n.server && n.client && id != nil {
			n.Label = nodeLabel(addr, id) // first seen as a client: no address then
		}
		n.server = true
		return n
	}
	clientOf := func(addr string, node *int32, clientIDs []string) *node {
		if node != nil {
			n := get(fmt.Sprintf("node %d", *node), fmt.Sprintf("node %d", *node), false)
			n.client = true
			return n
		}
		host := hostOf(addr)
		id, label := "client "+host, Clean(host)
		if len(clientIDs) > 0 {
			id += " " + clientIDs[0]
			label = Clean(clientIDs[0]) + " @ " + label
		}
		n := get(id, label, false)
		n.client = true
		return n
	}
	type pair struct{ from, to string }
	edges := map[pair]*MapEdge{}
	edge := func(from, to *node) *MapEdge {
		k := pair{from.ID, to.ID}
		e := edges[k]
		if e == nil {
			e = &MapEdge{From: from.ID, To: to.ID, Roles: []string{}, Conns: []int{}, Findings: []int{}, Incidents: []int{}}
			edges[k] = e
		}
		return e
	}
	// Where evidence points: a connection, or a refused attempt's packet.
	connEdge := map[int]*MapEdge{}
	type place struct {
		file   int
		packet uint64
	}
	eventEdge := map[place]*MapEdge{}
	for _, c := range r.Connections {
		to := serverOf(c.Server, c.ServerNode)
		from := clientOf(c.Client, c.ClientNode, c.ClientIDs)
		e := edge(from, to)
		connEdge[c.ID] = e
		for _, role := range c.Roles {
			if !slices.Contains(e.Roles, role) {
				e.Roles = append(e.Roles, role)
			}
			if role == "liveness" || role == "raft" {
				to.control = true
			} else if role != "metadata" && role != "" {
				to.dataPlane = true
			}
		}
		e.ConnCount++
		if len(e.Conns) < maxEdgeConns {
			e.Conns = append(e.Conns, c.ID)
		}
		e.Requests += int64(c.Requests)
		e.Errors += int64(c.Errors)
		e.Unanswered += int64(c.Unanswered)
		if c.Reset {
			e.Resets++
		}
	}
	for _, ev := range r.Events {
		to := serverOf(ev.Server, nil)
		from := clientOf(ev.Client, nil, nil)
		e := edge(from, to)
		e.Refused += int64(max(ev.Attempts, 1))
		eventEdge[place{ev.File, ev.Packet}] = e
	}
	for i, f := range r.Findings {
		if f.Severity < detectors.Warning {
			continue
		}
		for _, ev := range f.Evidence {
			e := connEdge[ev.Conn]
			if ev.Conn == 0 || e == nil {
				e = eventEdge[place{ev.File, ev.Packet}]
			}
			if e != nil && !slices.Contains(e.Findings, i+1) {
				e.Findings = append(e.Findings, i+1)
			}
		}
	}
	m := Map{Nodes: []MapNode{}, Edges: []MapEdge{}, NodesNotListed: notListed}
	all := make([]*node, 0, len(nodes))
	for _, n := range nodes {
		switch {
		case !n.server && strings.HasPrefix(n.ID, "node "):
			n.Kind = "broker" // a Kafka node as a client: a follower, an observer
		case !n.server:
			n.Kind = "client"
		case n.control && n.dataPlane:
			n.Kind = "broker+controller"
		case n.control:
			n.Kind = "controller"
		default:
			n.Kind = "broker"
		}
		all = append(all, n)
	}
	slices.SortFunc(all, func(a, b *node) int {
		return cmp.Or(cmp.Compare(kindRank(a.Kind), kindRank(b.Kind)), naturalCompare(a.ID, b.ID))
	})
	for _, n := range all {
		m.Nodes = append(m.Nodes, n.MapNode)
	}
	// Each finding's incident, by the finding's number.
	incidentOf := map[int]int{}
	for n, in := range incidentsOf(r) {
		for _, i := range in.Findings {
			incidentOf[i+1] = n + 1
		}
	}
	for _, e := range edges {
		slices.SortStableFunc(e.Roles, func(a, b string) int { return cmp.Compare(roleRank(a), roleRank(b)) })
		slices.Sort(e.Findings)
		e.Failing = len(e.Findings) > 0
		for _, f := range e.Findings {
			if n := incidentOf[f]; n > 0 && !slices.Contains(e.Incidents, n) {
				e.Incidents = append(e.Incidents, n)
			}
		}
		slices.Sort(e.Incidents)
		m.Edges = append(m.Edges, *e)
	}
	slices.SortFunc(m.Edges, func(a, b MapEdge) int {
		return cmp.Or(naturalCompare(a.From, b.From), naturalCompare(a.To, b.To))
	})
	return m
}

func kindRank(k string) int {
	return slices.Index([]string{"client", "broker", "broker+controller", "controller"}, k)
}

// hostOf is the address of "ip:port" or "[ip6]:port".
func hostOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i > 0 {
		return strings.Trim(addr[:i], "[]")
	}
	return addr
}

// naturalCompare orders "node 2" before "node 10".
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
