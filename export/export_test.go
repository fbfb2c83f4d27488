package export

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/detectortest"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
)

// batch is detectortest.ZeroBatch: a record batch of n records from base, its CRC
// computed as a producer computes it.
var batch = detectortest.ZeroBatch

// traffic is a round of exchanges: a Produce of two partitions (batches
// with CRCs) answered with offsets, throttled, a Fetch answered with a
// partition's batch and one's error, and a Metadata, throttled.
type traffic struct {
	x    []*flows.Exchange
	crcs map[string][]uint32 // topic/partition -> CRCs sent
}

func newTraffic(clientID string) *traffic {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.1.0.1:9092"))
	tr := &traffic{crcs: map[string][]uint32{}}

	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(9)
	p.Acks = -1
	pr := kmsg.NewPtrProduceResponse()
	pr.SetVersion(9)
	pr.ThrottleMillis = 300
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = "orders"
	for part := range int32(2) {
		b1, c1 := batch(0, 5, 77, 10*part)
		b2, c2 := batch(0, 3, 77, 10*part+5)
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition = part
		pp.Records = append(b1, b2...)
		pt.Partitions = append(pt.Partitions, pp)
		rp := kmsg.NewProduceResponseTopicPartition()
		rp.Partition = part
		rp.BaseOffset = 100 * int64(part+1)
		rt.Partitions = append(rt.Partitions, rp)
		tr.crcs["orders/"+string(rune('0'+part))] = []uint32{c1, c2}
	}
	p.Topics = append(p.Topics, pt)
	pr.Topics = append(pr.Topics, rt)

	f := kmsg.NewPtrFetchRequest()
	f.SetVersion(11)
	f.ReplicaID, f.MaxWaitMillis = 2, 500
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "orders"
	for part := range int32(2) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset = part, 40
		ft.Partitions = append(ft.Partitions, fp)
	}
	f.Topics = append(f.Topics, ft)
	fr := kmsg.NewPtrFetchResponse()
	fr.SetVersion(11)
	frt := kmsg.NewFetchResponseTopic()
	frt.Topic = "orders"
	fb, fc := batch(40, 4, 77, 40)
	fp0 := kmsg.NewFetchResponseTopicPartition()
	fp0.Partition, fp0.HighWatermark, fp0.LastStableOffset, fp0.RecordBatches = 0, 44, 44, fb
	fp1 := kmsg.NewFetchResponseTopicPartition()
	fp1.Partition, fp1.ErrorCode, fp1.HighWatermark, fp1.LastStableOffset = 1, 6, -1, -1
	frt.Partitions = append(frt.Partitions, fp0, fp1)
	fr.Topics = append(fr.Topics, frt)
	tr.crcs["fetch orders/0"] = []uint32{fc}

	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	mr := kmsg.NewPtrMetadataResponse()
	mr.SetVersion(12)
	mr.ThrottleMillis = 1200
	id := "cluster-A"
	mr.ClusterID = &id

	for j, pair := range []struct {
		req  kmsg.Request
		resp kmsg.Response
	}{{md, mr}, {p, pr}, {f, fr}} {
		req := flowstest.MakeRequest(c, at, int32(j), clientID, pair.req)
		tr.x = append(tr.x, &flows.Exchange{Conn: c, Req: req, Resp: flowstest.MakeResponse(req, at.Add(time.Duration(j+1)*time.Millisecond), pair.resp)})
	}
	return tr
}

func (tr *traffic) run(e *Exporter) {
	for _, x := range tr.x {
		e.OnExchange(x)
	}
}

type sent struct{ topic, key, value string }

// capturing makes an exporter whose records are kept, not shipped (its
// client is never used: nothing connects).
func capturing(t testing.TB) (*Exporter, *[]sent) {
	e, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Topic: "ship", Agent: "host-a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cl.Close() })
	var out []sent
	e.send = func(topic string, key, value []byte) { out = append(out, sent{topic, string(key), string(value)}) }
	return e, &out
}

