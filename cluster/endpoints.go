package cluster

import "github.com/twmb/franz-go/pkg/kmsg"

// NodeEndpoint returns the endpoint ("host:port") that a Produce or Fetch
// response gives for node id among its node endpoints (KIP-951: sent with
// the leader hint of NOT_LEADER_OR_FOLLOWER answers), "" if none or id is
// negative. Should a response list id twice, its last entry counts.
func NodeEndpoint(resp kmsg.Response, id int32) string {
	return NodeEndpointOr(resp, id, "")
}

// NodeEndpointOr is NodeEndpoint, returning known, without allocating,
// when the endpoint is known: a rule that keeps a leader's endpoint asks
// for it at every answer of a retry loop, and it hardly ever changes.
func NodeEndpointOr(resp kmsg.Response, id int32, known string) string {
	if id < 0 {
		return ""
	}
	var host string
	var port int32
	found := false
	nodeEndpoints(resp, func(node int32, h string, p int32) {
		if node == id {
			host, port, found = h, p, true
		}
	})
	if !found {
		return ""
	}
	var buf [64]byte
	ep := appendEndpoint(buf[:0], host, port)
	if string(ep) == known {
		return known
	}
	return string(ep)
}

// nodeEndpoints calls fn for each node endpoint a Produce or Fetch response
// lists (KIP-951), in the response's order.
func nodeEndpoints(resp kmsg.Response, fn func(id int32, host string, port int32)) {
	switch r := resp.(type) {
	case *kmsg.FetchResponse:
		for i := range r.Brokers {
			b := &r.Brokers[i]
			fn(b.NodeID, b.Host, b.Port)
		}
	case *kmsg.ProduceResponse:
		for i := range r.Brokers {
			b := &r.Brokers[i]
			fn(b.NodeID, b.Host, b.Port)
		}
	}
}

// Brokers calls fn for each broker a Metadata or DescribeCluster response
// lists, with the endpoint it advertises (on the listener the client came
// through), in the response's order: the cluster as the answering broker
// knows it at that moment. It reports whether resp is such a response.
// Nodes learns from these and from other responses' endpoints; a rule
// that judges one response's list on its own reads it here.
func Brokers(resp kmsg.Response, fn func(id int32, host string, port int32)) bool {
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			b := &r.Brokers[i]
			fn(b.NodeID, b.Host, b.Port)
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			b := &r.Brokers[i]
			fn(b.NodeID, b.Host, b.Port)
		}
	default:
		return false
	}
	return true
}
