package cluster

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Nodes learns which Kafka node is behind which address, from what the
// traffic says: Metadata and DescribeCluster brokers, Fetch and Produce
// node endpoints and leader hints (KIP-951), raft voter and leader
// endpoints, broker registrations, and node ids in client ids
// ("broker-3-fetcher-0", "raft-client-68", a heartbeat's broker id).
type Nodes struct {
	// byEndpoint maps "host:port" as advertised to node ids (several ids
	// at one endpoint is a listener conflict).
	byEndpoint map[string][]int32
	// byHost maps a client host to the node ids it speaks for.
	byHost map[netip.Addr][]int32
	// endpoints maps a node id to the endpoints advertised for it.
	endpoints map[int32][]string
	// topics maps topic ids to names, from Metadata responses.
	topics map[[16]byte]string
	// dropped counts what the bounds kept out.
	dropped NodesDropped
}

// NodesDropped counts what Nodes did not learn, to stay within its bounds
// (a wire value keys each table): node ids beyond maxIDs at one endpoint
// or client host, endpoints, node ids with endpoints and topic ids beyond
// maxNodeEntries, brokers of one response beyond MaxBrokersPerResponse.
type NodesDropped struct {
	IDs, Endpoints, Topics, Brokers int64
}

// Dropped returns what the bounds kept out.
func (n *Nodes) Dropped() NodesDropped { return n.dropped }

// NewNodes returns an empty table of node identities.
func NewNodes() *Nodes {
	return &Nodes{
		byEndpoint: make(map[string][]int32),
		byHost:     make(map[netip.Addr][]int32),
		endpoints:  make(map[int32][]string),
		topics:     make(map[[16]byte]string),
	}
}

// maxNodeEntries bounds each table against hostile traffic;
// maxIDs the node ids of one endpoint or client host (more than a few is
// already a listener conflict), MaxBrokersPerResponse the brokers learned
// from one Metadata or DescribeCluster response.
const (
	maxNodeEntries        = 65536
	maxIDs                = 64
	MaxBrokersPerResponse = 4096
)

// addID inserts id into the sorted ids, in O(log n) plus a copy of at most
// maxIDs; ok is false if ids were full (id not added).
func addID(ids []int32, id int32) (_ []int32, ok bool) {
	i, found := slices.BinarySearch(ids, id)
	if found {
		return ids, true
	}
	if len(ids) >= maxIDs {
		return ids, false
	}
	return slices.Insert(ids, i, id), true
}

// add is addID on the ids under key in m, counting ids it cannot add.
func addTo[K comparable](n *Nodes, m map[K][]int32, k K, id int32) {
	ids, ok := addID(m[k], id)
	if !ok {
		n.dropped.IDs++
		return
	}
	m[k] = ids
}

// Endpoint joins host and port as Kafka advertises them.
func Endpoint(host string, port int32) string {
	return joinHostPort(host, strconv.Itoa(int(port)))
}

// appendEndpoint appends what Endpoint returns to b.
func appendEndpoint(b []byte, host string, port int32) []byte {
	if strings.Contains(host, ":") {
		b = append(b, '[')
		b = append(b, host...)
		b = append(b, ']')
	} else {
		b = append(b, host...)
	}
	b = append(b, ':')
	return strconv.AppendInt(b, int64(port), 10)
}

func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

// learnEndpoint records that node id is advertised at host:port.
func (n *Nodes) learnEndpoint(id int32, host string, port int32) {
	if id < 0 || host == "" {
		return
	}
	// Known already (every answer of a retry loop names the same
	// nodes): nothing to add, and no string to make.
	var buf [64]byte
	b := appendEndpoint(buf[:0], host, port)
	if ids, ok := n.byEndpoint[string(b)]; ok {
		if _, found := slices.BinarySearch(ids, id); found {
			for _, e := range n.endpoints[id] {
				if e == string(b) {
					return
				}
			}
		}
	}
	ep := string(b)
	if _, ok := n.byEndpoint[ep]; !ok && len(n.byEndpoint) >= maxNodeEntries {
		n.dropped.Endpoints++
		return
	}
	addTo(n, n.byEndpoint, ep, id)
	eps, ok := n.endpoints[id]
	if !ok && len(n.endpoints) >= maxNodeEntries {
		n.dropped.Endpoints++
		return
	}
	if !slices.Contains(eps, ep) && len(eps) < 16 {
		n.endpoints[id] = append(eps, ep)
	}
}