// TestExchangeRecords: one record per partition, keyed topic/partition,
// with the exchange's common fields; the batches' CRCs are the
// producer's, a produced batch carries the offset the response gave it;
// the Metadata exchange is keyed by client id and teaches the cluster id
// that the later records carry.
func TestExchangeRecords(t *testing.T) {
	e, out := capturing(t)
	tr := newTraffic("app-1")
	tr.run(e)
	type rec struct {
		V         int    `json:"v"`
		Type      string `json:"type"`
		Agent     string `json:"agent"`
		Cluster   string `json:"cluster"`
		API       int16  `json:"api"`
		Corr      int32  `json:"corr"`
		ClientID  string `json:"client_id"`
		Latency   int64  `json:"latency_ns"`
		Parts     int    `json:"parts"`
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Error     *int16 `json:"error"`
		HW        *int64 `json:"high_watermark"`
		Fetch     *int64 `json:"fetch_offset"`
		Replica   *int32 `json:"replica"`
		MaxWait   *int32 `json:"max_wait_ms"`
		Throttle  *int32 `json:"throttle_time_ms"`
		Batches   []struct {
			Offset     *int64 `json:"offset"`
			BaseOffset *int64 `json:"base_offset"`
			CRC        uint32 `json:"crc"`
			Records    int32  `json:"records"`
			ProducerID int64  `json:"producer_id"`
			Sequence   int32  `json:"base_sequence"`
		} `json:"batches"`
	}
	if len(*out) != 5 {
		t.Fatalf("%d records; want Metadata 1, Produce 2, Fetch 2", len(*out))
	}
	var rs []rec
	for _, s := range *out {
		var r rec
		if err := json.Unmarshal([]byte(s.value), &r); err != nil {
			t.Fatalf("%s: %v", s.value, err)
		}
		if s.topic != "ship" || r.V != SchemaVersion || r.Agent != "host-a" || r.Type != "exchange" {
			t.Errorf("record %+v on %s", r, s.topic)
		}
		rs = append(rs, r)
	}
	if (*out)[0].key != "app-1" || rs[0].API != 3 || rs[0].Cluster != "cluster-A" {
		t.Errorf("Metadata record keyed %q, %+v", (*out)[0].key, rs[0])
	}
	for i, s := range (*out)[1:] {
		r := rs[i+1]
		if want := string(rune('0' + r.Partition)); s.key != want || r.Parts != 2 || r.Cluster != "cluster-A" || r.Latency <= 0 {
			t.Errorf("record %d keyed %q: %+v", i+1, s.key, r)
		}
	}
	for i, r := range rs[1:3] {
		crcs := tr.crcs[r.Topic+"/"+string(rune('0'+r.Partition))]
		if len(r.Batches) != 2 || r.Batches[0].CRC != crcs[0] || r.Batches[1].CRC != crcs[1] {
			t.Fatalf("Produce record %d batches %+v; CRCs sent %v", i, r.Batches, crcs)
		}
		base := 100 * int64(r.Partition+1)
		if *r.Batches[0].Offset != base || *r.Batches[1].Offset != base+5 || r.Batches[1].Sequence != 10*r.Partition+5 || r.Batches[0].ProducerID != 77 {
			t.Errorf("Produce record %d: offsets %d, %d (want %d, %d), sequence %d", i, *r.Batches[0].Offset, *r.Batches[1].Offset, base, base+5, r.Batches[1].Sequence)
		}
	}
	f0, f1 := rs[3], rs[4]
	for i, r := range rs {
		if fetch := i >= 3; (r.MaxWait != nil) != fetch || fetch && *r.MaxWait != 500 {
			t.Errorf("record %d (api %d): max_wait_ms %v; want the Fetch's 500 on its records only", i, r.API, r.MaxWait)
		}
		// The Metadata's and the Produce's throttle times, on each of
		// the Produce's records; none on the Fetch's, not throttled.
		if want := map[int16]int32{3: 1200, 0: 300}[r.API]; want == 0 && r.Throttle != nil || want != 0 && (r.Throttle == nil || *r.Throttle != want) {
			t.Errorf("record %d (api %d): throttle_time_ms %v; want %d, absent when 0", i, r.API, r.Throttle, want)
		}
	}
	if *f0.Replica != 2 || *f0.Fetch != 40 || *f0.HW != 44 || *f0.Error != 0 || len(f0.Batches) != 1 || f0.Batches[0].CRC != tr.crcs["fetch orders/0"][0] || *f0.Batches[0].BaseOffset != 40 {
		t.Errorf("Fetch partition 0: %+v", f0)
	}
	if *f1.Error != 6 || f1.HW != nil || len(f1.Batches) != 0 || *f1.Fetch != 40 {
		t.Errorf("Fetch partition 1 (NOT_LEADER_OR_FOLLOWER, no high watermark): %+v", f1)
	}
}

