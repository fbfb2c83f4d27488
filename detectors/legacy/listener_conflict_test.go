package legacy_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// brokerAt writes one Metadata exchange at second s advertising brokers.
func brokersAt(p *kafkaPeer, s float64, brokers ...kmsg.MetadataResponseBroker) {
	req, resp := metadata(brokers, mdTopic("orders", led(0, 1)))
	p.exchange(at(s), req, resp)
}

func describeCluster(p *kafkaPeer, s float64, brokers ...kmsg.DescribeClusterResponseBroker) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version = 0
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.Version = 0
	resp.ClusterID = "test-cluster"
	resp.ControllerID = 1
	resp.Brokers = brokers
	p.exchange(at(s), req, resp)
}

func dcBroker(id int32, host string, port int32) kmsg.DescribeClusterResponseBroker {
	b := kmsg.NewDescribeClusterResponseBroker()
	b.NodeID, b.Host, b.Port = id, host, port
	return b
}

// produceOn writes a Produce exchange on p at second s.
func produceOn(p *kafkaPeer, s float64) {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = gen.RecordBatch(0, at(s), []gen.Record{{Value: []byte("v")}})
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	st := kmsg.NewProduceResponseTopic()
	st.Topic = "orders"
	sp := kmsg.NewProduceResponseTopicPartition()
	sp.BaseOffset, sp.LogAppendTime = 100, -1
	st.Partitions = []kmsg.ProduceResponseTopicPartition{sp}
	resp.Topics = []kmsg.ProduceResponseTopic{st}
	p.exchange(at(s), req, resp)
}