func (n *Nodes) learnHost(addr netip.Addr, id int32) {
	if id < 0 {
		return
	}
	if _, ok := n.byHost[addr]; !ok && len(n.byHost) >= maxNodeEntries {
		n.dropped.Endpoints++
		return
	}
	addTo(n, n.byHost, addr, id)
}

// AtEndpoint returns the node ids advertised at "host:port".
func (n *Nodes) AtEndpoint(ep string) []int32 { return n.byEndpoint[ep] }

// Endpoints returns every advertised endpoint with its node ids, sorted.
func (n *Nodes) Endpoints() map[string][]int32 { return n.byEndpoint }

// EndpointsOf returns the endpoints advertised for node id.
func (n *Nodes) EndpointsOf(id int32) []string { return n.endpoints[id] }

// TopicName returns the name of a topic id learned from Metadata.
func (n *Nodes) TopicName(id [16]byte) (string, bool) {
	if n == nil {
		return "", false
	}
	s, ok := n.topics[id]
	return s, ok
}

// Server returns the node id listening at ap: advertised there by IP, or
// as "localhost" for a loopback address. -1 if unknown or ambiguous.
func (n *Nodes) Server(ap netip.AddrPort) int32 {
	ids := n.ServerIDs(ap)
	if len(ids) == 1 {
		return ids[0]
	}
	return -1
}

// ServerIDs returns every node id advertised at ap.
func (n *Nodes) ServerIDs(ap netip.AddrPort) []int32 {
	addr, local := endpointsOf(ap)
	ids := n.byEndpoint[addr]
	if lids := n.byEndpoint[local]; local != "" && len(lids) > 0 {
		// Both lists are sorted: their union, sorted.
		ids = append(append([]int32(nil), ids...), lids...)
		slices.Sort(ids)
		ids = slices.Compact(ids)
	}
	return ids
}

// endpointsOf are the endpoints ("host:port") a broker may have advertised
// ap as: its address, and "localhost" for a loopback one (local is ""
// otherwise).
func endpointsOf(ap netip.AddrPort) (addr, local string) {
	port := strconv.Itoa(int(ap.Port()))
	addr = joinHostPort(ap.Addr().Unmap().String(), port)
	if ap.Addr().IsLoopback() {
		local = "localhost:" + port
	}
	return addr, local
}

// Host returns the node id a client host speaks for (from its client ids
// and heartbeats), or -1 if unknown or ambiguous.
func (n *Nodes) Host(a netip.Addr) int32 {
	if ids := n.byHost[a.Unmap()]; len(ids) == 1 {
		return ids[0]
	}
	return -1
}

// Label renders an address with its node id when known:
// "node 1003 (10.30.7.85:8081)".
func (n *Nodes) Label(ap netip.AddrPort, server bool) string {
	id := int32(-1)
	if server {
		id = n.Server(ap)
	} else {
		id = n.Host(ap.Addr())
	}
	if id < 0 {
		return ap.String()
	}
	return "node " + strconv.Itoa(int(id)) + " (" + ap.String() + ")"
}