// TestManyBatchesSplit: a partition's batches past 512 go on more
// records (batch_index says where each starts), so that no record nears
// the sink's maximum message size; every batch is shipped once, in order.
func TestManyBatchesSplit(t *testing.T) {
	e, out := capturing(t)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.1.0.1:9092"))
	f := kmsg.NewPtrFetchRequest()
	f.SetVersion(11)
	f.ReplicaID = -1
	fr := kmsg.NewPtrFetchResponse()
	fr.SetVersion(11)
	frt := kmsg.NewFetchResponseTopic()
	frt.Topic = "big"
	fp := kmsg.NewFetchResponseTopicPartition()
	var crcs []uint32
	for i := range 1100 {
		b, crc := batch(int64(i), 1, -1, -1)
		fp.RecordBatches = append(fp.RecordBatches, b...)
		crcs = append(crcs, crc)
	}
	frt.Partitions = append(frt.Partitions, fp)
	fr.Topics = append(fr.Topics, frt)
	req := flowstest.MakeRequest(c, at, 1, "consumer", f)
	e.OnExchange(&flows.Exchange{Conn: c, Req: req, Resp: flowstest.MakeResponse(req, at.Add(time.Millisecond), fr)})
	if len(*out) != 3 {
		t.Fatalf("%d records for 1100 batches; want 3", len(*out))
	}
	var got []uint32
	for i, s := range *out {
		var r struct {
			Parts   int `json:"parts"`
			Index   int `json:"batch_index"`
			Batches []struct {
				CRC uint32 `json:"crc"`
			} `json:"batches"`
		}
		if err := json.Unmarshal([]byte(s.value), &r); err != nil {
			t.Fatal(err)
		}
		if s.key != "0" || r.Parts != 3 || r.Index != 512*i || len(s.value) > 256<<10 {
			t.Errorf("record %d: key %q, parts %d, batch_index %d, %d bytes", i, s.key, r.Parts, r.Index, len(s.value))
		}
		for _, b := range r.Batches {
			got = append(got, b.CRC)
		}
	}
	if !slices.Equal(got, crcs) {
		t.Errorf("%d CRCs shipped, not the 1100 of the response in order", len(got))
	}
}

// TestOwnTrafficNotShipped: the exporter's own client id (the agent
// capturing its own shipping) is not shipped, or every record would make
// another.
func TestOwnTrafficNotShipped(t *testing.T) {
	e, out := capturing(t)
	newTraffic("kfsniff-export").run(e)
	if len(*out) != 0 {
		t.Errorf("%d records of the exporter's own exchanges shipped", len(*out))
	}
}

// addrConn is a connection's two ends, as kgo's connect hook sees them.
type addrConn struct {
	net.Conn
	local, remote netip.AddrPort
}

func (c addrConn) LocalAddr() net.Addr  { return net.TCPAddrFromAddrPort(c.local) }
func (c addrConn) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(c.remote) }

// TestOwnConnectionNotShipped: the events of the exporter's own
// connections to the sink are not shipped either: those after its first
// exchange (known by its client id) and, for a connection kgo's connect
// hook told, its opening too; another client's events are.
func TestOwnConnectionNotShipped(t *testing.T) {
	e, out := capturing(t)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	events := func(tr *traffic, id int) {
		c := tr.x[0].Conn
		c.ID = id
		e.OnConnEvent(&flows.ConnEvent{Kind: flows.ConnOpened, Conn: c, Client: c.Client, Server: c.Server, Time: at})
		tr.run(e)
		e.OnConnEvent(&flows.ConnEvent{Kind: flows.ConnClosed, Conn: c, Client: c.Client, Server: c.Server, Time: at.Add(time.Second)})
	}
	conns := func() []string {
		var got []string
		for _, r := range *out {
			if strings.Contains(r.value, `"type":"conn"`) {
				var v struct {
					Event string `json:"event"`
					Conn  int    `json:"conn"`
				}
				if err := json.Unmarshal([]byte(r.value), &v); err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%s %d", v.Event, v.Conn))
			}
		}
		*out = (*out)[:0]
		return got
	}
	// Not told by the hook (a connection opened before New returned, or
	// the hook late): its opening is shipped, nothing after it.
	events(newTraffic("kfsniff-export"), 3)
	if got := conns(); !slices.Equal(got, []string{"opened 3"}) {
		t.Errorf("own connection, unannounced: shipped %v, want only its opening", got)
	}
	// Told by the hook: nothing.
	own := newTraffic("kfsniff-export")
	c := own.x[0].Conn
	c.Client = netip.MustParseAddrPort("10.0.0.1:40002")
	connectHook{e}.OnBrokerConnect(kgo.BrokerMetadata{}, 0, addrConn{local: c.Client, remote: c.Server}, nil)
	events(own, 4)
	if got := conns(); len(got) != 0 {
		t.Errorf("own connection the hook told: shipped %v", got)
	}
	// Another client's connection, at the sink's address too: shipped.
	events(newTraffic("app-1"), 5)
	if got := conns(); !slices.Equal(got, []string{"opened 5", "closed 5"}) {
		t.Errorf("another client's connection: shipped %v, want its opening and closing", got)
	}
}

