package detectortest

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/flows"
)

// Builders for the lag rules: Fetch requests at chosen offsets and their
// answers with chosen high watermarks, and consumer group requests.

// FetchOffsets is a Fetch v12 (no fetch session) of topic's partitions 0, 1,
// ... at offsets, by a consumer (replica -1) or a follower (its node id).
func FetchOffsets(replica int32, topic string, offsets ...int64) *kmsg.FetchRequest {
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

// FetchedAt answers FetchOffsets with the high watermarks of partitions 0, 1,
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

// Fetches delivers n Fetch exchanges of topic on c, every apart from at,
// each answered 1 ms later: fetch i asks partitions 0, 1, ... from
// offsets(i) and is answered with the high watermarks hws(i). It returns
// the time of the next fetch.
func (h *Harness) Fetches(c *flows.Conn, clientID string, replica int32, topic string, at, every time.Duration, n int, offsets, hws func(i int) []int64) time.Duration {
	for i := range n {
		h.Call(c, At(at), time.Millisecond, clientID, FetchOffsets(replica, topic, offsets(i)...), FetchedAt(topic, hws(i)...))
		at += every
	}
	return at
}
