package tui

import (
	"bytes"
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/kmsgtest"
	"github.com/kfsniff/kfsniff/pipeline"
)

func findConn(t *testing.T, conns []Conn, id int) Conn {
	t.Helper()
	for _, c := range conns {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no connection #%d in %+v", id, conns)
	return Conn{}
}

// TestModelObserverLoop feeds the KAFKA-19354 observer loop through the
// pipeline and checks what the views are built from: connections with
// their node labels, roles and client ids, per-API stats, findings and
// totals.
func TestModelObserverLoop(t *testing.T) {
	m, res := analyse(t, scenario("observer-fetch-loop.pcap"), ModelConfig{})

	conns := m.Conns()
	if len(conns) != 4 {
		t.Fatalf("%d connections, want 4", len(conns))
	}
	for id := 1; id <= 3; id++ {
		c := findConn(t, conns, id)
		if !slices.Equal(c.Roles, []cluster.Role{cluster.RoleRaft}) {
			t.Errorf("#%d roles %v, want raft", id, c.Roles)
		}
		if !slices.Equal(c.ClientIDs, []string{"raft-client-68"}) {
			t.Errorf("#%d client ids %q", id, c.ClientIDs)
		}
		if c.Errors != c.Requests || c.Requests == 0 {
			t.Errorf("#%d: %d errors of %d requests, want all", id, c.Errors, c.Requests)
		}
		if !strings.HasPrefix(c.Client, "node 68 (10.54.45.36:") {
			t.Errorf("#%d client %q, want node 68 named", id, c.Client)
		}
	}
	hb := findConn(t, conns, 4)
	if hb.Server != "node 1003 (10.30.7.85:8081)" || hb.Client != "node 68 (10.54.45.36:56262)" {
		t.Errorf("#4 is %s -> %s, want node 68 (10.54.45.36:56262) -> node 1003 (10.30.7.85:8081)", hb.Client, hb.Server)
	}
	if !slices.Equal(hb.Roles, []cluster.Role{cluster.RoleLiveness}) || hb.Requests != 20 || hb.Errors != 0 {
		t.Errorf("#4: roles %v, %d requests, %d errors; want liveness, 20, 0", hb.Roles, hb.Requests, hb.Errors)
	}
	if hb.BytesToServer != 800 || hb.BytesToClient != 380 {
		t.Errorf("#4 bytes %d/%d, want 800/380 as the report", hb.BytesToServer, hb.BytesToClient)
	}
	// 1000 fetches over 40s on #1: 25/s at the end of the capture.
	if r := findConn(t, conns, 1).Rate; r < 22 || r > 28 {
		t.Errorf("#1 rate %.1f/s, want about 25", r)
	}

	stats := m.Stats()
	if len(stats) != 2 {
		t.Fatalf("stats for %d APIs, want Fetch and BrokerHeartbeat: %+v", len(stats), stats)
	}
	fetch, hbs := stats[0], stats[1]
	if fetch.Name != "Fetch" || fetch.Requests != 2000 || fetch.Responses != 2000 || fetch.ErrorResponses != 2000 {
		t.Errorf("Fetch stats %+v", fetch)
	}
	if len(fetch.Errors) != 1 || fetch.Errors[0].Name != "NOT_LEADER_OR_FOLLOWER" || fetch.Errors[0].Count != 2000 {
		t.Errorf("Fetch errors %+v, want NOT_LEADER_OR_FOLLOWER=2000", fetch.Errors)
	}
	// The same histogram as the report: the same quantiles.
	for _, a := range res.Report.APIs {
		s := fetch
		if a.Name == "BrokerHeartbeat" {
			s = hbs
		}
		if got := float64(s.P50.Microseconds()) / 1000; got != a.Latency.P50 {
			t.Errorf("%s p50 %v ms, report says %v", a.Name, got, a.Latency.P50)
		}
		if got := float64(s.P99.Microseconds()) / 1000; got != a.Latency.P99 {
			t.Errorf("%s p99 %v ms, report says %v", a.Name, got, a.Latency.P99)
		}
	}
	if hbs.Name != "BrokerHeartbeat" || hbs.Requests != 20 || hbs.ErrorResponses != 0 || len(hbs.Errors) != 0 {
		t.Errorf("BrokerHeartbeat stats %+v", hbs)
	}

	fs := m.Findings()
	if len(fs) != len(res.Report.Findings) || len(fs) < 3 {
		t.Fatalf("%d findings, report has %d", len(fs), len(res.Report.Findings))
	}
	for i := 1; i < len(fs); i++ {
		if fs[i].Severity > fs[i-1].Severity {
			t.Errorf("findings not most severe first: %s after %s", fs[i].Severity, fs[i-1].Severity)
		}
	}
	if findingIndex(fs, "not-leader-loop") < 0 || findingIndex(fs, "liveness-without-replication") < 0 {
		t.Errorf("findings lack not-leader-loop or liveness-without-replication: %v", fs)
	}

	st := m.Status()
	if st.Conns != 4 || st.Exchanges != 2020 || st.Requests != 2020 || st.Errors != 2000 || st.Packets != 8080 {
		t.Errorf("status %+v, want 4 conns, 2020 exchanges and requests, 2000 errors, 8080 packets", st)
	}
	if st.Rate < 45 || st.Rate > 55 {
		t.Errorf("rate %.1f/s, want about 50", st.Rate)
	}

	xs := m.AppendExchanges(nil, 0, 0)
	if len(xs) != 2020 {
		t.Fatalf("%d exchanges kept, want all 2020", len(xs))
	}
	x := xs[0]
	if x.API() != "Fetch" || x.Version != 17 || x.ClientID != "raft-client-68" || x.Topic != "__cluster_metadata" ||
		x.Role != cluster.RoleRaft || x.State != Answered || x.ErrorCode != 6 || x.Errors != 1 || x.Latency <= 0 {
		t.Errorf("first exchange %+v", x)
	}
	if x.ReqPacket >= x.RespPacket || x.ReqSize <= 0 || x.RespSize <= 0 {
		t.Errorf("first exchange packets %d -> %d sizes %d/%d", x.ReqPacket, x.RespPacket, x.ReqSize, x.RespSize)
	}
}

func findingIndex(fs []detectors.Finding, detector string) int {
	for i := range fs {
		if fs[i].Detector == detector {
			return i
		}
	}
	return -1
}

// TestModelFramesDecode checks that the copied frames are the frames on the
// wire: the request and response re-decode to the exchange's values.
func TestModelFramesDecode(t *testing.T) {
	m, _ := analyse(t, scenario("observer-fetch-loop.pcap"), ModelConfig{})
	xs := m.AppendExchanges(nil, 1, 0)
	x := xs[len(xs)-1]
	req, resp := m.Frames(&x)
	if len(req) != int(x.ReqSize)-4 || len(resp) != int(x.RespSize)-4 {
		t.Fatalf("frames of %d and %d bytes, want %d and %d", len(req), len(resp), x.ReqSize-4, x.RespSize-4)
	}
	h, err := decode.ParseRequestHeader(req)
	if err != nil || h.Key != 1 || h.Version != 17 || h.Correlation != x.Correlation {
		t.Fatalf("request header %+v, %v", h, err)
	}
	body, err := decode.DecodeRequest(h.Key, h.Version, req[h.Len:])
	if err != nil {
		t.Fatal(err)
	}
	if got := body.(*kmsg.FetchRequest).Topics[0].Partitions[0].FetchOffset; got != 35678651 {
		t.Errorf("fetch offset %d, want 35678651", got)
	}
	if c, _ := decode.Correlation(resp); c != x.Correlation {
		t.Errorf("response correlation %d, want %d", c, x.Correlation)
	}
}

// TestModelBounded checks that history and frame copies stay within their
// bounds, keep the newest, and that an overwritten frame reads as gone,
// never as other bytes.
func TestModelBounded(t *testing.T) {
	m, _ := analyse(t, scenario("observer-fetch-loop.pcap"), ModelConfig{History: 100, ConnHistory: 30, FrameBytes: 8 << 10})

	all := m.AppendExchanges(nil, 0, 0)
	if len(all) != 100 {
		t.Fatalf("%d exchanges kept, want the last 100", len(all))
	}
	for i, x := range all {
		if want := uint64(2020 - 100 + 1 + i); x.Seq != want {
			t.Fatalf("exchange %d has seq %d, want %d (the newest, in order)", i, x.Seq, want)
		}
	}
	if st := m.Status(); st.Exchanges != 2020 || st.Kept != 100 || st.FramesKept > 8<<10 {
		t.Errorf("status %+v: totals must keep counting while history is bounded", st)
	}
	for _, c := range m.Conns() {
		xs := m.AppendExchanges(nil, c.ID, 0)
		want := min(30, c.Requests)
		if len(xs) != want || c.Kept != want {
			t.Errorf("#%d keeps %d exchanges (Kept %d), want %d", c.ID, len(xs), c.Kept, want)
		}
		if c.Requests != c.Responses || c.Requests < 20 {
			t.Errorf("#%d counters %d/%d: the totals are not bounded", c.ID, c.Requests, c.Responses)
		}
		for _, x := range xs {
			if x.Conn != c.ID {
				t.Errorf("#%d history holds an exchange of #%d", c.ID, x.Conn)
			}
		}
	}

	// The newest frames are kept; the first heartbeat's (still in #4's
	// history) were overwritten by 8 KiB of later frames.
	newest := all[len(all)-1]
	if req, resp := m.Frames(&newest); len(req) != int(newest.ReqSize)-4 || len(resp) != int(newest.RespSize)-4 {
		t.Errorf("newest frames %d/%d bytes, want %d/%d", len(req), len(resp), newest.ReqSize-4, newest.RespSize-4)
	}
	hb := m.AppendExchanges(nil, 4, 0)
	if req, resp := m.Frames(&hb[0]); req != nil || resp != nil {
		t.Errorf("first heartbeat's frames still returned (%d/%d bytes) after being overwritten", len(req), len(resp))
	}
}

func TestModelSince(t *testing.T) {
	m, _ := analyse(t, scenario("observer-fetch-loop.pcap"), ModelConfig{History: 1000})
	all := m.AppendExchanges(nil, 0, 0)
	since := all[len(all)-10].Seq
	got := m.AppendExchanges(nil, 0, since)
	if len(got) != 9 || got[0].Seq != since+1 {
		t.Errorf("since %d: %d exchanges from seq %d, want 9 from %d", since, len(got), got[0].Seq, since+1)
	}
	if got := m.AppendExchanges(nil, 0, all[len(all)-1].Seq); len(got) != 0 {
		t.Errorf("nothing new, got %d", len(got))
	}
	conn := m.AppendExchanges(nil, 2, 0)
	if got := m.AppendExchanges(nil, 2, conn[len(conn)-3].Seq); len(got) != 2 {
		t.Errorf("since on #2: %d, want 2", len(got))
	}
}

// TestModelEvidence finds a finding's evidence exchanges by packet number,
// and says how many are no longer kept.
func TestModelEvidence(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cfg         ModelConfig
		wantMissing bool
	}{
		{"all kept", ModelConfig{}, false},
		{"rotated out", ModelConfig{History: 10, ConnHistory: 10}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := analyse(t, scenario("observer-fetch-loop.pcap"), tc.cfg)
			fs := m.Findings()
			f := fs[findingIndex(fs, "not-leader-loop")]
			xs, missing := m.Evidence(f.Evidence)
			if got := len(xs) + missing; got != len(f.Evidence) {
				t.Errorf("%d found + %d missing, want %d evidence packets", len(xs), missing, len(f.Evidence))
			}
			if (missing > 0) != tc.wantMissing {
				t.Errorf("%d missing", missing)
			}
			for _, x := range xs {
				ok := false
				for _, e := range f.Evidence {
					ok = ok || e.Packet == x.RespPacket || e.Packet == x.ReqPacket
				}
				if !ok || x.API() != "Fetch" || x.ErrorCode != 6 {
					t.Errorf("exchange %+v is not evidence", x)
				}
			}
			if !tc.wantMissing && (len(xs) == 0 || xs[0].RespPacket != f.Evidence[0].Packet) {
				t.Errorf("first evidence exchange %+v, want response packet %d", xs, f.Evidence[0].Packet)
			}
		})
	}
}

