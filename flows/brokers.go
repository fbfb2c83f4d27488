package flows

import "github.com/twmb/franz-go/pkg/kmsg"

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
