package flows_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/flows"
)

var (
	t0     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	client = netip.MustParseAddrPort("10.0.0.1:50000")
	broker = netip.MustParseAddrPort("10.0.0.2:9092")
)

// collected gathers what the analyzer delivers (copies: flows reuses the
// messages once delivered).
type collected struct {
	requests  []*flows.Message
	exchanges []*flows.Exchange
}

func (c *collected) OnRequest(m *flows.Message) {
	c.requests = append(c.requests, flows.DetachMessage(m))
}
func (c *collected) OnExchange(x *flows.Exchange) { c.exchanges = append(c.exchanges, flows.Detach(x)) }

// analyse writes a capture with script and runs the analyzer over it.
func analyse(t *testing.T, cfg flows.Config, script func(w *gen.Writer)) (*flows.Analyzer, *collected) {
	t.Helper()
	return analyseKeep(t, cfg, script, nil)
}

func apiVersions(v int16) *kmsg.ApiVersionsRequest {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = v
	r.ClientSoftwareName, r.ClientSoftwareVersion = "test", "1"
	return r
}

func apiVersionsResp(v int16) *kmsg.ApiVersionsResponse {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = v
	return r
}

// rawFrame is a size-prefixed frame with the given request header and body.
func rawFrame(key, version int16, corr int32, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 2)
	b = append(b, "id"...)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func TestUnknownKeysAndVersionsAreCountedAndPaired(t *testing.T) {
	a, col := analyse(t, flows.DefaultConfig(), func(w *gen.Writer) {
		c := w.Conn(client, broker, t0, gen.ConnOptions{})
		c.Send(gen.ClientToServer, t0.Add(time.Millisecond), rawFrame(999, 0, 1, []byte{1, 2, 3}))
		c.Send(gen.ServerToClient, t0.Add(2*time.Millisecond), []byte{0, 0, 0, 6, 0, 0, 0, 1, 0, 0})
		c.Send(gen.ClientToServer, t0.Add(3*time.Millisecond), rawFrame(18, 999, 2, nil))
		c.Send(gen.ServerToClient, t0.Add(4*time.Millisecond), []byte{0, 0, 0, 4, 0, 0, 0, 2})
		c.Request(t0.Add(5*time.Millisecond), 3, kmsg.StringPtr("id"), apiVersions(3))
		c.Response(t0.Add(6*time.Millisecond), 3, apiVersionsResp(3))
		c.Close(t0.Add(7 * time.Millisecond))
	})
	st := a.Stats()
	if st.UnknownAPIs[flows.UnknownAPI{Key: 999, Version: 0}] != 1 || st.UnknownAPIs[flows.UnknownAPI{Key: 18, Version: 999}] != 1 {
		t.Errorf("unknown APIs = %v, want key 999 v0 and key 18 v999 once each", st.UnknownAPIs)
	}
	conn := a.Conns()[0]
	if conn.Requests != 3 || conn.Responses != 3 || conn.Unmatched != 0 || conn.FramingErrors != 0 {
		t.Errorf("requests %d responses %d unmatched %d framing %d; want 3 3 0 0", conn.Requests, conn.Responses, conn.Unmatched, conn.FramingErrors)
	}
	if len(col.exchanges) != 3 || col.exchanges[2].Resp.Resp == nil {
		t.Fatalf("exchanges %d; the known ApiVersions after the unknown ones must decode", len(col.exchanges))
	}
	if col.requests[0].Err == nil || col.requests[1].Err == nil {
		t.Errorf("unknown key/version requests must carry an error: %v %v", col.requests[0].Err, col.requests[1].Err)
	}
}

