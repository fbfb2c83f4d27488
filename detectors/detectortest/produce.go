package detectortest

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Builders for the producer's side: idempotent batches with their producer
// id, epoch and base sequence, Produce requests to several partitions and
// their per-partition answers, InitProducerId.

// Sent is one partition's batch in a Produce request.
type Sent struct {
	Topic     string
	Partition int32
	Batch     []byte
}

// Answer is one partition's answer in a Produce response: an error code,
// or the base offset the batch was written at.
type Answer struct {
	Topic     string
	Partition int32
	Err       int16
	Offset    int64
}

// IdempotentBatch encodes the records valued values (in order, 1 ms apart
// from ts, in ms since the epoch) as one magic-2 batch of producer pid at
// epoch with base sequence seq (pid -1: not idempotent, epoch and seq -1
// too). The same values and ts give the same records, whatever the header.
func IdempotentBatch(pid int64, epoch int16, seq int32, ts int64, values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	if pid < 0 {
		epoch, seq = -1, -1
	}
	last := int32(max(len(values)-1, 0))
	b := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: last, FirstTimestamp: ts, MaxTimestamp: ts + int64(last),
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: int32(len(values)), Records: recs}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}

// ProduceBatches is a Produce request (acks as given) carrying the
// batches, topics by name.
func ProduceBatches(version, acks int16, sent ...Sent) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = version, acks, 30000
	for _, s := range sent {
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition, p.Records = s.Partition, s.Batch
		t := topicIn(&r.Topics, func(t *kmsg.ProduceRequestTopic) *string { return &t.Topic }, s.Topic)
		t.Partitions = append(t.Partitions, p)
	}
	return r
}

// ProduceAnswers is a Produce response with the answers, topics by name.
func ProduceAnswers(version int16, answers ...Answer) *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	r.Version = version
	for _, a := range answers {
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition, p.ErrorCode, p.BaseOffset, p.LogAppendTime, p.LogStartOffset = a.Partition, a.Err, a.Offset, -1, -1
		if a.Err != 0 {
			p.BaseOffset = -1
		}
		t := topicIn(&r.Topics, func(t *kmsg.ProduceResponseTopic) *string { return &t.Topic }, a.Topic)
		t.Partitions = append(t.Partitions, p)
	}
	return r
}

// topicIn returns the topic named topic in ts, appended if absent (kmsg's
// topics start empty but for the name).
func topicIn[T any](ts *[]T, name func(*T) *string, topic string) *T {
	for i := range *ts {
		if *name(&(*ts)[i]) == topic {
			return &(*ts)[i]
		}
	}
	var t T
	*name(&t) = topic
	*ts = append(*ts, t)
	return &(*ts)[len(*ts)-1]
}

// InitProducerID asks for a producer id; with pid and epoch >= 0 (v3+,
// KIP-360) it asks to bump that producer's epoch.
func InitProducerID(pid int64, epoch int16) *kmsg.InitProducerIDRequest {
	r := kmsg.NewPtrInitProducerIDRequest()
	r.Version, r.TransactionTimeoutMillis, r.ProducerID, r.ProducerEpoch = 4, -1, pid, epoch
	return r
}

// InitProducerIDAnswer gives the producer id and epoch.
func InitProducerIDAnswer(pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	r := kmsg.NewPtrInitProducerIDResponse()
	r.Version, r.ProducerID, r.ProducerEpoch = 4, pid, epoch
	return r
}
