package detectortest

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// Builders of the requests and responses most rules see. Families of
// rules add theirs in files of their own here.

// Produce is a Produce request of one record to orders-0, acks=all.
func Produce(version int16) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = version, -1, 30000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "orders"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = gen.RecordBatch(0, T0, []gen.Record{{Value: []byte("order")}})
	t.Partitions = []kmsg.ProduceRequestTopicPartition{p}
	r.Topics = []kmsg.ProduceRequestTopic{t}
	return r
}

// Produced answers Produce for orders-0 with errCode and a throttle time.
func Produced(version, errCode int16, throttleMs int32) *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	r.Version, r.ThrottleMillis = version, throttleMs
	t := kmsg.NewProduceResponseTopic()
	t.Topic = "orders"
	p := kmsg.NewProduceResponseTopicPartition()
	p.ErrorCode, p.BaseOffset, p.LogAppendTime = errCode, 100, -1
	t.Partitions = []kmsg.ProduceResponseTopicPartition{p}
	r.Topics = []kmsg.ProduceResponseTopic{t}
	return r
}

// Fetch is a consumer's Fetch v12 of orders-0 from offset 100.
func Fetch(maxWaitMs int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.ReplicaID, r.MaxWaitMillis, r.MinBytes, r.MaxBytes = 12, -1, maxWaitMs, 1, 52428800
	t := kmsg.NewFetchRequestTopic()
	t.Topic = "orders"
	p := kmsg.NewFetchRequestTopicPartition()
	p.FetchOffset, p.PartitionMaxBytes = 100, 1048576
	t.Partitions = []kmsg.FetchRequestTopicPartition{p}
	r.Topics = []kmsg.FetchRequestTopic{t}
	return r
}

// Fetched answers Fetch with errCode and a throttle time, no records.
func Fetched(errCode int16, throttleMs int32) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version, r.ThrottleMillis = 12, throttleMs
	t := kmsg.NewFetchResponseTopic()
	t.Topic = "orders"
	p := kmsg.NewFetchResponseTopicPartition()
	p.ErrorCode, p.HighWatermark, p.LastStableOffset = errCode, 100, 100
	if errCode != 0 {
		p.HighWatermark, p.LastStableOffset = -1, -1
	}
	p.RecordBatches = []byte{}
	t.Partitions = []kmsg.FetchResponseTopicPartition{p}
	r.Topics = []kmsg.FetchResponseTopic{t}
	return r
}
