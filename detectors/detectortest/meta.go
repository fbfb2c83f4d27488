package detectortest

import "github.com/twmb/franz-go/pkg/kmsg"

// Builders of the cluster's metadata as brokers answer it: Metadata and
// DescribeCluster responses, with the brokers they advertise and the
// leaders, replicas and errors of partitions.

// MetaBroker is a broker as a Metadata response lists it.
func MetaBroker(id int32, host string, port int32) kmsg.MetadataResponseBroker {
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = id, host, port
	return b
}

// Leadership is a partition's leader and replicas as a Metadata response
// answers them.
type Leadership struct {
	ID, Leader int32
	Err        int16
	// Replicas, ISR and Offline are the replicas, the in-sync ones and
	// the offline ones (Offline nil: none).
	Replicas, ISR, Offline []int32
}

// Led is partition p led by node l, its replicas 1, 2 and 3 in sync.
func Led(p, l int32) Leadership {
	return Leadership{ID: p, Leader: l, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
}

// Leaderless is partition p answered LEADER_NOT_AVAILABLE with leader -1:
// its only replica, node r, is offline.
func Leaderless(p, r int32) Leadership {
	return Leadership{ID: p, Leader: -1, Err: 5, Replicas: []int32{r}, ISR: []int32{r}, Offline: []int32{r}}
}

// MetaTopic is a topic of a Metadata response with its partitions.
func MetaTopic(name string, parts ...Leadership) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr(name)
	for _, p := range parts {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.ErrorCode = p.ID, p.Leader, p.Err
		mp.Replicas, mp.ISR, mp.OfflineReplicas = p.Replicas, p.ISR, p.Offline
		if mp.OfflineReplicas == nil {
			mp.OfflineReplicas = []int32{}
		}
		t.Partitions = append(t.Partitions, mp)
	}
	return t
}

// Metadata is a Metadata request of the given version for the topics, and
// its response listing brokers and the topics.
func Metadata(version int16, brokers []kmsg.MetadataResponseBroker, topics ...kmsg.MetadataResponseTopic) (*kmsg.MetadataRequest, *kmsg.MetadataResponse) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = t.Topic
		req.Topics = append(req.Topics, rt)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = version
	resp.Brokers = brokers
	resp.ClusterID = kmsg.StringPtr("test-cluster")
	resp.ControllerID = 1
	resp.Topics = topics
	return req, resp
}

// ClusterBroker is a broker as a DescribeCluster response lists it.
func ClusterBroker(id int32, host string, port int32) kmsg.DescribeClusterResponseBroker {
	b := kmsg.NewDescribeClusterResponseBroker()
	b.NodeID, b.Host, b.Port = id, host, port
	return b
}

// DescribeCluster is a DescribeCluster v0 request and its response listing
// brokers.
func DescribeCluster(brokers ...kmsg.DescribeClusterResponseBroker) (*kmsg.DescribeClusterRequest, *kmsg.DescribeClusterResponse) {
	req := kmsg.NewPtrDescribeClusterRequest()
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.ClusterID = "test-cluster"
	resp.ControllerID = 1
	resp.Brokers = brokers
	return req, resp
}
