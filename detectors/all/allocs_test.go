package all

import (
	"flag"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/flows"
)

// steadyTraffic is healthy traffic built once, to be fed to a Set
// exchange after exchange: producers writing new batches to a few
// partitions over many connections, consumers fetching them back, and
// Metadata refreshes. step feeds the i-th round.
type steadyTraffic struct {
	conns             []*flows.Conn
	produce, produced []*flows.Message
	fetch, fetched    []*flows.Message
	batch             [][]byte // round i's batch: the delivery releases Raw
	// dl delivers the Produce exchanges as the pipeline does, so that
	// flows fingerprints their records for duplicate-batches and keeps
	// them until the response (flows.Keeper); the other events go to the
	// set directly (the delivery's learning of node identities from
	// Metadata allocates: flows' cost, not the rules').
	set                    *detectors.Set
	dl                     *flows.Delivery
	meta, metaResp         []*flows.Message
	beat, beatResp         []*flows.Message
	produceX, fetchX, metX []flows.Exchange
	beatX                  []flows.Exchange
}

func newSteadyTraffic(t testing.TB, rounds int) *steadyTraffic {
	const parts = 8
	server := netip.MustParseAddrPort("10.0.0.1:9092")
	s := &steadyTraffic{}
	for i := range 64 {
		c := flows.MakeConn(netip.AddrPortFrom(netip.MustParseAddr("10.0.1.1"), uint16(40000+i)), server)
		c.ID = i + 1
		s.conns = append(s.conns, c)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	next := make([]int64, parts)
	msg := func(c *flows.Conn, key int16, resp bool, at time.Time, n int) *flows.Message {
		return &flows.Message{Conn: &c.ConnInfo, Response: resp, Key: key, Version: 12, Correlation: int32(n), Client: cluster.Client{ID: "client"},
			File: 0, Packet: uint64(2*n + 1), Time: at, FirstTime: at}
	}
	for i := range rounds {
		c := s.conns[i%len(s.conns)]
		at := t0.Add(time.Duration(i) * time.Millisecond)
		part := int32(i % parts)
		recs := detectortest.Records(4*i, 4)
		b := detectortest.Batch(t, nil, recs)
		base := next[part]
		next[part] += int64(b.LastOffsetDelta) + 1

		req := msg(c, int16(kmsg.Produce), false, at, i)
		pr := kmsg.NewPtrProduceRequest()
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "events"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition = part
		pt.Partitions = append(pt.Partitions, pp)
		pr.Topics = append(pr.Topics, pt)
		req.Req = pr
		req.Batches = []flows.BatchRef{{Topic: "events", Partition: part, Batch: b}}
		s.batch = append(s.batch, b.Raw)
		resp := msg(c, int16(kmsg.Produce), true, at.Add(time.Millisecond), i)
		rr := kmsg.NewPtrProduceResponse()
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = "events"
		rp := kmsg.NewProduceResponseTopicPartition()
		rp.Partition, rp.BaseOffset = part, base
		rt.Partitions = append(rt.Partitions, rp)
		rr.Topics = append(rr.Topics, rt)
		resp.Resp = rr
		s.produce, s.produced = append(s.produce, req), append(s.produced, resp)

		fc := s.conns[(i+7)%len(s.conns)]
		freq := msg(fc, int16(kmsg.Fetch), false, at.Add(2*time.Millisecond), i)
		fr := kmsg.NewPtrFetchRequest()
		fr.Version, fr.MaxWaitMillis, fr.SessionEpoch, fr.ReplicaID = 12, 500, -1, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "events"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset = part, base
		ft.Partitions = append(ft.Partitions, fp)
		fr.Topics = append(fr.Topics, ft)
		freq.Req = fr
		fresp := msg(fc, int16(kmsg.Fetch), true, at.Add(3*time.Millisecond), i)
		fs := kmsg.NewPtrFetchResponse()
		fs.Version = 12
		st := kmsg.NewFetchResponseTopic()
		st.Topic = "events"
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.Partition, sp.HighWatermark, sp.LastStableOffset = part, next[part], next[part]
		st.Partitions = append(st.Partitions, sp)
		fs.Topics = append(fs.Topics, st)
		fresp.Resp = fs
		fb := b
		fb.BaseOffset = base
		fresp.Batches = []flows.BatchRef{{Topic: "events", Partition: part, Batch: fb}}
		s.fetch, s.fetched = append(s.fetch, freq), append(s.fetched, fresp)

		mreq := msg(c, int16(kmsg.Metadata), false, at, i)
		mreq.Req = kmsg.NewPtrMetadataRequest()
		mresp := msg(c, int16(kmsg.Metadata), true, at.Add(time.Millisecond), i)
		mr := kmsg.NewPtrMetadataResponse()
		for id := range int32(3) {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = id+1, "10.0.0."+string(rune('1'+id)), 9092
			mr.Brokers = append(mr.Brokers, b)
		}
		mt := kmsg.NewMetadataResponseTopic()
		name := "events"
		mt.Topic = &name
		for p := range int32(parts) {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.LeaderEpoch = p, 1, 3
			mt.Partitions = append(mt.Partitions, mp)
		}
		mr.Topics = append(mr.Topics, mt)
		mresp.Resp = mr
		s.meta, s.metaResp = append(s.meta, mreq), append(s.metaResp, mresp)

		// A consumer's heartbeat, answered REBALANCE_IN_PROGRESS now
		// and then: an error, far from a storm (one every 1.5 s of
		// rounds; error-storm needs 5 within 5 s).
		breq := msg(c, int16(kmsg.Heartbeat), false, at, i)
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID = "group", "member"
		breq.Req = hb
		bresp := msg(c, int16(kmsg.Heartbeat), true, at.Add(time.Millisecond), i)
		hr := kmsg.NewPtrHeartbeatResponse()
		if i%1500 == 0 {
			hr.ErrorCode = 27
			bresp.ErrorCodes = []flows.ErrorCount{{Code: 27, Count: 1}}
		}
		bresp.Resp = hr
		s.beat, s.beatResp = append(s.beat, breq), append(s.beatResp, bresp)
	}
	byInfo := map[*flows.ConnInfo]*flows.Conn{}
	for _, c := range s.conns {
		byInfo[&c.ConnInfo] = c
	}
	for i := range rounds {
		s.produceX = append(s.produceX, flows.Exchange{Conn: byInfo[s.produce[i].Conn], Req: s.produce[i], Resp: s.produced[i]})
		s.fetchX = append(s.fetchX, flows.Exchange{Conn: byInfo[s.fetch[i].Conn], Req: s.fetch[i], Resp: s.fetched[i]})
		s.metX = append(s.metX, flows.Exchange{Conn: byInfo[s.meta[i].Conn], Req: s.meta[i], Resp: s.metaResp[i]})
		s.beatX = append(s.beatX, flows.Exchange{Conn: byInfo[s.beat[i].Conn], Req: s.beat[i], Resp: s.beatResp[i]})
	}
	return s
}

// deliver makes the delivery to set that step feeds.
func (s *steadyTraffic) deliver(set *detectors.Set) { s.set, s.dl = set, flows.NewDelivery(set) }

// step feeds round i: a Produce, its answer, a Fetch of the batch, a
// Heartbeat and, one round in 256, a Metadata exchange (rounds are 1 ms
// apart: about 4 refreshes a second from the one client host, below the
// 50 in 10 s that metadata-storm calls a storm).
func (s *steadyTraffic) step(i int) {
	s.produce[i].Batches[0].Raw = s.batch[i] // released by the delivery
	s.dl.Deliver(&flows.Event{Req: s.produce[i]})
	s.dl.Deliver(&flows.Event{X: &s.produceX[i]})
	s.set.OnRequest(s.fetch[i])
	s.set.OnExchange(&s.fetchX[i])
	s.set.OnRequest(s.beat[i])
	s.set.OnExchange(&s.beatX[i])
	if i%256 == 0 {
		s.set.OnRequest(s.meta[i])
		s.set.OnExchange(&s.metX[i])
	}
}

// TestDetectorsDoNotAllocatePerExchange: once warmed up, healthy traffic
// costs the detectors no allocation, the fingerprints flows makes of
// produced records for them included: fingerprints, copies and leaders
// live in tables sized once, evidence is formatted only when reported,
// and the per-request buffers are reused.
func TestDetectorsDoNotAllocatePerExchange(t *testing.T) {
	const warm, runs = 2000, 1000
	s := newSteadyTraffic(t, warm+runs+1)
	set, err := detectors.NewSet(Analyzers(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.deliver(set)
	for i := range warm {
		s.step(i)
	}
	i := warm
	allocs := testing.AllocsPerRun(runs, func() {
		s.step(i)
		i++
	})
	if allocs != 0 {
		t.Errorf("%.3f allocations per round of healthy traffic (Produce, Fetch, Heartbeat, some Metadata), want 0", allocs)
	}
	if fs := set.Findings(detectors.Pass{Nodes: &cluster.Nodes{}}); len(fs) != 0 {
		t.Errorf("healthy traffic gave findings: %v", fs[0].Summary)
	}
	if n := s.dl.KeptDropped(); n != 0 {
		t.Errorf("%d Produce requests lost their fingerprints before their response", n)
	}
}

// benchRules, if set, limits BenchmarkDetectorsSteadyTraffic to the rules
// named (comma list), to compare the cost of the same rules across
// revisions: `go test ./detectors/all -bench SteadyTraffic -args
// -rules=not-leader-loop,duplicate-batches`.
var benchRules = flag.String("rules", "", "BenchmarkDetectorsSteadyTraffic: only these rules (comma list)")

// BenchmarkDetectorsSteadyTraffic is the detectors' cost per round of
// steadyTraffic once warmed up (tables allocated, maps grown).
func BenchmarkDetectorsSteadyTraffic(b *testing.B) {
	as := Analyzers()
	if *benchRules != "" {
		names := strings.Split(*benchRules, ",")
		as = slices.DeleteFunc(as, func(a *detectors.Analyzer) bool { return !slices.Contains(names, a.Name) })
		if len(as) != len(names) {
			b.Fatalf("-rules %s: %d of them are rules", *benchRules, len(as))
		}
	}
	const rounds, warm = 1 << 16, 1 << 13
	s := newSteadyTraffic(b, rounds)
	var set *detectors.Set
	b.ReportAllocs()
	i := rounds
	for b.Loop() {
		if i == rounds {
			b.StopTimer()
			set, _ = detectors.NewSet(as, nil)
			s.deliver(set)
			for i = 0; i < warm; i++ {
				s.step(i)
			}
			b.StartTimer()
		}
		s.step(i)
		i++
	}
}
