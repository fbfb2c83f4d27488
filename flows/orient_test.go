package flows_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
)

// analyseKeep is analyse with only the packets keep accepts given to the
// analyzer (a capture that lost them), their numbers unchanged.
func analyseKeep(t *testing.T, cfg flows.Config, script func(w *gen.Writer), keep func(src netip.AddrPort) bool) (*flows.Analyzer, *collected) {
	t.Helper()
	b, err := gen.Script(script)
	if err != nil {
		t.Fatal(err)
	}
	f, err := capture.NewFile("test", 0, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	col := &collected{}
	a := flows.New(cfg, col)
	var p capture.Packet
	for f.Next(&p) == nil {
		if keep == nil || keep(srcOf(t, &p)) {
			a.Packet(&p)
		}
	}
	a.Close()
	return a, col
}

// srcOf reads the IPv4 source address and TCP port of a gen packet.
func srcOf(t *testing.T, p *capture.Packet) netip.AddrPort {
	_, b, _, ok := p.Link.Network(p.Data)
	if !ok || len(b) < 24 || b[0]>>4 != 4 {
		t.Fatalf("packet %d: not IPv4", p.N)
	}
	ihl := int(b[0]&0x0f) * 4
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[12:16])), binary.BigEndian.Uint16(b[ihl:]))
}

func fetchReq(v int16) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version = v
	r.MaxWaitMillis = 500
	r.Topics = []kmsg.FetchRequestTopic{{Topic: "orders", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 42}}}}
	return r
}

func fetchResp(v int16) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version = v
	r.Topics = []kmsg.FetchResponseTopic{{Topic: "orders", Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 0, HighWatermark: 42}}}}
	return r
}

// idleConsumer is the connection a capture joins during a long poll: the
// broker's answer to a Fetch sent before the capture comes first. Its
// correlation id 5, read as a request header, is Produce v5, and the
// throttle time and error code after it read as a correlation id and an
// empty client id: a plausible request header (a kgo consumer attached to
// live showed exactly this). Then the client fetches again (corr 6, 7) and
// is answered.
func idleConsumer(w *gen.Writer, client, server netip.AddrPort) {
	c := w.Conn(client, server, t0, gen.ConnOptions{NoHandshake: true})
	c.Response(t0, 5, fetchResp(11))
	id := "consumer-1"
	c.Request(t0.Add(time.Millisecond), 6, &id, fetchReq(11))
	c.Response(t0.Add(500*time.Millisecond), 6, fetchResp(11))
	c.Request(t0.Add(501*time.Millisecond), 7, &id, fetchReq(11))
	c.Response(t0.Add(time.Second), 7, fetchResp(11))
}

// TestJoinedDuringLongPoll: whether or not the port is a Kafka port, the
// broker is the server, the client's Fetches are counted as such, the
// response from before the capture is unmatched, and no response is read
// as a request.
func TestJoinedDuringLongPoll(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server netip.AddrPort
		by     flows.ClientSide
	}{
		{"kafka port", broker, flows.ClientByPairing},
		{"unknown port", netip.MustParseAddrPort("10.0.0.2:8081"), flows.ClientByPairing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, col := analyse(t, flows.DefaultConfig(), func(w *gen.Writer) { idleConsumer(w, client, tc.server) })
			conns := a.Conns()
			if len(conns) != 1 {
				t.Fatalf("%d connections, want 1", len(conns))
			}
			c := conns[0]
			if c.Client != client || c.Server != tc.server || c.ClientBy != tc.by {
				t.Errorf("connection %v -> %v client by %s; want %v -> %v by %s", c.Client, c.Server, c.ClientBy, client, tc.server, tc.by)
			}
			if len(col.requests) != 2 {
				t.Fatalf("%d requests, want the 2 Fetches", len(col.requests))
			}
			for i, m := range col.requests {
				if m.Key != 1 || m.Version != 11 || m.Correlation != int32(6+i) {
					t.Errorf("request %d: %s v%d corr %d, want Fetch v11 corr %d", i, m.Name(), m.Version, m.Correlation, 6+i)
				}
			}
			if c.Responses != 2 || c.Unmatched != 1 || c.Unanswered != 0 {
				t.Errorf("%d responses, %d unmatched, %d unanswered; want 2, 1, 0", c.Responses, c.Unmatched, c.Unanswered)
			}
			if c.FramingErrors+c.DecodeErrors != 0 || c.Skipped[flows.SkipResync] != 0 {
				t.Errorf("framing errors %d, decode errors %d, skipped %v", c.FramingErrors, c.DecodeErrors, c.Skipped)
			}
		})
	}
}

