package legacy_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// Builders for the duplicate-batches and replica-divergence tests: record
// batches (compressed with franz-go's own compressor, as a client sends
// them), Produce and Fetch exchanges, and a run through the whole analysis.

var bcStart = time.Date(2026, 7, 20, 3, 0, 0, 0, time.UTC)

func bcAt(ms float64) time.Time { return bcStart.Add(time.Duration(ms * float64(time.Millisecond))) }

// bcRecord is one record of a test batch; ts is in ms since the epoch.
type bcRecord struct {
	ts      int64
	key     []byte
	value   []byte
	headers []kmsg.Header
}

// bcRecords returns records n..n+count-1 of a replayed source: values
// "src-%06d", a header, timestamps 1 ms apart.
func bcRecords(n, count int) []bcRecord {
	out := make([]bcRecord, count)
	for i := range out {
		k := n + i
		out[i] = bcRecord{
			ts:      bcStart.Add(-time.Hour).UnixMilli() + int64(k),
			key:     []byte(fmt.Sprintf("key-%d", k%7)),
			value:   []byte(fmt.Sprintf("src-%06d", k)),
			headers: []kmsg.Header{{Key: "origin", Value: []byte("dc1")}},
		}
	}
	return out
}

// bcBatchSpec is a magic-2 batch as a producer builds it.
type bcBatchSpec struct {
	codec      *kgo.CompressionCodec // nil: uncompressed
	producerID int64
	epoch      int16
	sequence   int32
	attrs      int16 // OR'd into the attributes: 0x10 transactional
	records    []bcRecord
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// bcBatch encodes a batch at base offset 0 with a correct CRC-32C.
func bcBatch(t *testing.T, s bcBatchSpec) []byte {
	t.Helper()
	var recs []byte
	first, maxTS := s.records[0].ts, s.records[0].ts
	for i, r := range s.records {
		maxTS = max(maxTS, r.ts)
		rec := kmsg.Record{TimestampDelta64: r.ts - first, OffsetDelta: int32(i), Key: r.key, Value: r.value, Headers: r.headers}
		body := rec.AppendTo(nil)
		rec.Length = int32(len(body) - 1)
		recs = rec.AppendTo(recs)
	}
	attrs := s.attrs
	if s.codec != nil {
		c, err := kgo.DefaultCompressor(*s.codec)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		out, typ := c.Compress(&buf, recs)
		if typ == kgo.CodecNone {
			t.Fatalf("codec %v did not compress", *s.codec)
		}
		recs, attrs = bytes.Clone(out), attrs|int16(typ)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(s.records) - 1),
		FirstTimestamp:       first,
		MaxTimestamp:         maxTS,
		ProducerID:           s.producerID,
		ProducerEpoch:        s.epoch,
		FirstSequence:        s.sequence,
		NumRecords:           int32(len(s.records)),
		Records:              recs,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	bcSetCRC(out)
	return out
}

func bcCRC(b []byte) uint32 { return crc32.Checksum(b[21:], castagnoli) }

func bcSetCRC(b []byte) { binary.BigEndian.PutUint32(b[17:], bcCRC(b)) }

// bcStored is batch as a broker serves it: base offset and leader epoch set.
func bcStored(batch []byte, base int64, epoch int32) []byte {
	b := bytes.Clone(batch)
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))
	return b
}

// bcCorrupt changes one byte of the last record of a batch (copied), and
// recomputes the CRC if fix.
func bcCorrupt(batch []byte, fix bool) []byte {
	b := bytes.Clone(batch)
	b[len(b)-3] ^= 0x20
	if fix {
		bcSetCRC(b)
	}
	return b
}

func bcProduce(topic string, part int32, batches ...[]byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition = part
	for _, b := range batches {
		p.Records = append(p.Records, b...)
	}
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{p}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	return req
}

func bcProduced(topic string, part int32, code int16, base int64) *kmsg.ProduceResponse {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = topic
	p := kmsg.NewProduceResponseTopicPartition()
	p.Partition, p.ErrorCode, p.BaseOffset, p.LogAppendTime = part, code, base, -1
	rt.Partitions = []kmsg.ProduceResponseTopicPartition{p}
	resp.Topics = []kmsg.ProduceResponseTopic{rt}
	return resp
}

