package workload

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/fixtures/gen"
)

// The large shape's cluster: one broker on loopback, one topic of eight
// partitions. Producers send four partitions per request, consumers fetch
// two per request.
const (
	largeTopic      = "events"
	largePartitions = 8
	largeProduceN   = 4   // partitions per Produce
	largeFetchN     = 2   // partitions per Fetch
	largeProduceRec = 256 // records per produced batch (one batch per partition)
	largeFetchBatch = 2   // batches per fetched partition, of largeProduceRec

	largeValue = 1000
)

var largeBroker = broker{1, "127.0.0.1"}

// largeFrames are the large shape's frames, encoded once: about 1 MB of
// records each way.
type largeFrames struct {
	apiReq, apiResp   *frame
	metaReq, metaResp *frame
	produce           *frame // marks: partitions, records per partition
	produced          *frame // marks: partitions, base offsets
	fetch             *frame // marks: partitions, fetch offsets
	fetched           *frame // marks: partitions, (HW, LSO) per partition, records per partition
}

func newLargeFrames(vs versionSet) *largeFrames {
	f := &largeFrames{}
	f.apiReq, f.apiResp = vs.apiVersionsFrames()
	f.metaReq, f.metaResp = vs.metadataFrames("kfsniff-bench-large", []broker{largeBroker}, []string{largeTopic}, largePartitions, true)

	pr := kmsg.NewPtrProduceRequest()
	pr.Version, pr.Acks, pr.TimeoutMillis = vs.produce, -1, 30000
	prt := kmsg.NewProduceRequestTopic()
	prt.Topic = largeTopic
	presp := kmsg.NewPtrProduceResponse()
	presp.Version = vs.produce
	prs := kmsg.NewProduceResponseTopic()
	prs.Topic = largeTopic
	var pmarks, rmarks, recs []any
	for i := range largeProduceN {
		b := batches(1, largeProduceRec, largeValue)
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition, p.Records = m32(i), b
		prt.Partitions = append(prt.Partitions, p)
		pmarks, recs = append(pmarks, m32(i)), append(recs, b)
		rp := kmsg.NewProduceResponseTopicPartition()
		rp.Partition, rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = m32(i), m64(i), -1, logStartBase
		prs.Partitions = append(prs.Partitions, rp)
		rmarks = append(rmarks, m32(i))
	}
	for i := range largeProduceN {
		rmarks = append(rmarks, m64(i))
	}
	pr.Topics = []kmsg.ProduceRequestTopic{prt}
	presp.Topics = []kmsg.ProduceResponseTopic{prs}
	f.produce, f.produced = request(pr, append(pmarks, recs...)...), response(presp, rmarks...)

	fr := vs.fetchRequest(largeTopic)
	frs := vs.fetchResponse(largeTopic, 0, nil)
	frs.Topics[0].Partitions = nil
	fr.Topics[0].Partitions = nil
	var qmarks, smarks, bmarks []any
	for i := range largeFetchN {
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.CurrentLeaderEpoch, p.FetchOffset, p.LastFetchedEpoch, p.LogStartOffset, p.PartitionMaxBytes = m32(i), 3, m64(i), -1, -1, 1048576
		fr.Topics[0].Partitions = append(fr.Topics[0].Partitions, p)
		qmarks = append(qmarks, m32(i))
		b := batches(largeFetchBatch, largeProduceRec, largeValue)
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = m32(i), m64(2*i), m64(2*i+1), logStartBase
		rp.RecordBatches = b
		frs.Topics[0].Partitions = append(frs.Topics[0].Partitions, rp)
		smarks = append(smarks, m32(i))
		bmarks = append(bmarks, b)
	}
	for i := range largeFetchN {
		qmarks = append(qmarks, m64(i))
		smarks = append(smarks, m64(2*i), m64(2*i+1))
	}
	f.fetch, f.fetched = request(fr, qmarks...), response(frs, append(smarks, bmarks...)...)
	return f
}

// large writes the large-segment shape.
func (g *run) large() {
	f := newLargeFrames(g.v)
	logEnd := make([]int64, largePartitions)
	for p := range logEnd {
		logEnd[p] = logStartBase + logPreCapture
	}
	type conn struct {
		c        *gen.Conn
		id       string
		producer bool
		parts    []int32
		pos      []int64 // consumer: next offset per partition
		base     []int64 // producer: offsets given to the batches in flight
		corr     int32
	}
	server := netip.AddrPortFrom(netip.MustParseAddr(largeBroker.host), kafkaPort)
	conns := make([]*conn, g.shape.Conns)
	producers := (g.shape.Conns + 1) / 2
	for i := range conns {
		cn := &conn{producer: i < producers}
		client := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(clientPortMin+i))
		cn.c = g.dial(client, server)
		if cn.producer {
			cn.id = fmt.Sprintf("producer-%04d", i)
			for k := range largeProduceN {
				cn.parts = append(cn.parts, int32((i*largeProduceN+k)%largePartitions))
			}
			cn.base = make([]int64, largeProduceN)
		} else {
			j := i - producers
			cn.id = fmt.Sprintf("consumer-%04d", j)
			for k := range largeFetchN {
				cn.parts = append(cn.parts, int32((j*largeFetchN+k)%largePartitions))
				cn.pos = append(cn.pos, logStartBase)
			}
		}
		conns[i] = cn
	}
	// pace advances the clock by the time loopback takes to carry n bytes
	// (about 1 GB/s), plus a little.
	pace := func(n int) { g.after(20*time.Microsecond + time.Duration(n)) }
	exchange := func(req, resp *frame) {
		for _, cn := range conns {
			g.request(cn.c, req, cn.corr, cn.id)
			pace(len(req.b))
		}
		g.after(200 * time.Microsecond)
		for _, cn := range conns {
			g.respond(cn.c, resp, cn.corr)
			cn.corr++
			pace(len(resp.b))
		}
	}
	exchange(f.apiReq, f.apiResp)
	exchange(f.metaReq, f.metaResp)

	for g.cw.n < g.shape.Bytes {
		for _, cn := range conns {
			if cn.producer {
				for k, p := range cn.parts {
					f.produce.put32(k, p)
					cn.base[k] = logEnd[p]
					logEnd[p] = f.produce.fill(largeProduceN+k, 0, p, logEnd[p], true)
				}
				g.request(cn.c, f.produce, cn.corr, cn.id)
				pace(len(f.produce.b))
			} else {
				for k, p := range cn.parts {
					f.fetch.put32(k, p)
					f.fetch.put64(largeFetchN+k, cn.pos[k])
				}
				g.request(cn.c, f.fetch, cn.corr, cn.id)
				pace(len(f.fetch.b))
			}
		}
		g.after(500 * time.Microsecond)
		for _, cn := range conns {
			var fr *frame
			if cn.producer {
				fr = f.produced
				for k, p := range cn.parts {
					fr.put32(k, p)
					fr.put64(largeProduceN+k, cn.base[k])
				}
			} else {
				fr = f.fetched
				for k, p := range cn.parts {
					fr.put32(k, p)
					cn.pos[k] = fr.fill(3*largeFetchN+k, 0, p, cn.pos[k], false)
					logEnd[p] = max(logEnd[p], cn.pos[k])
					fr.put64(largeFetchN+2*k, logEnd[p])
					fr.put64(largeFetchN+2*k+1, logEnd[p])
				}
			}
			g.respond(cn.c, fr, cn.corr)
			cn.corr++
			pace(len(fr.b))
		}
	}
	for _, cn := range conns {
		cn.c.Close(g.after(50 * time.Microsecond))
	}
}