// TestModelConcurrent reads snapshots while the pipeline writes, as the UI
// does; run with -race.
func TestModelConcurrent(t *testing.T) {
	f, err := capture.Open(scenario("observer-fetch-loop.pcap"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := NewModel(ModelConfig{History: 500, FrameBytes: 64 << 10})
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{Flows: flows.DefaultConfig(), Handlers: []flows.Handler{m}, Workers: 1}) // one analyzer, as kfsniff runs the TUI
		m.Sync()
	}()
	var last uint64
	var buf []Exchange
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		for _, c := range m.Conns() {
			_ = strings.Join(c.ClientIDs, ",")
		}
		buf = m.AppendExchanges(buf[:0], 0, last)
		for i := range buf {
			if buf[i].Seq <= last {
				t.Fatalf("seq %d after %d", buf[i].Seq, last)
			}
			last = buf[i].Seq
			m.Frames(&buf[i])
		}
		m.Stats()
		m.Status()
	}
	if st := m.Status(); st.Exchanges != 2020 {
		t.Errorf("%d exchanges, want 2020", st.Exchanges)
	}
}

// synth builds messages without a capture: a connection and Metadata
// exchanges on it.
type synth struct {
	conn  *flows.Conn
	corr  int32
	t     time.Time
	req   []byte
	resp  []byte
	clint string
}