// TestOwnDialKnown: the exporter's dialer knows a connection by its local
// port before it connects (bindFirst), so that the capture cannot see its
// SYN first; the connect hook is not needed for it.
func TestOwnDialKnown(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("bindFirst binds on unix systems; elsewhere the connect hook alone tells")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var own ownConns
	c, err := dialer(&own, nil)(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local, server := c.LocalAddr().(*net.TCPAddr).AddrPort(), c.RemoteAddr().(*net.TCPAddr).AddrPort()
	if !own.has(local, server, false) {
		t.Fatalf("%s -> %s, dialed by the exporter, not known as its own", local, server)
	}
	if own.has(netip.AddrPortFrom(local.Addr(), local.Port()+1), server, false) {
		t.Error("another port taken for the exporter's")
	}
	if !own.has(local, server, true) || own.has(local, server, false) || len(own.fifo) != 0 {
		t.Errorf("not forgotten once closed: %d kept", len(own.fifo))
	}
}

// TestHotPathAllocs: once warm, encoding an exchange's records allocates
// nothing (the records' copies for kgo are made in ship, measured by
// BenchmarkShip).
func TestHotPathAllocs(t *testing.T) {
	e, _ := capturing(t)
	n := 0
	e.send = func(string, []byte, []byte) { n++ }
	tr := newTraffic("app-1")
	tr.run(e)
	if a := testing.AllocsPerRun(100, func() { tr.run(e) }); a != 0 {
		t.Errorf("%v allocations per round of %d exchanges; want 0", a, len(tr.x))
	}
	if n == 0 {
		t.Fatal("nothing encoded")
	}
}

// TestStringsEscaped: wire strings become valid JSON that a terminal
// printing it (kcat) cannot be driven by: controls, C1, bidi and
// separators escaped, invalid UTF-8 replaced.
func TestStringsEscaped(t *testing.T) {
	in := "a\"b\\c\n\x1b[31m\u009b\u202e\u2028\xff\xfe z é"
	b := appendString(nil, in)
	if !json.Valid(b) || !utf8.Valid(b) {
		t.Fatalf("%q is not valid JSON", b)
	}
	for _, r := range string(b) {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) || r == 0x202e || r == 0x2028 {
			t.Errorf("%q left in %q", r, b)
		}
	}
	var back string
	json.Unmarshal(b, &back)
	if want := strings.ToValidUTF8(in, "\ufffd\ufffd"); back != want {
		t.Errorf("read back %q, want %q", back, want)
	}
}

// BenchmarkShip is --export's cost per exchange with a real sink (kfake):
// encoding, the copy for kgo, kgo's buffering and batching.
func BenchmarkShip(b *testing.B) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "ship"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	e, err := New(Config{Brokers: c.ListenAddrs(), Topic: "ship", Agent: "bench", Buffer: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	tr := newTraffic("app-1")
	tr.run(e)
	b.ReportAllocs()
	for b.Loop() {
		tr.run(e)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tr.x)), "ns/exchange")
	st := e.Close()
	if st.Dropped+st.Failed > 0 {
		b.Logf("%d dropped, %d failed of %d", st.Dropped, st.Failed, st.Records+st.Dropped+st.Failed)
	}
}

// BenchmarkEncode is the exporter's own work per exchange on the
// analysis goroutine, without kgo: partitions gathered, JSON appended.
func BenchmarkEncode(b *testing.B) {
	e, _ := capturing(b)
	e.send = func(string, []byte, []byte) {}
	tr := newTraffic("app-1")
	tr.run(e)
	b.ReportAllocs()
	for b.Loop() {
		tr.run(e)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tr.x)), "ns/exchange")
}

