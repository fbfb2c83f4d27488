package detectortest

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Builders for the lag rules: Fetch requests at chosen offsets and their
// answers with chosen high watermarks, and consumer group requests.

// FetchAt is a Fetch v12 (no fetch session) of topic's partitions 0, 1,
// ... at offsets, by a consumer (replica -1) or a follower (its node id).
func FetchAt(replica int32, topic string, offsets ...int64) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.ReplicaID, r.MaxWaitMillis, r.MinBytes, r.MaxBytes, r.SessionEpoch = 12, replica, 500, 1, 52428800, -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	for i, off := range offsets {
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes = int32(i), off, 1048576
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = []kmsg.FetchRequestTopic{t}
	return r
}

// FetchedAt answers FetchAt with the high watermarks of partitions 0, 1,
// ... (no records; a negative one is answered OFFSET_OUT_OF_RANGE).
func FetchedAt(topic string, hws ...int64) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version = 12
	t := kmsg.NewFetchResponseTopic()
	t.Topic = topic
	for i, hw := range hws {
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition, p.HighWatermark, p.LastStableOffset, p.LogStartOffset = int32(i), hw, hw, 0
		if hw < 0 {
			p.ErrorCode, p.HighWatermark, p.LastStableOffset = 1, -1, -1
		}
		p.RecordBatches = []byte{}
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = []kmsg.FetchResponseTopic{t}
	return r
}

// GroupHeartbeat is a classic consumer group member's Heartbeat v4, and
// its answer.
func GroupHeartbeat(group string) (*kmsg.HeartbeatRequest, *kmsg.HeartbeatResponse) {
	q := kmsg.NewPtrHeartbeatRequest()
	q.Version, q.Group, q.Generation, q.MemberID = 4, group, 1, "member-1"
	r := kmsg.NewPtrHeartbeatResponse()
	r.Version = 4
	return q, r
}