func newSynth(id int, clientID string) *synth {
	c := flows.MakeConn(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(id >> 8), byte(id)}), 40000),
		netip.MustParseAddrPort("10.0.0.1:9092"))
	c.ID = id
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	topic := "orders"
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	s := &synth{conn: c, t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), clint: clientID}
	s.req = kmsgtest.AppendRequestFrame(nil, 1, &clientID, req)[4:]
	s.resp = kmsgtest.AppendResponseFrame(nil, 1, resp)[4:]
	return s
}

// exchange delivers one request and its response to h, as the analyzer
// does: the response's frame valid during the exchange's call, the
// request's during its own call and, kept for the model (flows.Keeper),
// during the exchange's.
func (s *synth) exchange(m *Model, errCode int16) {
	if s.corr == 0 {
		// As flows does, the connection opens before its first request.
		m.OnConnEvent(&flows.ConnEvent{Kind: flows.ConnOpened, Conn: s.conn, Client: s.conn.Client, Server: s.conn.Server})
	}
	s.corr++
	s.conn.Requests++
	s.conn.Responses++
	q := &flows.Message{Conn: &s.conn.ConnInfo, Packet: uint64(2 * s.corr), Time: s.t, Size: len(s.req) + 4,
		Key: 3, Version: 12, Correlation: s.corr, Client: cluster.Client{ID: s.clint}, Role: cluster.RoleMetadata, Frame: s.req}
	m.OnRequest(q)
	p := &flows.Message{Conn: &s.conn.ConnInfo, Response: true, Packet: uint64(2*s.corr + 1), Time: s.t.Add(time.Millisecond),
		Size: len(s.resp) + 4, Key: 3, Version: 12, Correlation: s.corr, Client: cluster.Client{ID: s.clint}, Frame: s.resp}
	if errCode != 0 {
		p.ErrorCodes = []flows.ErrorCount{{Code: errCode, Count: 1}}
	}
	m.OnExchange(&flows.Exchange{Conn: s.conn, Req: q, Resp: p})
}

