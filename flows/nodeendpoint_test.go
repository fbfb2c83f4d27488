package flows_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/flows"
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
		if got := flows.NodeEndpoint(tc.resp, tc.id); got != tc.want {
			t.Errorf("%s node %d: %q, want %q", kmsg.NameForKey(tc.resp.Key()), tc.id, got, tc.want)
		}
	}
}