// LearnRequest learns from a request req that the client at host, with
// client id clientID and fetching for fetcher, sent to server: client ids
// and registrations.
func (n *Nodes) LearnRequest(host netip.Addr, server netip.AddrPort, clientID string, fetcher Fetcher, req kmsg.Request) {
	if id, ok := FetcherNode(clientID); ok {
		n.learnHost(host, id)
	}
	if id := fetcher.ID(); id >= 0 {
		n.learnHost(host, id)
	}
	switch r := req.(type) {
	case *kmsg.BrokerHeartbeatRequest:
		n.learnHost(host, r.BrokerID)
	case *kmsg.BrokerRegistrationRequest:
		n.learnHost(host, r.BrokerID)
		for _, l := range r.Listeners {
			n.learnEndpoint(r.BrokerID, l.Host, int32(l.Port))
		}
	case *kmsg.BeginQuorumEpochRequest:
		// v1 names the voter it is sent to (KIP-853): the server is that
		// node. Apache Kafka 4.1's leader sends one every second or so to
		// each voter, the only traffic to a voter no one fetches from.
		if r.Version >= 1 {
			n.LearnServer(server, r.VoterID)
		}
		for _, e := range r.LeaderEndpoints {
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					n.learnEndpoint(p.LeaderID, e.Host, int32(e.Port))
				}
			}
		}
	case *kmsg.VoteRequest:
		if r.Version >= 1 {
			n.LearnServer(server, r.VoterID) // the voter asked, as above
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				n.learnHost(host, p.CandidateID)
			}
		}
	}
}

// brokersTaken is how many of the listed brokers of one response are
// learned (MaxBrokersPerResponse at most); the rest are counted dropped.
func (n *Nodes) brokersTaken(listed int) int {
	if listed > MaxBrokersPerResponse {
		n.dropped.Brokers += int64(listed - MaxBrokersPerResponse)
		return MaxBrokersPerResponse
	}
	return listed
}

// LearnResponse learns from a response: advertised brokers and endpoints.
func (n *Nodes) LearnResponse(resp kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range n.brokersTaken(len(r.Brokers)) {
			b := &r.Brokers[i]
			n.learnEndpoint(b.NodeID, b.Host, b.Port)
		}
		for _, t := range r.Topics {
			if t.Topic != nil {
				n.learnTopic(t.TopicID, *t.Topic)
			}
		}
	case *kmsg.DescribeClusterResponse:
		for i := range n.brokersTaken(len(r.Brokers)) {
			b := &r.Brokers[i]
			n.learnEndpoint(b.NodeID, b.Host, b.Port)
		}
	case *kmsg.FetchResponse, *kmsg.ProduceResponse:
		nodeEndpoints(r, n.learnEndpoint)
	case *kmsg.DescribeQuorumResponse:
		for _, nd := range r.Nodes {
			for _, l := range nd.Listeners {
				n.learnEndpoint(nd.NodeID, l.Host, int32(l.Port))
			}
		}
	case *kmsg.FindCoordinatorResponse:
		if r.Version < 4 {
			n.learnEndpoint(r.NodeID, r.Host, r.Port)
		}
		for _, c := range r.Coordinators {
			n.learnEndpoint(c.NodeID, c.Host, c.Port)
		}
	}
}

// AdvertisedAs returns the endpoints, as brokers advertised them
// ("host:port"), that name ap: by its address, or as "localhost" for a
// loopback one (the endpoints whose node ids ServerIDs returns), sorted.
func (n *Nodes) AdvertisedAs(ap netip.AddrPort) []string {
	addr, local := endpointsOf(ap)
	var out []string
	if len(n.byEndpoint[addr]) > 0 {
		out = append(out, addr)
	}
	if local != "" && len(n.byEndpoint[local]) > 0 {
		// "127.0.0.1:9092" < "[::1]:9092" < "localhost:9092": the
		// address sorts first.
		out = append(out, local)
	}
	return out
}

// LearnServer records that node id serves at ap: a shipped record's
// "node", which its agent learned from traffic the correlator does not
// see (Metadata bodies are not shipped).
func (n *Nodes) LearnServer(ap netip.AddrPort, id int32) {
	if id < 0 || !ap.IsValid() {
		return
	}
	n.learnEndpoint(id, ap.Addr().Unmap().String(), int32(ap.Port()))
}

// LearnTopic records a topic id's name (a shipped record naming both).
func (n *Nodes) LearnTopic(id [16]byte, name string) {
	if name != "" {
		n.learnTopic(id, name)
	}
}

// learnTopic records a topic id's name, within the table's bound.
func (n *Nodes) learnTopic(id [16]byte, name string) {
	if id == ([16]byte{}) {
		return
	}
	if _, ok := n.topics[id]; ok || len(n.topics) < maxNodeEntries {
		n.topics[id] = name
	} else {
		n.dropped.Topics++
	}
}