func TestModelMaxConns(t *testing.T) {
	m := NewModel(ModelConfig{MaxConns: 16})
	for id := 1; id <= 100; id++ {
		s := newSynth(id, "c")
		s.t = s.t.Add(time.Duration(id) * time.Second)
		s.conn.LastSeen = s.t
		s.exchange(m, 0)
	}
	conns := m.Conns()
	if len(conns) > 16+16/8 || len(conns) < 16 {
		t.Fatalf("%d connections tracked, want 16..18", len(conns))
	}
	if conns[len(conns)-1].ID != 100 {
		t.Errorf("the newest connection was forgotten: %+v", conns[len(conns)-1])
	}
	if st := m.Status(); st.Conns != 100 || st.Exchanges != 100 {
		t.Errorf("status %+v: totals must count forgotten connections", st)
	}
}

// TestModelRequestFramesKept: flows keeps each request frame for the
// model (it releases the frame once the request is delivered) until the
// exchange, out of order or unanswered, and the exchange shows its own
// request's frame, cut at MaxFrame.
func TestModelRequestFramesKept(t *testing.T) {
	m := NewModel(ModelConfig{MaxFrame: 40})
	d := flows.NewDelivery(m)
	s := newSynth(1, "a")
	d.Deliver(&flows.Event{Conn: &flows.ConnEvent{Kind: flows.ConnOpened, Conn: s.conn, Client: s.conn.Client, Server: s.conn.Server}})
	msgs := make([]*flows.Message, 3)
	frames := make([][]byte, 3)
	for i := range msgs {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName = strings.Repeat("x", 20*i)
		frames[i] = kmsgtest.AppendRequestFrame(nil, int32(i+1), &s.clint, req)[4:]
		msgs[i] = &flows.Message{Conn: &s.conn.ConnInfo, Packet: uint64(i + 1), Key: 18, Correlation: int32(i + 1), Frame: bytes.Clone(frames[i]), Size: len(frames[i]) + 4}
		d.Deliver(&flows.Event{Req: msgs[i]})
		if msgs[i].Frame != nil {
			t.Fatalf("flows did not release request %d's frame", i+1)
		}
	}
	d.Deliver(&flows.Event{X: &flows.Exchange{Conn: s.conn, Req: msgs[1], Unanswered: true}})
	d.Deliver(&flows.Event{X: &flows.Exchange{Conn: s.conn, Req: msgs[2], NoResponse: true}})
	d.Deliver(&flows.Event{X: &flows.Exchange{Conn: s.conn, Req: msgs[0], Unanswered: true}})
	xs := m.AppendExchanges(nil, 0, 0)
	if len(xs) != 3 {
		t.Fatalf("%d exchanges", len(xs))
	}
	for _, x := range xs {
		req, _ := m.Frames(&x)
		want := frames[x.Correlation-1]
		if !bytes.Equal(req, want[:min(40, len(want))]) {
			t.Errorf("exchange corr %d shows request frame %x, want %x", x.Correlation, req, want[:min(40, len(want))])
		}
	}
}

