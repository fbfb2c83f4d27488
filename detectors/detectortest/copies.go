package detectortest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Builders of the copies of record batches (duplicate-batches,
// replica-divergence): batches as a producer builds them, as a broker
// stores them, damaged; Produce and Fetch requests and responses carrying
// them; Metadata naming brokers and a topic id.

// BatchSpec is a magic-2 batch as a producer builds it.
type BatchSpec struct {
	Codec      *kgo.CompressionCodec // nil: uncompressed
	ProducerID int64
	Epoch      int16
	Sequence   int32
	Attrs      int16 // OR'd into the attributes: 0x10 transactional
	// Records have absolute timestamps in TimestampDelta64 (Records
	// makes such).
	Records []kmsg.Record
}

// NoProducer is the producer id, epoch and sequence of a batch sent with
// idempotence off.
const NoProducer = -1

// Encode returns the batch at base offset 0, leader epoch -1, with a
// correct CRC-32C; a codec compresses the records with franz-go's own
// compressor, as a client does.
func (s BatchSpec) Encode(t testing.TB) []byte {
	t.Helper()
	first, last := s.Records[0].TimestampDelta64, s.Records[0].TimestampDelta64
	var section []byte
	for i, r := range s.Records {
		last = max(last, r.TimestampDelta64)
		r.OffsetDelta, r.TimestampDelta64 = int32(i), r.TimestampDelta64-first
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		section = r.AppendTo(section)
	}
	attrs := s.Attrs
	if s.Codec != nil {
		c, err := kgo.DefaultCompressor(*s.Codec)
		if err != nil {
			t.Fatal(err)
		}
		out, typ := c.Compress(new(bytes.Buffer), section)
		if typ == kgo.CodecNone {
			t.Fatalf("codec %v did not compress", *s.Codec)
		}
		section, attrs = bytes.Clone(out), attrs|int16(typ)
	}
	kb := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(s.Records) - 1),
		FirstTimestamp: first, MaxTimestamp: last, ProducerID: s.ProducerID, ProducerEpoch: s.Epoch,
		FirstSequence: s.Sequence, NumRecords: int32(len(s.Records)), Records: section}
	kb.Length = int32(len(kb.AppendTo(nil)) - 12)
	kb.CRC = int32(CRC(kb.AppendTo(nil)))
	return kb.AppendTo(nil)
}

// CRC is what a batch's CRC-32C should be: its bytes from the attributes.
func CRC(raw []byte) uint32 { return crc32.Checksum(raw[21:], castagnoli) }

// Stored returns a copy of the batch as a broker serves it: base offset
// and partition leader epoch set (neither is covered by the CRC).
func Stored(raw []byte, base int64, epoch int32) []byte {
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(raw); err != nil {
		panic(fmt.Sprintf("detectortest.Stored: not a batch: %v", err))
	}
	kb.FirstOffset, kb.PartitionLeaderEpoch = base, epoch
	return kb.AppendTo(nil)
}

// Damaged returns a copy of the batch with one byte of its last record
// changed, its CRC recomputed if fix (a copy that differs but verifies),
// else left (a copy that fails its CRC).
func Damaged(raw []byte, fix bool) []byte {
	b := bytes.Clone(raw)
	b[len(b)-3] ^= 0x20
	if fix {
		binary.BigEndian.PutUint32(b[17:], CRC(b))
	}
	return b
}

// ProduceRaw is a Produce v9 (acks=all) of the batches to one partition.
func ProduceRaw(topic string, part int32, batches ...[]byte) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = 9, -1, 30000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition, p.Records = part, bytes.Join(batches, nil)
	t.Partitions = []kmsg.ProduceRequestTopicPartition{p}
	r.Topics = []kmsg.ProduceRequestTopic{t}
	return r
}

// ProducedAt answers ProduceTo: the partition's first batch at base, or
// refused with code (base -1).
func ProducedAt(topic string, part int32, code int16, base int64) *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	r.Version = 9
	t := kmsg.NewProduceResponseTopic()
	t.Topic = topic
	p := kmsg.NewProduceResponseTopicPartition()
	p.Partition, p.ErrorCode, p.BaseOffset, p.LogAppendTime = part, code, base, -1
	t.Partitions = []kmsg.ProduceResponseTopicPartition{p}
	r.Topics = []kmsg.ProduceResponseTopic{t}
	return r
}

// FetchOf is a Fetch v16 (topics by id) of one partition from offset; a
// replica >= 0 makes it that follower's fetch.
func FetchOf(id [16]byte, part int32, offset int64, replica int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.MaxWaitMillis, r.MinBytes, r.MaxBytes, r.SessionEpoch = 16, 500, 1, 1<<20, -1
	r.ReplicaState.ID, r.ReplicaState.Epoch = replica, -1
	if replica >= 0 {
		r.ReplicaState.Epoch = 1000 + int64(replica)
	}
	t := kmsg.NewFetchRequestTopic()
	t.TopicID = id
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes = part, offset, 1<<20
	t.Partitions = []kmsg.FetchRequestTopicPartition{p}
	r.Topics = []kmsg.FetchRequestTopic{t}
	return r
}

// FetchedBatches answers FetchOf with the (stored) batches and a high
// watermark.
func FetchedBatches(id [16]byte, part int32, hw int64, batches ...[]byte) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version = 16
	t := kmsg.NewFetchResponseTopic()
	t.TopicID = id
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition, p.HighWatermark, p.LastStableOffset = part, hw, hw
	p.RecordBatches = append([]byte{}, bytes.Join(batches, nil)...)
	t.Partitions = []kmsg.FetchResponseTopicPartition{p}
	r.Topics = []kmsg.FetchResponseTopic{t}
	return r
}

// MetadataBrokers is a Metadata v12 exchange naming the brokers (node id ->
// "host:port") and the topic's id.
func MetadataBrokers(topic string, id [16]byte, brokers map[int32]string) (*kmsg.MetadataRequest, *kmsg.MetadataResponse) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.Topics = 12, []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 12
	for _, id := range slices.Sorted(maps.Keys(brokers)) {
		ap := netip.MustParseAddrPort(brokers[id])
		resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: id, Host: ap.Addr().String(), Port: int32(ap.Port())})
	}
	t := kmsg.NewMetadataResponseTopic()
	t.Topic, t.TopicID = kmsg.StringPtr(topic), id
	t.Partitions = []kmsg.MetadataResponseTopicPartition{kmsg.NewMetadataResponseTopicPartition()}
	resp.Topics = []kmsg.MetadataResponseTopic{t}
	return req, resp
}

// Codec returns a pointer to c, for BatchSpec.Codec.
func Codec(c kgo.CompressionCodec) *kgo.CompressionCodec { return &c }

// ZeroBatch is a magic-2 batch at base of n records of 40 zero bytes (not
// parsable records: for what reads only batch headers and CRCs, such as
// the exporter), by producer pid from sequence seq, leader epoch 0, with
// a correct length and CRC-32C; it returns the bytes and the CRC.
func ZeroBatch(base int64, n int, pid int64, seq int32) ([]byte, uint32) {
	rb := kmsg.RecordBatch{FirstOffset: base, Magic: 2, LastOffsetDelta: int32(n - 1), NumRecords: int32(n),
		ProducerID: pid, FirstSequence: seq, FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000000,
		Records: make([]byte, 40*n)}
	rb.Length = int32(len(rb.AppendTo(nil)) - 12)
	rb.CRC = int32(CRC(rb.AppendTo(nil)))
	return rb.AppendTo(nil), uint32(rb.CRC)
}
