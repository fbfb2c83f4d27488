package cluster_test

import (
	"testing"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestNodeEndpoint(t *testing.T) {
	fetch := kmsg.NewPtrFetchResponse()
	fetch.Brokers = []kmsg.FetchResponseBroker{{NodeID: 3, Host: "10.0.0.3", Port: 9092}, {NodeID: 4, Host: "::1", Port: 9093}}
	prod := kmsg.NewPtrProduceResponse()
	prod.Brokers = []kmsg.ProduceResponseBroker{{NodeID: 1, Host: "old", Port: 1}, {NodeID: 1, Host: "kafka-1.example", Port: 9092}}
	for _, tc := range []struct {
		resp kmsg.Response
		id   int32
		want string
	}{
		{fetch, 3, "10.0.0.3:9092"},
		{fetch, 4, "[::1]:9093"},
		{fetch, 5, ""},
		{fetch, -1, ""},
		{prod, 1, "kafka-1.example:9092"},
		{kmsg.NewPtrMetadataResponse(), 1, ""},
	} {
		if got := cluster.NodeEndpoint(tc.resp, tc.id); got != tc.want {
			t.Errorf("%s node %d: %q, want %q", kmsg.NameForKey(tc.resp.Key()), tc.id, got, tc.want)
		}
	}
}

// TestNodeEndpointOr: the endpoint known is returned without allocating;
// another, or none, is found as NodeEndpoint finds it.
func TestNodeEndpointOr(t *testing.T) {
	prod := kmsg.NewPtrProduceResponse()
	prod.Brokers = []kmsg.ProduceResponseBroker{{NodeID: 1, Host: "kafka-1.example", Port: 9092}, {NodeID: 2, Host: "::1", Port: 9093}}
	for _, tc := range []struct {
		id          int32
		known, want string
	}{
		{1, "kafka-1.example:9092", "kafka-1.example:9092"},
		{1, "kafka-1.example:9093", "kafka-1.example:9092"},
		{2, "", "[::1]:9093"},
		{3, "kafka-1.example:9092", ""},
		{-1, "x:1", ""},
	} {
		if got := cluster.NodeEndpointOr(prod, tc.id, tc.known); got != tc.want {
			t.Errorf("node %d known %q: %q, want %q", tc.id, tc.known, got, tc.want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { cluster.NodeEndpointOr(prod, 1, "kafka-1.example:9092") }); a != 0 {
		t.Errorf("%.1f allocations to find the endpoint known, want 0", a)
	}
}