func TestOversizedFrameIsAFramingErrorThenResync(t *testing.T) {
	cfg := flows.DefaultConfig()
	cfg.MaxFrame = 1 << 16
	a, col := analyse(t, cfg, func(w *gen.Writer) {
		c := w.Conn(client, broker, t0, gen.ConnOptions{})
		c.Request(t0.Add(time.Millisecond), 1, kmsg.StringPtr("id"), apiVersions(3))
		c.Response(t0.Add(2*time.Millisecond), 1, apiVersionsResp(3))
		// A size just over --max-frame, then garbage, then a good request.
		bad := binary.BigEndian.AppendUint32(nil, 1<<16+1)
		bad = append(bad, bytes.Repeat([]byte{0xee}, 300)...)
		c.Send(gen.ClientToServer, t0.Add(3*time.Millisecond), bad)
		c.Request(t0.Add(4*time.Millisecond), 2, kmsg.StringPtr("id"), apiVersions(3))
		c.Response(t0.Add(5*time.Millisecond), 2, apiVersionsResp(3))
		c.Close(t0.Add(6 * time.Millisecond))
	})
	conn := a.Conns()[0]
	if conn.FramingErrors != 1 {
		t.Errorf("framing errors = %d, want 1", conn.FramingErrors)
	}
	if conn.Requests != 2 || conn.Responses != 2 || len(col.exchanges) != 2 {
		t.Errorf("requests %d responses %d exchanges %d; want both ApiVersions exchanges", conn.Requests, conn.Responses, len(col.exchanges))
	}
	if conn.Skipped[flows.SkipTooLarge]+conn.Skipped[flows.SkipResync] < 300 {
		t.Errorf("skipped = %v; the 304 bad bytes must be counted", conn.Skipped)
	}
	if len(conn.Problems) == 0 || conn.Problems[0].Packet == 0 {
		t.Errorf("problem with packet number expected, got %+v", conn.Problems)
	}
}

func TestTLSOnKafkaPort(t *testing.T) {
	a, col := analyse(t, flows.DefaultConfig(), func(w *gen.Writer) {
		c := w.Conn(client, broker, t0, gen.ConnOptions{})
		hello := append([]byte{0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00, 0x00, 0xc4, 0x03, 0x03}, bytes.Repeat([]byte{7}, 200)...)
		c.Send(gen.ClientToServer, t0.Add(time.Millisecond), hello)
		c.Send(gen.ServerToClient, t0.Add(2*time.Millisecond), append([]byte{0x16, 0x03, 0x03, 0x00, 0x50}, bytes.Repeat([]byte{9}, 80)...))
		c.Close(t0.Add(3 * time.Millisecond))
	})
	conn := a.Conns()[0]
	if !conn.TLS || conn.Skipped[flows.SkipTLS] != 211+85 || len(col.requests) != 0 || conn.FramingErrors != 0 {
		t.Errorf("TLS %v skipped %v requests %d framing %d; want TLS with all 296 bytes skipped as tls, nothing decoded",
			conn.TLS, conn.Skipped, len(col.requests), conn.FramingErrors)
	}
}

func TestAcksZeroProduceExpectsNoResponse(t *testing.T) {
	_, col := analyse(t, flows.DefaultConfig(), func(w *gen.Writer) {
		c := w.Conn(client, broker, t0, gen.ConnOptions{})
		p := kmsg.NewPtrProduceRequest()
		p.Version, p.Acks, p.TimeoutMillis = 9, 0, 1000
		c.Request(t0.Add(time.Millisecond), 1, kmsg.StringPtr("id"), p)
		c.Request(t0.Add(2*time.Millisecond), 2, kmsg.StringPtr("id"), apiVersions(3))
		c.Response(t0.Add(3*time.Millisecond), 2, apiVersionsResp(3))
		c.Close(t0.Add(4 * time.Millisecond))
	})
	if len(col.exchanges) != 2 || !col.exchanges[0].NoResponse || col.exchanges[1].Resp == nil || col.exchanges[1].Unanswered {
		t.Fatalf("exchanges: %+v", col.exchanges)
	}
	if lat := col.exchanges[1].Latency(); lat != time.Millisecond {
		t.Errorf("latency %v, want 1ms", lat)
	}
}