func TestArena(t *testing.T) {
	a := arena{limit: 100}
	var refs []frameRef
	var want [][]byte
	for i := 0; i < 40; i++ {
		b := []byte(strings.Repeat(string(rune('a'+i%26)), 7+i%5))
		refs = append(refs, a.put(b, len(b)))
		want = append(want, b)
	}
	kept := 0
	for i, r := range refs {
		got, ok := a.get(r)
		if ok {
			kept++
			if string(got) != string(want[i]) {
				t.Errorf("frame %d reads %q, want %q", i, got, want[i])
			}
		}
		if i >= len(refs)-5 && !ok {
			t.Errorf("recent frame %d lost", i)
		}
	}
	if kept == len(refs) || kept < 5 {
		t.Errorf("%d of %d frames kept in 100 bytes", kept, len(refs))
	}
	if cap(a.buf) > 100 {
		t.Errorf("arena grew to %d bytes, limit 100", cap(a.buf))
	}
}

// TestModelNoAllocs fails when the hot path starts allocating again: a
// request and its exchange cost nothing once the buffers are warm.
func TestModelNoAllocs(t *testing.T) {
	m := NewModel(ModelConfig{History: 1000, ConnHistory: 100, FrameBytes: 1 << 20})
	s := newSynth(1, "client")
	for i := 0; i < 5000; i++ {
		s.exchange(m, 6)
	}
	q := &flows.Message{Conn: &s.conn.ConnInfo, Key: 3, Version: 12, Time: s.t, Frame: s.req, Size: len(s.req) + 4}
	p := &flows.Message{Conn: &s.conn.ConnInfo, Response: true, Key: 3, Version: 12, Time: s.t, Frame: s.resp, Size: len(s.resp) + 4,
		ErrorCodes: []flows.ErrorCount{{Code: 6, Count: 1}}}
	x := &flows.Exchange{Conn: s.conn, Req: q, Resp: p}
	allocs := testing.AllocsPerRun(10000, func() {
		m.OnRequest(q)
		m.OnExchange(x)
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per request and exchange, want 0", allocs)
	}
}

// BenchmarkModelOnExchange is the model's cost per exchange (request and
// response) on the pipeline's goroutine.
func BenchmarkModelOnExchange(b *testing.B) {
	m := NewModel(ModelConfig{})
	s := newSynth(1, "client")
	q := &flows.Message{Conn: &s.conn.ConnInfo, Key: 3, Version: 12, Time: s.t, Frame: s.req, Size: len(s.req) + 4}
	p := &flows.Message{Conn: &s.conn.ConnInfo, Response: true, Key: 3, Version: 12, Time: s.t, Frame: s.resp, Size: len(s.resp) + 4,
		ErrorCodes: []flows.ErrorCount{{Code: 6, Count: 1}}}
	x := &flows.Exchange{Conn: s.conn, Req: q, Resp: p}
	b.ReportAllocs()
	b.SetBytes(int64(len(s.req) + len(s.resp)))
	for b.Loop() {
		m.OnRequest(q)
		m.OnExchange(x)
	}
}

// BenchmarkModelPipeline is the whole analysis of the observer loop with
// and without the model, to see what the TUI adds.
func BenchmarkModelPipeline(b *testing.B) {
	for _, withModel := range []bool{false, true} {
		name := "without-model"
		if withModel {
			name = "with-model"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f, err := capture.Open(scenario("observer-fetch-loop.pcap"), 0)
				if err != nil {
					b.Fatal(err)
				}
				var hs []flows.Handler
				if withModel {
					hs = append(hs, NewModel(ModelConfig{}))
				}
				pipeline.Run(context.Background(), []*capture.File{f}, pipeline.Options{Flows: flows.DefaultConfig(), Handlers: hs, Workers: 1})
				f.Close()
			}
		})
	}
}

