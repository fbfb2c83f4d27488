package cluster_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
)

func TestBrokers(t *testing.T) {
	meta := kmsg.NewPtrMetadataResponse()
	meta.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 2, Host: "kafka-2", Port: 9092}, {NodeID: 1, Host: "::1", Port: 9093}}
	dc := kmsg.NewPtrDescribeClusterResponse()
	dc.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: 7, Host: "localhost", Port: 9492}}
	fetch := kmsg.NewPtrFetchResponse()
	fetch.Brokers = []kmsg.FetchResponseBroker{{NodeID: 3, Host: "kafka-3", Port: 9092}}
	for _, tc := range []struct {
		resp kmsg.Response
		ok   bool
		want string
	}{
		{meta, true, "[2@kafka-2:9092 1@[::1]:9093]"},
		{dc, true, "[7@localhost:9492]"},
		// A Fetch answer's node endpoints name only the leaders it
		// points at, not the cluster.
		{fetch, false, "[]"},
	} {
		var got []string
		ok := cluster.Brokers(tc.resp, func(id int32, host string, port int32) {
			got = append(got, fmt.Sprintf("%d@%s", id, cluster.Endpoint(host, port)))
		})
		if ok != tc.ok || fmt.Sprint(got) != tc.want {
			t.Errorf("%s: %v %v, want %v %s", kmsg.NameForKey(tc.resp.Key()), ok, got, tc.ok, tc.want)
		}
	}
}
