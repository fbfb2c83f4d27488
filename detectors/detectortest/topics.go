package detectortest

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Builders for fetch sessions (KIP-227), topics by id (KIP-516) and the
// Metadata that names topic ids, replicas and in-sync replicas.

// SessionFetch is a consumer's Fetch v12 of orders-0 in fetch session id at
// epoch (0 with id 0: open a new session; -1: no session).
func SessionFetch(id, epoch int32) *kmsg.FetchRequest {
	r := Fetch(500)
	r.SessionID, r.SessionEpoch = id, epoch
	return r
}

// SessionFetched answers a Fetch with a top-level error code (0: none,
// FETCH_SESSION_ID_NOT_FOUND 70, INVALID_FETCH_SESSION_EPOCH 71) and the
// session id the next fetch may use (0: none). An error answer carries no
// partitions, as a broker's.
func SessionFetched(errCode int16, id int32) *kmsg.FetchResponse {
	r := Fetched(0, 0)
	r.ErrorCode, r.SessionID = errCode, id
	if errCode != 0 {
		r.Topics = nil
	}
	return r
}

// FetchByID is a consumer's Fetch v13 of partition 0 of the topic with id,
// from offset 100.
func FetchByID(id [16]byte) *kmsg.FetchRequest {
	r := Fetch(500)
	r.Version = 13
	r.Topics[0].Topic, r.Topics[0].TopicID = "", id
	return r
}

// FetchedByID answers FetchByID with errCode for partition 0 (0: no error,
// the high watermark at 100).
func FetchedByID(id [16]byte, errCode int16) *kmsg.FetchResponse {
	r := Fetched(errCode, 0)
	r.Version = 13
	r.Topics[0].Topic, r.Topics[0].TopicID = "", id
	return r
}

// ProduceByID is a Produce v13 (topics by id) of one batch to partition 0
// of the topic with id.
func ProduceByID(id [16]byte, batch []byte) *kmsg.ProduceRequest {
	r := ProduceBatches(13, -1, Sent{Partition: 0, Batch: batch})
	r.Topics[0].TopicID = id
	return r
}

// ProducedByID answers ProduceByID with errCode (0: written at offset).
func ProducedByID(id [16]byte, errCode int16, offset int64) *kmsg.ProduceResponse {
	r := ProduceAnswers(13, Answer{Partition: 0, Err: errCode, Offset: offset})
	r.Topics[0].TopicID = id
	return r
}

// MetaPartition is one partition as a Metadata response describes it.
type MetaPartition struct {
	Partition   int32
	Leader      int32
	Replicas    []int32
	ISR         []int32
	LeaderEpoch int32
	Err         int16
}

// MetadataTopic is a Metadata v12 request for topic by name.
func MetadataTopic(topic string) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = 12
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	r.Topics = []kmsg.MetadataRequestTopic{t}
	return r
}

// MetadataAnswer answers with brokers 0..brokers-1 (10.1.0.10:9092
// upwards) and topic with id (errCode for the topic: UNKNOWN_TOPIC_ID 100
// when asked by an id the cluster no longer has) and its partitions.
func MetadataAnswer(brokers int32, topic string, id [16]byte, errCode int16, parts ...MetaPartition) *kmsg.MetadataResponse {
	r := kmsg.NewPtrMetadataResponse()
	r.Version = 12
	for n := range brokers {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = n, "10.1.0."+strconv.Itoa(10+int(n)), 9092
		r.Brokers = append(r.Brokers, b)
	}
	t := kmsg.NewMetadataResponseTopic()
	if topic != "" {
		t.Topic = kmsg.StringPtr(topic)
	}
	t.TopicID, t.ErrorCode = id, errCode
	for _, p := range parts {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch, mp.Replicas, mp.ISR, mp.ErrorCode = p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.Err
		t.Partitions = append(t.Partitions, mp)
	}
	r.Topics = []kmsg.MetadataResponseTopic{t}
	return r
}