// TestLiveFindingsRaisedOnce: a finding is shipped as "raised" by the
// first snapshot that shows it, not again by the next ones, and with the
// others as "final" at the end.
func TestLiveFindingsRaisedOnce(t *testing.T) {
	e, out := capturing(t)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := detectors.Finding{Detector: "notleader", First: at, Conns: []int{3}, Summary: "a",
		Subject: detectors.Subject{Partitions: []cluster.Partition{{Topic: "orders", Num: 2}}}}
	b := detectors.Finding{Detector: "throttled", First: at.Add(time.Second), Summary: "b"}
	e.LiveFindings([]detectors.Finding{a})
	a.Summary = "a, grown" // the same finding, its counts grown
	e.LiveFindings([]detectors.Finding{a, b})
	e.Findings([]detectors.Finding{a, b})
	var got []string
	for _, s := range *out {
		var r struct {
			State   string `json:"state"`
			Finding struct {
				Detector string `json:"detector"`
			} `json:"finding"`
		}
		if err := json.Unmarshal([]byte(s.value), &r); err != nil || s.topic != "ship.findings" {
			t.Fatalf("%s on %s: %v", s.value, s.topic, err)
		}
		got = append(got, s.key+" "+r.State+" "+r.Finding.Detector)
	}
	want := []string{"orders/2 raised notleader", "throttled raised throttled", "orders/2 final notleader", "throttled final throttled"}
	if !slices.Equal(got, want) {
		t.Errorf("shipped %q\nwant    %q", got, want)
	}
}

// TestOffsetRecords: ListOffsets and OffsetCommit are split per partition
// too, with the timestamp asked and the offset answered, the offset a
// group committed, and each partition's error.
func TestOffsetRecords(t *testing.T) {
	e, out := capturing(t)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.1.0.1:9092"))

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(7)
	lo.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "orders"
	for part := range int32(2) {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = part, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lt)
	lr := kmsg.NewPtrListOffsetsResponse()
	lr.SetVersion(7)
	lrt := kmsg.NewListOffsetsResponseTopic()
	lrt.Topic = "orders"
	p0 := kmsg.NewListOffsetsResponseTopicPartition()
	p0.Partition, p0.Offset, p0.LeaderEpoch = 0, 1234, 5
	p1 := kmsg.NewListOffsetsResponseTopicPartition()
	p1.Partition, p1.ErrorCode = 1, 6
	lrt.Partitions = append(lrt.Partitions, p0, p1)
	lr.Topics = append(lr.Topics, lrt)

	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.SetVersion(8)
	oc.Group = "billing"
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = "orders"
	op := kmsg.NewOffsetCommitRequestTopicPartition()
	op.Partition, op.Offset, op.LeaderEpoch = 0, 1200, 5
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	or := kmsg.NewPtrOffsetCommitResponse()
	or.SetVersion(8)
	ort := kmsg.NewOffsetCommitResponseTopic()
	ort.Topic = "orders"
	orp := kmsg.NewOffsetCommitResponseTopicPartition()
	orp.Partition, orp.ErrorCode = 0, 27 // REBALANCE_IN_PROGRESS
	ort.Partitions = append(ort.Partitions, orp)
	or.Topics = append(or.Topics, ort)

	for j, pair := range []struct {
		req  kmsg.Request
		resp kmsg.Response
	}{{lo, lr}, {oc, or}} {
		req := flowstest.MakeRequest(c, at, int32(j), "app", pair.req)
		e.OnExchange(&flows.Exchange{Conn: c, Req: req, Resp: flowstest.MakeResponse(req, at.Add(time.Millisecond), pair.resp)})
	}
	type rec struct {
		API       int16  `json:"api"`
		Parts     int    `json:"parts"`
		Partition int32  `json:"partition"`
		Group     string `json:"group"`
		Timestamp *int64 `json:"timestamp"`
		Offset    *int64 `json:"offset"`
		Committed *int64 `json:"committed_offset"`
		Epoch     *int32 `json:"offset_leader_epoch"`
		Error     *int16 `json:"error"`
	}
	var rs []rec
	var keys []string
	for _, s := range *out {
		var r rec
		if err := json.Unmarshal([]byte(s.value), &r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
		keys = append(keys, s.key)
	}
	if !slices.Equal(keys, []string{"0", "1", "0"}) {
		t.Fatalf("keys %q; want ListOffsets' two partitions and OffsetCommit's one", keys)
	}
	if r := rs[0]; r.API != 2 || r.Parts != 2 || *r.Timestamp != -1 || *r.Offset != 1234 || *r.Epoch != 5 || *r.Error != 0 {
		t.Errorf("ListOffsets partition 0: %+v", r)
	}
	if r := rs[1]; *r.Error != 6 || r.Offset != nil || *r.Timestamp != -1 {
		t.Errorf("ListOffsets partition 1, refused: %+v", r)
	}
	if r := rs[2]; r.API != 8 || r.Group != "billing" || *r.Committed != 1200 || *r.Epoch != 5 || *r.Error != 27 || r.Offset != nil {
		t.Errorf("OffsetCommit: %+v", r)
	}
}
