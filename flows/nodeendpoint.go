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
	switch r := resp.(type) {
	case *kmsg.FetchResponse:
		for _, b := range r.Brokers {
			if b.NodeID == id {
				ep = Endpoint(b.Host, b.Port)
			}
		}
	case *kmsg.ProduceResponse:
		for _, b := range r.Brokers {
			if b.NodeID == id {
				ep = Endpoint(b.Host, b.Port)
			}
		}
	}
	return ep
}