func TestAdvertisedListenerConflict(t *testing.T) {
	const id = "advertised-listener-conflict"
	tests := []struct {
		name   string
		script func(w *gen.Writer)
		// want is the findings by severity; each has these fields.
		sev    []detectors.Severity
		nodes  []int32
		counts map[string]int64
		fields map[string]any
	}{
		{
			name: "two node ids at one host:port",
			script: func(w *gen.Writer) {
				p := dial(w, "10.0.0.1:40000", "10.0.0.2:9092", at(0))
				for s := range 3 {
					brokersAt(p, float64(s), mdBroker(1, "10.0.0.2", 9092), mdBroker(2, "10.0.0.2", 9092), mdBroker(3, "10.0.0.4", 9092))
				}
			},
			sev:    []detectors.Severity{detectors.Error},
			nodes:  []int32{1, 2},
			counts: map[string]int64{"responses": 3},
			fields: map[string]any{"endpoint": "10.0.0.2:9092", "node_ids": []int32{1, 2}, "servers": []string{"10.0.0.2:9092"}},
		},
		{
			name: "localhost and 127.0.0.1 at one port are one listener",
			script: func(w *gen.Writer) {
				p := dial(w, "127.0.0.1:40000", "127.0.0.1:9092", at(0))
				brokersAt(p, 0, mdBroker(1, "localhost", 9092), mdBroker(2, "127.0.0.1", 9092))
			},
			sev:    []detectors.Severity{detectors.Error},
			nodes:  []int32{1, 2},
			fields: map[string]any{"node_ids": []int32{1, 2}},
		},
		{
			name: "host names compare case-insensitively",
			script: func(w *gen.Writer) {
				p := dial(w, "10.0.0.1:40000", "10.0.0.2:9092", at(0))
				brokersAt(p, 0, mdBroker(1, "kafka-0.example", 9092), mdBroker(2, "KAFKA-0.example", 9092))
			},
			sev:   []detectors.Severity{detectors.Error},
			nodes: []int32{1, 2},
		},
		{
			name: "DescribeCluster with two ids at one endpoint",
			script: func(w *gen.Writer) {
				p := dial(w, "10.0.0.1:40000", "10.0.0.2:9092", at(0))
				describeCluster(p, 0, dcBroker(7, "kafka.internal", 9092), dcBroker(8, "kafka.internal", 9092))
			},
			sev:    []detectors.Severity{detectors.Error},
			nodes:  []int32{7, 8},
			fields: map[string]any{"endpoint": "kafka.internal:9092", "node_ids": []int32{7, 8}},
		},
		{
			name: "a node that moves to another address is not a conflict",
			script: func(w *gen.Writer) {
				p := dial(w, "10.0.0.1:40000", "10.0.0.2:9092", at(0))
				brokersAt(p, 0, mdBroker(1, "10.0.0.2", 9092), mdBroker(2, "10.0.0.3", 9092))
				// Node 2 replaced node 1's host; node 1 moved.
				brokersAt(p, 10, mdBroker(1, "10.0.0.9", 9092), mdBroker(2, "10.0.0.2", 9092))
			},
		},
		{
			name: "the same node listed twice at one endpoint",
			script: func(w *gen.Writer) {
				p := dial(w, "10.0.0.1:40000", "10.0.0.2:9092", at(0))
				brokersAt(p, 0, mdBroker(1, "10.0.0.2", 9092), mdBroker(1, "10.0.0.2", 9092))
			},
		},
		{
			name: "brokers on one host at different ports (kfake)",
			script: func(w *gen.Writer) {
				p := dial(w, "127.0.0.1:40000", "127.0.0.1:9092", at(0))
				brokersAt(p, 0, mdBroker(0, "127.0.0.1", 9092), mdBroker(1, "127.0.0.1", 9093), mdBroker(2, "127.0.0.1", 9094))
			},
		},
		{
			name: "localhost told to a remote client",
			script: func(w *gen.Writer) {
				p := dial(w, "10.0.0.1:40000", "10.0.0.2:9092", at(0))
				brokersAt(p, 0, mdBroker(1, "localhost", 9092))
				brokersAt(p, 1, mdBroker(1, "localhost", 9092))
			},
			sev:    []detectors.Severity{detectors.Warning},
			nodes:  []int32{1},
			counts: map[string]int64{"responses": 2},
			fields: map[string]any{"problem": "loopback", "endpoint": "localhost:9092", "node_ids": []int32{1}, "stuck": []string{"10.0.0.1"}},
		},
		{
			name: "a whole cluster at localhost told to a remote client: one finding",
			script: func(w *gen.Writer) {
				p := dial(w, "10.0.0.1:40000", "10.0.0.2:9092", at(0))
				brokersAt(p, 0, mdBroker(0, "localhost", 9092), mdBroker(1, "localhost", 9093), mdBroker(2, "localhost", 9094))
			},
			sev:   []detectors.Severity{detectors.Warning},
			nodes: []int32{0, 1, 2},
			fields: map[string]any{"endpoint": "localhost:9092", "endpoints": []string{"localhost:9092", "localhost:9093", "localhost:9094"},
				"node_ids": []int32{0, 1, 2}, "stuck": []string{"10.0.0.1"}},
		},
		{
			name: "127.0.1.1 told to a remote client",
			script: func(w *gen.Writer) {
				p := dial(w, "10.0.0.1:40000", "10.0.0.2:9092", at(0))
				brokersAt(p, 0, mdBroker(1, "127.0.1.1", 9092))
			},
			sev:    []detectors.Severity{detectors.Warning},
			fields: map[string]any{"endpoint": "127.0.1.1:9092"},
		},
		{
			name: "localhost told to a local client",
			script: func(w *gen.Writer) {
				p := dial(w, "127.0.0.1:40000", "127.0.0.1:9092", at(0))
				brokersAt(p, 0, mdBroker(1, "localhost", 9092))
			},
		},
		{
			name: "localhost told to a client on the broker's own address",
			script: func(w *gen.Writer) {
				p := dial(w, "10.0.0.2:40000", "10.0.0.2:9092", at(0))
				brokersAt(p, 0, mdBroker(1, "localhost", 9092))
			},
		},
		{
			name: "localhost through a port forward: the client then produces",
			script: func(w *gen.Writer) {
				p := dial(w, "172.17.0.1:40000", "172.17.0.2:9092", at(0))
				brokersAt(p, 0, mdBroker(1, "localhost", 9092))
				q := dial(w, "172.17.0.1:40001", "172.17.0.2:9092", at(1))
				produceOn(q, 1.1)
			},
			sev:    []detectors.Severity{detectors.Info},
			fields: map[string]any{"clients": []string{"172.17.0.1"}, "stuck": []string{}},
		},
		{
			name: "a remote client that only refreshes metadata is stuck",
			script: func(w *gen.Writer) {
				p := dial(w, "10.0.0.1:40000", "10.0.0.2:9092", at(0))
				brokersAt(p, 0, mdBroker(1, "localhost", 9092))
				q := dial(w, "10.0.0.1:40001", "10.0.0.2:9092", at(1))
				brokersAt(q, 1.1, mdBroker(1, "localhost", 9092))
			},
			sev: []detectors.Severity{detectors.Warning},
		},
		{
			name: "a host name that is not loopback",
			script: func(w *gen.Writer) {
				p := dial(w, "10.0.0.1:40000", "10.0.0.2:9092", at(0))
				brokersAt(p, 0, mdBroker(1, "VM_9_227_centos", 9092))
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := trafficFindings(t, id, nil, tc.script)
			if len(fs) != len(tc.sev) {
				t.Fatalf("want %d findings, got:%s", len(tc.sev), describeFindings(fs))
			}
			for i, f := range fs {
				checkFinding(t, f, tc.sev[i], tc.nodes, tc.counts, tc.fields)
			}
		})
	}
}