// TestHeldRequestsKeepTheirPackets: the events of a connection held until
// its client side is known carry the packets their frames arrived in, not
// the packet that decided.
func TestHeldRequestsKeepTheirPackets(t *testing.T) {
	server := netip.MustParseAddrPort("10.0.0.2:8081") // not a Kafka port: held for pairing
	var first uint64
	_, col := analyse(t, flows.DefaultConfig(), func(w *gen.Writer) {
		c := w.Conn(client, server, t0, gen.ConnOptions{NoHandshake: true})
		id := "c"
		first = uint64(w.Packets() + 1)
		c.Request(t0, 1, &id, apiVersions(3))
		c.Request(t0.Add(time.Millisecond), 2, &id, fetchReq(11))
		c.Response(t0.Add(2*time.Millisecond), 1, apiVersionsResp(3))
	})
	if len(col.requests) != 2 {
		t.Fatalf("%d requests, want 2", len(col.requests))
	}
	// Each Send is one data segment and the peer's ACK.
	if p := col.requests[0].Packet; p != first {
		t.Errorf("first request at packet %d, want %d where it was sent", p, first)
	}
	if p := col.requests[1].Packet; p != first+2 {
		t.Errorf("second request at packet %d, want %d", p, first+2)
	}
	if len(col.exchanges) == 0 || col.exchanges[0].Resp == nil || col.exchanges[0].Resp.Packet != first+4 {
		t.Errorf("exchanges %+v: want the ApiVersions answered at packet %d", col.exchanges, first+4)
	}
}

// TestRequestsOnlyUnknownPort: a capture holding the client's packets only
// (a mirror of one direction), on a port kfsniff does not know: decided by
// content when the holding ends, every request found.
func TestRequestsOnlyUnknownPort(t *testing.T) {
	server := netip.MustParseAddrPort("10.0.0.2:8081")
	a, col := analyseKeep(t, flows.DefaultConfig(), func(w *gen.Writer) {
		c := w.Conn(client, server, t0, gen.ConnOptions{NoHandshake: true})
		id := "c"
		for i := range 3 {
			c.Request(t0.Add(time.Duration(i)*time.Millisecond), int32(10+i), &id, fetchReq(12))
		}
	}, func(src netip.AddrPort) bool { return src == client })
	conns := a.Conns()
	if len(conns) != 1 || conns[0].Client != client || conns[0].ClientBy != flows.ClientByContent {
		t.Fatalf("connections %+v: want %v as client, by content", conns, client)
	}
	if len(col.requests) != 3 {
		t.Errorf("%d requests, want 3", len(col.requests))
	}
}

// TestSynAckOnly: a capture that began between the SYN and the SYN-ACK
// still knows the client from the handshake.
func TestSynAckOnly(t *testing.T) {
	server := netip.MustParseAddrPort("10.0.0.2:8081")
	synSeen := false
	a, col := analyseKeep(t, flows.DefaultConfig(), func(w *gen.Writer) {
		c := w.Conn(client, server, t0, gen.ConnOptions{})
		id := "c"
		c.Request(t0.Add(time.Millisecond), 1, &id, apiVersions(3))
		c.Response(t0.Add(2*time.Millisecond), 1, apiVersionsResp(3))
	}, func(src netip.AddrPort) bool {
		if src == client && !synSeen {
			synSeen = true // the SYN, the first packet: not captured
			return false
		}
		return true
	})
	conns := a.Conns()
	if len(conns) != 1 || conns[0].Client != client || conns[0].ClientBy != flows.ClientByHandshake {
		t.Fatalf("connections %+v: want %v as client, by handshake", conns, client)
	}
	if len(col.requests) != 1 || len(col.exchanges) != 1 || col.exchanges[0].Resp == nil {
		t.Errorf("%d requests, %d exchanges: want the ApiVersions answered", len(col.requests), len(col.exchanges))
	}
}