// bcFetch is a Fetch v16 (by topic id) of one partition; replica >= 0
// makes it a follower's fetch.
func bcFetch(id [16]byte, part int32, offset int64, replica int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 16
	req.ReplicaState.ID, req.ReplicaState.Epoch = replica, -1
	if replica >= 0 {
		req.ReplicaState.Epoch = 1000 + int64(replica)
	}
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 500, 1, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = id
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes = part, offset, 1<<20
	rt.Partitions = []kmsg.FetchRequestTopicPartition{p}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	return req
}

func bcFetched(id [16]byte, part int32, hw int64, batches ...[]byte) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	rt := kmsg.NewFetchResponseTopic()
	rt.TopicID = id
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition, p.HighWatermark, p.LastStableOffset = part, hw, hw
	p.RecordBatches = []byte{}
	for _, b := range batches {
		p.RecordBatches = append(p.RecordBatches, b...)
	}
	rt.Partitions = []kmsg.FetchResponseTopicPartition{p}
	resp.Topics = []kmsg.FetchResponseTopic{rt}
	return resp
}

// bcMetadata names the brokers (node id -> "host:port") and the topic's id.
func bcMetadata(topic string, id [16]byte, brokers map[int32]string) (*kmsg.MetadataRequest, *kmsg.MetadataResponse) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 12
	for nid := int32(0); nid < 10; nid++ {
		if ep, ok := brokers[nid]; ok {
			a := netip.MustParseAddrPort(ep)
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = nid, a.Addr().String(), int32(a.Port())
			resp.Brokers = append(resp.Brokers, b)
		}
	}
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID = kmsg.StringPtr(topic), id
	mp := kmsg.NewMetadataResponseTopicPartition()
	mt.Partitions = []kmsg.MetadataResponseTopicPartition{mp}
	resp.Topics = []kmsg.MetadataResponseTopic{mt}
	return req, resp
}

// bcPeer is a scripted client connection.
type bcPeer struct {
	c    *gen.Conn
	corr int32
	id   string
}

func bcDial(w *gen.Writer, client, server, clientID string, t time.Time) *bcPeer {
	return &bcPeer{c: w.Conn(netip.MustParseAddrPort(client), netip.MustParseAddrPort(server), t, gen.ConnOptions{}), id: clientID}
}

// exchange writes a request at t and its response d later.
func (p *bcPeer) exchange(t time.Time, d time.Duration, req kmsg.Request, resp kmsg.Response) {
	p.corr++
	p.c.Request(t, p.corr, &p.id, req)
	p.c.Response(t.Add(d), p.corr, resp)
}

// bcFindings runs the script through the whole analysis with every
// detector (thresholds changed by overrides) and returns id's findings.
func bcFindings(t *testing.T, id string, overrides map[string]float64, script func(t *testing.T, w *gen.Writer)) []detectors.Finding {
	t.Helper()
	return findingsOf(analyseScript(t, overrides, func(w *gen.Writer) { script(t, w) }), id)
}

// bcWant is what a test expects of one finding: counts and fields must be
// equal (fields compared as fmt %v), nodes present.
type bcWant struct {
	severity detectors.Severity
	counts   map[string]int64
	fields   map[string]any
	nodes    []int32
	absent   []string // fields or counts that must not be there
}

func bcCheck(t *testing.T, f detectors.Finding, w bcWant) {
	t.Helper()
	if f.Severity != w.severity {
		t.Errorf("severity %v, want %v: %s", f.Severity, w.severity, f.Summary)
	}
	for k, v := range w.counts {
		if got, ok := f.Counts[k]; !ok || got != v {
			t.Errorf("count %s = %d (present %v), want %d; counts %v", k, got, ok, v, f.Counts)
		}
	}
	for k, v := range w.fields {
		if got, ok := f.Fields[k]; !ok || fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("field %s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	for _, n := range w.nodes {
		found := false
		for _, m := range f.Nodes {
			found = found || m == n
		}
		if !found {
			t.Errorf("nodes %v lack %d", f.Nodes, n)
		}
	}
	for _, k := range w.absent {
		if _, ok := f.Fields[k]; ok {
			t.Errorf("field %s present: %v", k, f.Fields[k])
		}
		if _, ok := f.Counts[k]; ok {
			t.Errorf("count %s present: %v", k, f.Counts[k])
		}
	}
	if f.Summary == "" || f.Explanation == "" || f.Next == "" || len(f.Evidence) == 0 || f.First.IsZero() {
		t.Errorf("finding incomplete: %+v", f)
	}
}

func codecPtr(c kgo.CompressionCodec) *kgo.CompressionCodec { return &c }
