package decode

import (
	"github.com/kfsniff/kfsniff/cluster"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// PartitionAnswer is what a Produce or Fetch response says of one
// partition: its error code, the leader it names (KIP-951's CurrentLeader,
// as the response carries it: -1 and -1 when it names none, as before
// Produce v10 and Fetch v12), and for Fetch its high watermark and last
// stable offset (-1 for Produce, and where the version has none).
// TopicIndex and Index are its place in the response, which Kafka makes
// its place in the request (FetchOffsetAt).
type PartitionAnswer struct {
	cluster.Partition
	ErrorCode                       int16
	Leader, Epoch                   int32
	HighWatermark, LastStableOffset int64
	TopicIndex, Index               int
}

// PartitionAnswers calls fn for each partition of a Produce or Fetch
// response, in response order.
func PartitionAnswers(resp kmsg.Response, fn func(a PartitionAnswer)) {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for i := range r.Topics {
			t := &r.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				fn(PartitionAnswer{Partition: cluster.Partition{Topic: t.Topic, TopicID: t.TopicID, Num: p.Partition}, ErrorCode: p.ErrorCode,
					Leader: p.CurrentLeader.LeaderID, Epoch: p.CurrentLeader.LeaderEpoch,
					HighWatermark: -1, LastStableOffset: -1, TopicIndex: i, Index: j})
			}
		}
	case *kmsg.FetchResponse:
		for i := range r.Topics {
			t := &r.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				fn(PartitionAnswer{Partition: cluster.Partition{Topic: t.Topic, TopicID: t.TopicID, Num: p.Partition}, ErrorCode: p.ErrorCode,
					Leader: p.CurrentLeader.LeaderID, Epoch: p.CurrentLeader.LeaderEpoch,
					HighWatermark: p.HighWatermark, LastStableOffset: p.LastStableOffset, TopicIndex: i, Index: j})
			}
		}
	}
}
