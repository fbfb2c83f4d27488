package correlate

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

// batchBytes is detectortest.ZeroBatch: a record batch of n records from base, its CRC
// computed as a producer computes it.
var batchBytes = detectortest.ZeroBatch

// shipBuilt ships, through the real exporter, the exchanges no scenario
// capture has: a transactional Produce read from a second -r file, a
// ListOffsets answered with an offset, a Fetch of more than 512
// batches (split over records with batch_index), a request still
// waiting at the end of a capture on a connection that lost segments,
// and throttled responses (a Produce, split by partition, and a Metadata,
// not).
func shipBuilt(t testing.TB) [][]byte {
	var s shippedValues
	x := exporter(t, "built", &s)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.1.0.1:9092"))
	c.ID = 1
	send := func(corr int32, req kmsg.Request, resp kmsg.Response, file int) {
		m := flowstest.MakeRequest(c, at, corr, "built-app", req)
		m.File, m.Packet = file, 2*uint64(corr)+1
		r := flowstest.MakeResponse(m, at.Add(time.Millisecond), resp)
		r.File, r.Packet = file, m.Packet+1
		x.OnExchange(&flows.Exchange{Conn: c, Req: m, Resp: r})
	}

	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(9)
	p.Acks = -1
	txn := "txn-1"
	p.TransactionID = &txn
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records, _ = batchBytes(0, 3, 9, 0)
	pt.Partitions = append(pt.Partitions, pp)
	p.Topics = append(p.Topics, pt)
	pr := kmsg.NewPtrProduceResponse()
	pr.SetVersion(9)
	pr.ThrottleMillis = 250
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = "orders"
	rp := kmsg.NewProduceResponseTopicPartition()
	rp.BaseOffset = 70
	rt.Partitions = append(rt.Partitions, rp)
	pr.Topics = append(pr.Topics, rt)
	send(1, p, pr, 1)

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(7)
	lo.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "orders"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	lr := kmsg.NewPtrListOffsetsResponse()
	lr.SetVersion(7)
	lrt := kmsg.NewListOffsetsResponseTopic()
	lrt.Topic = "orders"
	lrp := kmsg.NewListOffsetsResponseTopicPartition()
	lrp.Offset, lrp.LeaderEpoch = 1234, 5
	lrt.Partitions = append(lrt.Partitions, lrp)
	lr.Topics = append(lr.Topics, lrt)
	send(2, lo, lr, 0)

	f := kmsg.NewPtrFetchRequest()
	f.SetVersion(11)
	f.ReplicaID = -1
	fr := kmsg.NewPtrFetchResponse()
	fr.SetVersion(11)
	frt := kmsg.NewFetchResponseTopic()
	frt.Topic = "big"
	fp := kmsg.NewFetchResponseTopicPartition()
	for i := range 600 {
		b, _ := batchBytes(int64(i), 1, -1, -1)
		fp.RecordBatches = append(fp.RecordBatches, b...)
	}
	fp.RecordBatches = append(fp.RecordBatches, compacted(600, 0, 2, 5)...)
	frt.Partitions = append(frt.Partitions, fp)
	fr.Topics = append(fr.Topics, frt)
	send(3, f, fr, 0)

	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	m := flowstest.MakeRequest(c, at, 4, "built-app", md)
	m.Packet = 9
	x.OnExchange(&flows.Exchange{Conn: c, Req: m, Unanswered: true, AtEnd: true, Waited: 40 * time.Second, ConnGaps: 2})

	mq := kmsg.NewPtrMetadataRequest()
	mq.SetVersion(12)
	mr := kmsg.NewPtrMetadataResponse()
	mr.SetVersion(12)
	mr.ThrottleMillis = 3000
	send(5, mq, mr, 0)

	x.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vals
}

// compacted is a batch at base as compaction leaves it: records at the
// offset deltas given, the others gone.
func compacted(base int64, deltas ...int32) []byte {
	var section []byte
	for _, d := range deltas {
		r := kmsg.Record{OffsetDelta: d, TimestampDelta64: int64(d), Key: []byte{byte('k' + d)}, Value: []byte("kept")}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		section = r.AppendTo(section)
	}
	kb := kmsg.RecordBatch{FirstOffset: base, PartitionLeaderEpoch: 1, Magic: 2, LastOffsetDelta: deltas[len(deltas)-1],
		FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000005, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(deltas)), Records: section}
	kb.Length = int32(len(kb.AppendTo(nil)) - 12)
	return fixCRC(kb.AppendTo(nil))
}

// fixCRC recomputes a batch's CRC after its bytes were changed.
func fixCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:21], detectortest.CRC(b))
	return b
}