// TestLearnedListener: an address and port seen accepting a connection is
// a server for connections joined mid-way later in the capture, even when
// they hold only the server's bytes.
func TestLearnedListener(t *testing.T) {
	server := netip.MustParseAddrPort("10.0.0.2:8081")
	other := netip.MustParseAddrPort("10.0.0.9:41000")
	a, _ := analyseKeep(t, flows.DefaultConfig(), func(w *gen.Writer) {
		id := "c"
		c := w.Conn(client, server, t0, gen.ConnOptions{})
		c.Request(t0.Add(time.Millisecond), 1, &id, apiVersions(3))
		c.Response(t0.Add(2*time.Millisecond), 1, apiVersionsResp(3))
		m := w.Conn(other, server, t0.Add(time.Second), gen.ConnOptions{NoHandshake: true})
		m.Response(t0.Add(time.Second), 40, fetchResp(11))
		m.Response(t0.Add(time.Second+time.Millisecond), 41, fetchResp(11))
	}, func(src netip.AddrPort) bool { return src != other })
	conns := a.Conns()
	if len(conns) != 2 {
		t.Fatalf("%d connections, want 2", len(conns))
	}
	if c := conns[1]; c.Client != other || c.Server != server || c.ClientBy != flows.ClientByPort || c.Unmatched != 2 {
		t.Errorf("second connection %v -> %v by %s, %d unmatched; want %v -> %v by port, 2 unmatched", c.Client, c.Server, c.ClientBy, c.Unmatched, other, server)
	}
}

// TestQuietHeldConnectionIsDecidedOnTime: a connection held for evidence
// that then goes quiet is decided once the holding window passes (on the
// flush clock), not only when the capture ends: its request reaches the
// handlers before the other connection's later traffic.
func TestQuietHeldConnectionIsDecidedOnTime(t *testing.T) {
	server := netip.MustParseAddrPort("10.0.0.2:8081")
	_, col := analyseKeep(t, flows.DefaultConfig(), func(w *gen.Writer) {
		id := "c"
		q := w.Conn(client, server, t0, gen.ConnOptions{NoHandshake: true})
		q.Request(t0, 3, &id, fetchReq(12))
		busy := w.Conn(netip.MustParseAddrPort("10.0.0.3:42000"), broker, t0, gen.ConnOptions{})
		for i := range 20 {
			at := t0.Add(time.Duration(i) * 500 * time.Millisecond)
			busy.Request(at, int32(i), &id, apiVersions(3))
			busy.Response(at.Add(time.Millisecond), int32(i), apiVersionsResp(3))
		}
	}, func(src netip.AddrPort) bool { return src != server })
	pos := -1
	for i, m := range col.requests {
		if m.Conn.Server == server {
			pos = i
		}
	}
	if pos < 0 {
		t.Fatal("the quiet connection's Fetch was not found")
	}
	if pos > 10 {
		t.Errorf("the quiet connection's Fetch was delivered after %d other requests (10 s of traffic): held until the end", pos)
	}
}

func metadataResp(v int16) *kmsg.MetadataResponse {
	r := kmsg.NewPtrMetadataResponse()
	r.Version = v
	r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "10.0.0.2", Port: 9092}}
	return r
}

// TestResponsesBeforeTheirAPIIsKnown: a capture joined while a connection
// was idle shows answers to requests sent before it began; the
// connection's next request tells their API. Those that decode exactly as
// it are decoded (and reach the handlers before that request, in order);
// one of another API stays a bare unmatched response.
func TestResponsesBeforeTheirAPIIsKnown(t *testing.T) {
	_, col := analyse(t, flows.DefaultConfig(), func(w *gen.Writer) {
		c := w.Conn(client, broker, t0, gen.ConnOptions{NoHandshake: true})
		c.Response(t0, 40, metadataResp(12))
		c.Response(t0.Add(5*time.Second), 41, apiVersionsResp(3))
		c.Response(t0.Add(10*time.Second), 42, metadataResp(12))
		id := "c"
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		c.Request(t0.Add(15*time.Second), 43, &id, req)
		c.Response(t0.Add(15*time.Second+time.Millisecond), 43, metadataResp(12))
	})
	var got []string
	for _, x := range col.exchanges {
		switch {
		case x.Req == nil && x.Resp.Inferred:
			got = append(got, fmt.Sprintf("%d:%s v%d", x.Resp.Correlation, x.Resp.Name(), x.Resp.Version))
		case x.Req == nil:
			got = append(got, fmt.Sprintf("%d:?", x.Resp.Correlation))
		default:
			got = append(got, fmt.Sprintf("%d:paired", x.Resp.Correlation))
		}
	}
	want := []string{"40:Metadata v12", "41:?", "42:Metadata v12", "43:paired"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("responses %v, want %v", got, want)
	}
	for _, x := range col.exchanges {
		if x.Resp.Inferred {
			if r, ok := x.Resp.Resp.(*kmsg.MetadataResponse); !ok || len(r.Brokers) != 1 || r.Brokers[0].NodeID != 1 {
				t.Errorf("corr %d decoded as %+v, want the Metadata body", x.Resp.Correlation, x.Resp.Resp)
			}
		}
	}
}