// TestClientIDsPerRequest: each request carries its own client id when a
// connection alternates between several (the per-connection cache of the
// last one must not answer with another).
func TestClientIDsPerRequest(t *testing.T) {
	ids := []string{"a", "b", "a", "a", "b", "b", "c", "a"}
	_, col := analyse(t, flows.DefaultConfig(), func(w *gen.Writer) {
		c := w.Conn(client, broker, t0, gen.ConnOptions{})
		for i, id := range ids {
			at := t0.Add(time.Duration(2*i+1) * time.Millisecond)
			c.Request(at, int32(i), kmsg.StringPtr(id), apiVersions(3))
			c.Response(at.Add(time.Millisecond), int32(i), apiVersionsResp(3))
		}
		c.Close(t0.Add(time.Second))
	})
	if len(col.requests) != len(ids) {
		t.Fatalf("%d requests, want %d", len(col.requests), len(ids))
	}
	for i, m := range col.requests {
		if m.Client.ID != ids[i] {
			t.Errorf("request %d: client id %q, want %q", i, m.Client.ID, ids[i])
		}
	}
}

// TestSnaplenCut: bytes missing after a packet cut by the snaplen are
// skipped as "snaplen" (not "gap": nothing was lost in the network) with a
// problem saying so, and a request cut that way is neither a request nor
// unanswered; bytes of a segment really lost are still "gap". Either way
// every byte of the frame is counted once.
func TestSnaplenCut(t *testing.T) {
	cases := []struct {
		name    string
		snaplen int
		lose    bool
		reason  string
		says    string
	}{
		{"cut", 400, false, flows.SkipSnaplen, "bytes cut by the snaplen (capture with -s 0 for whole packets) in client->server direction"},
		{"lost", 0, true, flows.SkipGap, "1460 bytes lost in client->server direction"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			w, err := gen.NewWriter(&buf, gen.Options{Snaplen: tc.snaplen})
			if err != nil {
				t.Fatal(err)
			}
			c := w.Conn(client, broker, t0, gen.ConnOptions{})
			// ApiVersions fits in 400 bytes; the 5000-byte Produce
			// does not, nor does any of its segments.
			c.Request(t0.Add(time.Millisecond), 1, kmsg.StringPtr("id"), apiVersions(3))
			c.Response(t0.Add(2*time.Millisecond), 1, apiVersionsResp(3))
			if tc.lose {
				c.Drop(c.Segments() + 1)
			}
			p := kmsg.NewPtrProduceRequest()
			p.Version, p.Acks, p.TimeoutMillis = 9, -1, 1000
			tp := kmsg.NewProduceRequestTopic()
			tp.Topic = "orders"
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Records = gen.RecordBatch(0, t0, []gen.Record{{Value: bytes.Repeat([]byte{'x'}, 4800)}})
			tp.Partitions = append(tp.Partitions, pp)
			p.Topics = append(p.Topics, tp)
			big := c.Request(t0.Add(3*time.Millisecond), 3, kmsg.StringPtr("id"), p)
			c.Close(t0.Add(4 * time.Millisecond))
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			f, err := capture.NewFile("t", 0, &buf)
			if err != nil {
				t.Fatal(err)
			}
			col := &collected{}
			a := flows.New(flows.DefaultConfig(), col)
			var pk capture.Packet
			for f.Next(&pk) == nil {
				a.Packet(&pk)
			}
			a.Close()
			conn := a.Conns()[0]
			if conn.Requests != 1 || conn.Responses != 1 || conn.Unanswered != 0 {
				t.Errorf("%d requests, %d responses, %d unanswered; want the ApiVersions exchange only", conn.Requests, conn.Responses, conn.Unanswered)
			}
			for _, x := range col.exchanges {
				if x.Unanswered {
					t.Errorf("%s corr %d delivered as unanswered", x.Req.Name(), x.Req.Correlation)
				}
			}
			var sum int64
			for _, n := range conn.Skipped {
				sum += n
			}
			if conn.Gaps == 0 || len(conn.Skipped) != 1 || sum != int64(len(big)) {
				t.Errorf("gaps %d, skipped %v; want gaps and all %d bytes of the Produce as %q", conn.Gaps, conn.Skipped, len(big), tc.reason)
			}
			if len(conn.Problems) == 0 || !strings.Contains(conn.Problems[0].What, tc.says) || !strings.Contains(conn.Problems[0].What, "Produce v9 corr 3") {
				t.Errorf("problems %+v, want the first to say %q and name the request", conn.Problems, tc.says)
			}
		})
	}
}