// TestModelUnknownKeys: requests of thousands of API keys kmsg does not
// know make one "unknown" row of the stats, not a row (and a latency
// histogram) each.
func TestModelUnknownKeys(t *testing.T) {
	m := NewModel(ModelConfig{})
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:9092"))
	m.OnConnEvent(&flows.ConnEvent{Kind: flows.ConnOpened, Conn: c, Client: c.Client, Server: c.Server})
	at := time.Date(2024, 5, 6, 14, 0, 0, 0, time.UTC)
	const n = 5000
	for i := range n {
		key := int16(1000 + i)
		q := &flows.Message{Conn: &c.ConnInfo, Packet: uint64(2*i + 1), Time: at, Key: key, Version: 0, Correlation: int32(i)}
		m.OnRequest(q)
		p := &flows.Message{Conn: &c.ConnInfo, Response: true, Packet: uint64(2*i + 2), Time: at.Add(time.Millisecond), Key: key, Correlation: int32(i)}
		m.OnExchange(&flows.Exchange{Conn: c, Req: q, Resp: p})
	}
	st := m.Stats()
	if len(st) != 1 || st[0].Name != "unknown" || st[0].Requests != n || st[0].Responses != n {
		t.Errorf("stats %d rows (first %+v), want one unknown row of %d requests and responses", len(st), st[0], n)
	}
}

// TestModelFrameRate: at most FrameRate bytes of frames are copied a
// second of capture time; the exchanges past it are listed, counted and
// shown as before, their frames read as not kept; the next second copies
// again.
func TestModelFrameRate(t *testing.T) {
	s := newSynth(1, "c")
	per := len(s.req) + len(s.resp)
	m := NewModel(ModelConfig{FrameRate: 3 * per})
	for range 5 {
		s.exchange(m, 0)
	}
	s.t = s.t.Add(time.Second)
	s.exchange(m, 0)
	xs := m.AppendExchanges(nil, 0, 0)
	if len(xs) != 6 || m.Status().Exchanges != 6 {
		t.Fatalf("%d exchanges listed, %d counted, want 6", len(xs), m.Status().Exchanges)
	}
	for i := range xs {
		req, resp := m.Frames(&xs[i])
		kept := i < 3 || i == 5
		if (req != nil) != kept || (resp != nil) != kept {
			t.Errorf("exchange %d: request kept %v, response kept %v, want %v", i+1, req != nil, resp != nil, kept)
		}
	}
}
