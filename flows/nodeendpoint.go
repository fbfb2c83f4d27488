package flows

import "github.com/twmb/franz-go/pkg/kmsg"

// NodeEndpoint returns the endpoint ("host:port") that a Produce or Fetch
// response gives for node id among its node endpoints (KIP-951: sent with
// the leader hint of NOT_LEADER_OR_FOLLOWER answers), "" if none or id is
// negative. Should a response list id twice, its last entry counts.
func NodeEndpoint(resp kmsg.Response, id int32) string {
	ep := ""
	if id < 0 {
		return ep
	}
	nodeEndpoints(resp, func(node int32, host string, port int32) {
		if node == id {
			ep = Endpoint(host, port)
		}
	})
	return ep
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
